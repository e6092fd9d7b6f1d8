"""`kiln validate`, `kiln plan`, `kiln inventory` (kiln/cli/plan.py): exit codes, the plan JSON contract,
inventory files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kiln.cli import main
from kiln.yamlio import load_inventory

ROOT = Path(__file__).resolve().parents[3]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kiln.cli", *args], capture_output=True, text=True, cwd=ROOT, check=False
    )


def test_plan_opens_with_the_summary_and_ends_with_targets() -> None:
    r = run("plan", "prod-h100")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    first = lines.index("SUMMARY")
    assert first < 5 and "oss_nics" in lines[first + 1] and lines[first + 1].split()[0] == "bottleneck"
    labels = [line.split()[0] for line in lines[first + 1 : first + 8]]
    assert labels == ["bottleneck", "GPUs", "capacity", "checkpoint", "degraded", "stage-in", "warnings"]
    assert "ACCEPTANCE TARGETS" in r.stdout and "storage.ior_easy_read" in r.stdout


def test_summary_alone_fits_one_screen(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(ROOT / "stacks" / "Pulumi.prod-h100.yaml"), "--summary"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) <= 24 and "LAYERS" not in out and "ACCEPTANCE TARGETS" not in out
    assert any("21 min" in line for line in lines)  # 200 TB stage-in in minutes, not 1263 s
    assert any("does NOT hold" in line for line in lines)


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_report_formats_chart_the_layers(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(ROOT / "stacks" / "Pulumi.dev.yaml"), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert out.count("<svg") == 2 and "(bottleneck)" in out and "demand" in out
    assert "http" not in out.split("<svg", 1)[1].split("</svg>")[0].replace("http://www.w3.org/2000/svg", "")


def test_validate_broken_spec_exits_2_with_path_and_fix(tmp_path: Path, stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["oss"]["nodes"] = 3
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text(yaml.safe_dump({"config": {"kiln:cluster": data}}))
    r = run("validate", str(path))
    assert r.returncode == 2
    assert "lustre.oss.nodes = 3" in r.stderr and "fix:" in r.stderr
    assert "Traceback" not in r.stderr


def test_inventory_writes_nothing_on_bad_spec(tmp_path: Path, stack: Any) -> None:
    data = stack("lab")
    data["lustre"]["mds"]["mdts"]["per_node"] = 0
    spec = tmp_path / "Pulumi.bad.yaml"
    spec.write_text(yaml.safe_dump({"config": {"kiln:cluster": data}}))
    out = tmp_path / "inv"
    assert main(["inventory", str(spec), "--out", str(out)]) == 2
    assert not out.exists()


CONTRACT = {
    ("monitoring", "hosts"): list,
    ("monitoring", "scrape_interval_s"): int,
    ("monitoring", "alerts"): list,
    ("monitoring", "scrape_targets"): list,
    ("monitoring", "lustre_snapshots"): list,
    ("sizing", "aggregate", "read_GBps"): float,
    ("sizing", "aggregate", "write_GBps"): float,
    ("sizing", "bottleneck", "read"): str,
    ("sizing", "bottleneck", "write"): str,
    ("sizing", "gpus_fed"): int,
    ("sizing", "checkpoint", "bytes"): int,
    ("sizing", "checkpoint", "save_s"): float,
    ("sizing", "checkpoint", "restore_s"): float,
    ("sizing", "checkpoint", "meets_budget"): bool,
}


@pytest.mark.parametrize("stack_name", ["lab", "dev", "prod-h100"])
def test_plan_json_contract(stack_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", stack_name, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "kiln.plan/v2"
    for path, kind in CONTRACT.items():
        node: Any = doc
        for part in path:
            node = node[part]
        assert isinstance(node, kind), (path, node)
    layers = doc["sizing"]["layers"]
    assert {"name", "read_GBps", "write_GBps"} <= set(layers[0])
    names = {la["name"] for la in layers}
    assert {"gpu_demand", "client_nics", "fabric", "oss_nics", "ost_devices"} <= names
    assert doc["sizing"]["bottleneck"]["read"] in names
    for t in doc["targets"]:
        assert {"check", "metric", "unit", "expected", "warn", "fail", "why"} <= set(t)


def test_contract_is_documented() -> None:
    text = (ROOT / "docs" / "plan-json.md").read_text()
    for path in CONTRACT:
        assert ".".join(path) in text
    for key in ("sizing.layers[]", "targets[]", "kiln.plan/v2"):
        assert key in text


def test_inventory_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inventory", "lab", "--out", str(tmp_path)]) == 0
    # The next step an installed kiln has: kiln deploy (a checkout's ansible/ is not in the wheel).
    assert f"(next: kiln deploy lab --inventory {tmp_path};" in capsys.readouterr().out
    hosts = load_inventory((tmp_path / "hosts.yml").read_text())
    assert set(hosts["all"]["children"]["kiln_lustre_oss"]["hosts"]) == {"oss01", "oss02"}
    oss = load_inventory((tmp_path / "host_vars" / "oss01.yml").read_text())
    assert [t["name"] for t in oss["lustre_server_targets"]] == ["lab-OST0000", "lab-OST0001"]
    assert oss["ansible_host"] == "10.89.10.5"  # the lab is reached over SSH at management addresses
    assert oss["ansible_user"] == "root" and "ansible_connection" not in oss
    pool = load_inventory((tmp_path / "group_vars" / "kiln_pool_gpu.yml").read_text())
    assert pool["nccl_env"]["NCCL_IB_DISABLE"] == "1"
    everything = "".join(p.read_text() for p in tmp_path.rglob("*.yml"))
    assert "secret" not in everything.lower().replace("credentials_secret", "")


def test_validate_fail_on_warning_fails_a_stack_with_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    """--fail-on error (the default) passes a stack that has only warnings; --fail-on warning fails it (exit 2) and
    prints every warning; a stack without warnings passes both."""
    assert main(["validate", "lab"]) == 0
    assert "lab: spec is valid" in capsys.readouterr().out
    assert main(["validate", "lab", "--fail-on", "warning"]) == 2
    out, err = capsys.readouterr()
    assert "warning" in out and "--fail-on warning fails" in out
    assert "objectstore.nodes = 1" in err and "fix: add S3 gateways" in err
    assert main(["validate", "dev", "--fail-on", "warning"]) == 0
    assert main(["validate", "dev", "--fail-on", "error"]) == 0
    with pytest.raises(SystemExit):
        main(["validate", "dev", "--fail-on", "notice"])
