"""kiln's packages import one way: each imports only the kiln packages ALLOWED names for it.

The same table is in docs/architecture.md ("The packages and who imports whom"); a test keeps the two equal. Every
import counts: module level, function-local and under TYPE_CHECKING, absolute and relative.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
KILN = ROOT / "kiln"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

ANY = frozenset({"any"})  # the command line may import every package; nothing may import it

#: package → the kiln packages it may import (docs/architecture.md has the same table, and why).
ALLOWED: dict[str, frozenset[str]] = {
    "kiln": frozenset(),
    "kiln.yamlio": frozenset(),
    "kiln.templating": frozenset(),
    "kiln.redact": frozenset(),
    "kiln.lustre": frozenset(),
    "kiln.knowledge": frozenset({"kiln.yamlio", "kiln.lustre"}),
    "kiln.spec": frozenset({"kiln.knowledge", "kiln.yamlio"}),
    "kiln.plan": frozenset({"kiln.spec", "kiln.knowledge", "kiln.lustre"}),
    "kiln.node": frozenset({"kiln.plan"}),
    "kiln.dataflow": frozenset({"kiln.plan", "kiln.redact"}),
    "kiln.stream": frozenset({"kiln.plan", "kiln.knowledge"}),
    "kiln.render": frozenset({"kiln.plan", "kiln.spec", "kiln.knowledge", "kiln.node", "kiln.templating",
                              "kiln.yamlio"}),
    "kiln.verify": frozenset({"kiln.plan", "kiln.spec", "kiln.knowledge", "kiln.lustre", "kiln.templating",
                              "kiln.yamlio", "kiln.stream"}),
    "kiln.policy": frozenset({"kiln.plan", "kiln.render"}),
    "kiln.infra": frozenset({"kiln.plan", "kiln.render", "kiln.spec", "kiln.knowledge"}),
    "kiln.deploy": frozenset({"kiln.plan", "kiln.yamlio"}),
    "kiln.lab": frozenset({"kiln.plan", "kiln.render", "kiln.spec", "kiln.deploy"}),
    "kiln.docgen": frozenset({"kiln.knowledge", "kiln.spec", "kiln.yamlio"}),
    "kiln.cli": ANY,
}


def unit_of(module: str, kiln: Path = KILN) -> str:
    """The package (or top-level module) of kiln a dotted module name belongs to: kiln.plan.model → kiln.plan.
    `from kiln import x` names kiln.x when that is a module or package of kiln, else kiln itself."""
    parts = module.split(".")
    if parts[0] != "kiln":
        return ""
    if len(parts) == 1:
        return "kiln"
    if (kiln / parts[1]).is_dir() or (kiln / f"{parts[1]}.py").is_file():
        return f"kiln.{parts[1]}"
    return "kiln"


def _files(kiln: Path) -> list[Path]:
    """Every Python file of kiln, kiln/lustre (a symlink to plugins/module_utils) included; not kiln/collection,
    the kiln.cluster collection the wheel carries as data (Ansible imports it as ansible_collections.kiln.cluster)."""
    out = []
    for top, dirs, names in os.walk(kiln, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and Path(top, d) != kiln / "collection")
        out += [Path(top) / n for n in sorted(names) if n.endswith(".py")]
    return out


def _module_name(path: Path, kiln: Path) -> list[str]:
    parts = ["kiln", *path.relative_to(kiln).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def imports(path: Path, kiln: Path = KILN) -> Iterator[tuple[str, int]]:
    """Every kiln module a file imports, with the line: `import`, `from … import`, relative or absolute, at any
    depth of the file (functions, `if TYPE_CHECKING:`)."""
    name = _module_name(path, kiln)
    package = name if path.name == "__init__.py" else name[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module == "kiln":  # `from kiln import knowledge` imports the package kiln.knowledge
                for alias in node.names:
                    yield f"kiln.{alias.name}", node.lineno
            else:
                yield module, node.lineno


def graph(kiln: Path = KILN) -> dict[str, dict[str, list[str]]]:
    """unit → imported unit → the places (file:line) that import it; imports within a unit are left out."""
    out: dict[str, dict[str, list[str]]] = {}
    for path in _files(kiln):
        src = unit_of(".".join(_module_name(path, kiln)), kiln)
        edges = out.setdefault(src, {})
        for module, line in imports(path, kiln):
            dst = unit_of(module, kiln)
            if dst and dst != src:
                edges.setdefault(dst, []).append(f"{path.relative_to(kiln.parent)}:{line}")
    return out


def violations(found: dict[str, dict[str, list[str]]]) -> list[str]:
    problems = []
    for src, edges in sorted(found.items()):
        allowed = ALLOWED.get(src, frozenset())
        if allowed == ANY:
            continue
        for dst, places in sorted(edges.items()):
            if dst not in allowed:
                problems.append(f"{src} imports {dst} ({', '.join(places)})")
    return problems


def test_every_package_imports_only_what_the_table_allows() -> None:
    problems = violations(graph())
    assert not problems, "imports against the flow of docs/architecture.md:\n" + "\n".join(problems)


def test_nothing_but_the_command_line_imports_it() -> None:
    importers = sorted(src for src, edges in graph().items() if "kiln.cli" in edges and src != "kiln.cli")
    assert importers == []
    assert all("kiln.cli" not in allowed for allowed in ALLOWED.values())


def test_every_package_has_a_row_and_every_row_a_package() -> None:
    units = {unit_of(".".join(_module_name(p, KILN))) for p in _files(KILN)}
    assert units == set(ALLOWED)


def _doc_table() -> dict[str, frozenset[str]]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## The packages and who imports whom", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, frozenset[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and re.fullmatch(r"`kiln(\.\w+)?`", cells[0]):
            names = frozenset(re.findall(r"`(kiln(?:\.\w+)?)`", cells[1]))
            rows[cells[0].strip("`")] = ANY if cells[1] == "any" else names
    return rows


def test_the_table_is_the_one_in_the_architecture_doc() -> None:
    assert _doc_table() == ALLOWED


def test_the_reader_sees_every_form_of_import(tmp_path: Path) -> None:
    """The check could fail: an upward import in each form the code uses is found, with its place."""
    kiln = tmp_path / "kiln"
    for d in ("spec", "plan", "render", "verify", "cli"):
        (kiln / d).mkdir(parents=True)
        (kiln / d / "__init__.py").write_text("")
    (kiln / "__init__.py").write_text('__version__ = "0"\n')
    (kiln / "yamlio.py").write_text("")
    (kiln / "spec" / "models.py").write_text("from kiln.plan.model import Plan\n")  # absolute
    (kiln / "spec" / "checks.py").write_text("def f():\n    import kiln.render.inventory\n")  # function-local
    (kiln / "plan" / "model.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..verify import api\n")  # relative, typing
    (kiln / "render" / "report.py").write_text("from kiln import verify, yamlio, __version__\n")  # from kiln import
    (kiln / "verify" / "api.py").write_text("from .. import cli\nfrom . import api\n")
    (kiln / "cli" / "main.py").write_text("from kiln.render import report\n")
    found = graph(kiln)
    assert found["kiln.spec"] == {"kiln.plan": ["kiln/spec/models.py:1"], "kiln.render": ["kiln/spec/checks.py:2"]}
    assert found["kiln.plan"] == {"kiln.verify": ["kiln/plan/model.py:3"]}
    assert found["kiln.render"] == {"kiln": ["kiln/render/report.py:1"], "kiln.verify": ["kiln/render/report.py:1"],
                                    "kiln.yamlio": ["kiln/render/report.py:1"]}
    assert found["kiln.verify"] == {"kiln.cli": ["kiln/verify/api.py:1"]}
    assert violations(found) == [
        "kiln.plan imports kiln.verify (kiln/plan/model.py:3)",
        "kiln.render imports kiln (kiln/render/report.py:1)",
        "kiln.render imports kiln.verify (kiln/render/report.py:1)",
        "kiln.spec imports kiln.plan (kiln/spec/models.py:1)",
        "kiln.spec imports kiln.render (kiln/spec/checks.py:2)",
        "kiln.verify imports kiln.cli (kiln/verify/api.py:1)",
    ]
