"""The plan is the adapters' only input: the inventory, firewall, manifests, policy pack, Pulumi program, lab and
verify's Job judging take a Plan, never the spec (what they need of it is carried in the plan)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ADAPTERS = [ROOT / "kiln" / d for d in ("render", "infra", "lab")] + [
    ROOT / "kiln" / "policy" / "enforce.py", ROOT / "kiln" / "verify" / "jobs.py", ROOT / "__main__.py"]


def _files() -> list[Path]:
    out: list[Path] = []
    for path in ADAPTERS:
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [p for p in out if p.name != "cli.py"]  # the command line loads the stack, then hands on the plan


def test_no_adapter_takes_or_imports_the_spec_model() -> None:
    found = []
    for path in _files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name == "ClusterSpec" for a in node.names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports ClusterSpec")
            annotation = node.annotation if isinstance(node, ast.arg) else None
            if isinstance(node, ast.arg) and annotation is not None and "ClusterSpec" in ast.unparse(annotation):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: parameter {node.arg}: ClusterSpec")
    assert found == [], "\n".join(found)
