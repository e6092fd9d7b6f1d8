"""`kiln render` and `kiln monitoring` (kiln/cli/render.py): files, exit codes, the policy config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kiln.cli import main
from kiln.plan import build_plan
from kiln.render.manifests import COMPONENT_KINDS, policy_config
from kiln.spec import load_stack

ROOT = Path(__file__).resolve().parents[3]


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


def test_monitoring_writes_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitoring", "lab", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "prometheus" / "prometheus.yml").is_file()
    assert (tmp_path / "grafana" / "dashboards" / "overview.json").is_file()
    assert "alert rules" in capsys.readouterr().out
