"""`kiln render <stack> --out DIR`: files, exit codes, and the golden files of the dev stack.

Refresh the golden files after an intended change, then review the diff:

    KILN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/infra -k golden
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from kiln.plan import build_plan
from kiln.render.manifests import COMPONENT_KINDS, policy_config, render_manifests
from kiln.spec import load_stack

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "dev"
REFRESH = "KILN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/infra -k golden"


def kiln(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kiln.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          check=False)


def test_render_writes_one_multi_document_file_per_component(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = kiln("render", "prod-h100", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(k.file for k in COMPONENT_KINDS)
    for kind in COMPONENT_KINDS:
        docs = list(yaml.safe_load_all((out / kind.file).read_text()))
        assert docs and all(d["apiVersion"] and d["kind"] and d["metadata"]["name"] for d in docs)


def test_render_exits_2_on_a_bad_spec_and_writes_nothing(tmp_path: Path) -> None:
    bad = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    bad["config"]["kiln:cluster"]["compute"]["pools"][0]["gpu"]["count"] = 99
    stack_file = tmp_path / "Pulumi.bad.yaml"
    stack_file.write_text(yaml.safe_dump(bad))
    out = tmp_path / "out"
    r = kiln("render", str(stack_file), "--out", str(out))
    assert r.returncode == 2
    assert "compute.pools[0].gpu.count" in r.stderr and "fix:" in r.stderr
    assert not out.exists()


def test_render_writes_the_policy_config_outside_the_manifests(tmp_path: Path) -> None:
    out, cfg = tmp_path / "out", tmp_path / "policy-config.json"
    r = kiln("render", "dev", "--out", str(out), "--policy-config", str(cfg))
    assert r.returncode == 0, r.stderr
    spec = load_stack("dev")
    assert json.loads(cfg.read_text()) == policy_config(build_plan(spec, "dev"))
    assert not list(out.glob("*.json"))  # a GitOps directory holds manifests only


def test_golden_dev_render() -> None:
    spec = load_stack("dev")
    files = render_manifests(build_plan(spec, "dev"))
    if os.environ.get("KILN_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for stale in GOLDEN.glob("*.yaml"):
            if stale.name not in files:
                stale.unlink()
        for name, text in files.items():
            (GOLDEN / name).write_text(text, encoding="utf-8")
    assert sorted(p.name for p in GOLDEN.glob("*.yaml")) == sorted(files), \
        f"golden files missing: {REFRESH}"
    for name, text in files.items():
        assert (GOLDEN / name).read_text(encoding="utf-8") == text, \
            f"{name} differs from tests/golden/dev/{name}; if intended: {REFRESH}"
