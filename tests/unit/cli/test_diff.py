"""`kiln diff`: the recorded plan read from an inventory directory or a file, text and JSON, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kiln.cli import main
from kiln.cli.common import EXIT_DISRUPTIVE, EXIT_OK, EXIT_REFUSED, EXIT_SPEC
from kiln.plan import build_plan
from kiln.plan.record import host_records
from kiln.spec import load_stack
from kiln.yamlio import load_inventory


def _record_dir(tmp_path: Path, stack: str = "lab") -> Path:
    """An inventory directory as the record play leaves it: deployed/<host>.json."""
    folder = tmp_path / "inv" / "deployed"
    folder.mkdir(parents=True)
    for host, record in host_records(build_plan(load_stack(stack))).items():
        (folder / f"{host}.json").write_text(json.dumps(record), encoding="utf-8")
    return tmp_path / "inv"


def _stack_with(tmp_path: Path, old: str, new: str) -> str:
    text = Path("stacks/Pulumi.lab.yaml").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "Pulumi.lab.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return str(path)


def test_no_change_exits_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "lab", "--recorded", str(_record_dir(tmp_path))]) == EXIT_OK
    assert "no changes" in capsys.readouterr().out


def test_a_disruptive_change_exits_3_and_json_lists_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = _stack_with(tmp_path, "retention_days: 2", "retention_days: 9")
    assert main(["diff", stack, "--recorded", str(_record_dir(tmp_path)), "--json"]) == EXIT_DISRUPTIVE
    doc = json.loads(capsys.readouterr().out)
    assert doc["worst"] == "service-restart" and doc["exit_code"] == EXIT_DISRUPTIVE
    assert [(c["host"], c["setting"], c["old"], c["new"]) for c in doc["changes"]] == [
        ("s3-01", "monitoring/retention_days", 2, 9)]


def test_a_refused_change_exits_4_with_the_reason_and_runbook(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    stack = _stack_with(tmp_path, "fsname: lab", "fsname: lab2")
    assert main(["diff", stack, "--recorded", str(_record_dir(tmp_path))]) == EXIT_REFUSED
    out = capsys.readouterr().out
    assert "refused         filesystem/fsname" in out and "docs/runbooks/kiln-diff.md" in out


def test_one_host_record_file_is_a_recorded_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = _record_dir(tmp_path) / "deployed" / "gpu001.json"
    assert main(["diff", "lab", "--recorded", str(one), "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert {c["change"] for c in doc["changes"]} == {"add"} and "gpu001" not in {c["host"] for c in doc["changes"]}


def test_a_missing_or_bad_record_is_a_usage_error_without_traceback(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "lab", "--recorded", str(tmp_path / "none")]) == EXIT_SPEC
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert main(["diff", "lab", "--recorded", str(bad)]) == EXIT_SPEC
    assert main(["diff", "dev", "--recorded", str(_record_dir(tmp_path))]) == EXIT_SPEC
    err = capsys.readouterr().err
    assert "Traceback" not in err and "fix:" in err and "not a readable JSON record" in err
    assert "the recorded plan is of stack lab, not dev" in err


def test_the_inventory_carries_each_host_record(tmp_path: Path) -> None:
    assert main(["inventory", "lab", "--out", str(tmp_path)]) == 0
    plan = build_plan(load_stack("lab"))
    for host, record in host_records(plan).items():
        rendered = load_inventory((tmp_path / "host_vars" / f"{host}.yml").read_text())["kiln_deployed_record"]
        assert rendered == record and rendered["plan_digest"] == plan.spec_digest


def test_a_record_naming_the_fence_login_is_root_only_and_holds_no_secret() -> None:
    records = host_records(build_plan(load_stack("prod-h100")))
    oss, gpu = records["oss01"], records["gpu001"]
    assert oss["settings"]["target/prod-OST0000.device"] and oss["root_only"] is True
    assert gpu["root_only"] is False and gpu["settings"]["version/gpu_driver"] == 550
    text = json.dumps(records).lower()
    assert "secret" not in text and "password" not in text
