"""The lab end to end: `kiln lab up` → report with real figures → idempotent re-run → `kiln lab down`.

Runs the real thing on this machine: podman hosts, ansible/site.yml, SeaweedFS, iperf3, fio, warp.
It takes over the `lab` stack (a developer's running lab is reused and removed at the end).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kiln.lab.lifecycle import LAB_CANNOT_MEASURE
from kiln.plan import build_plan
from kiln.spec import load_stack

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / ".kiln" / "lab" / "report" / "report.json"

pytestmark = pytest.mark.lab


def kiln(*args: str, timeout: float = 2400) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "kiln.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    sys.stdout.write(proc.stdout[-6000:])
    sys.stderr.write(proc.stderr[-3000:])
    return proc


def results(report: dict[str, Any], check: str) -> list[dict[str, Any]]:
    rows = [r for r in report["results"] if r["check"] == check]
    assert rows, f"no {check} rows in the report"
    return rows


def assert_real_figures(report: dict[str, Any]) -> None:
    for check, unit in (
        ("network.iperf3", "Gb/s"),
        ("storage.fio_local_read", "GB/s"),
        ("storage.fio_local_write", "GB/s"),
        ("objectstore.s3_get", "GB/s"),
        ("objectstore.s3_put", "GB/s"),
    ):
        for row in results(report, check):
            assert row["verdict"] in ("PASS", "WARN"), (check, row["verdict"], row["message"])
            m = row["measured"]
            assert m is not None and m["unit"] == unit and m["n"] >= 1
            assert m["median"] > 0 and m["min"] <= m["median"] <= m["max"], (check, m)
    # The data-flow checks are measured on a mover host against the lab's SeaweedFS and judged (a ratio the lab
    # cannot reach is a FAIL with its figures, never an ERROR or a pass without a measurement).
    for check in (
        "dataflow.stage_in",
        "dataflow.stage_in_efficiency",
        "dataflow.resync",
        "dataflow.resync_time",
        "dataflow.checkpoint_blocked",
        "dataflow.checkpoint_restore",
        "dataflow.model_distribution",
        "dataflow.resume",
    ):
        for row in results(report, check):
            assert row["verdict"] in ("PASS", "WARN", "FAIL"), (check, row["verdict"], row["message"])
            m = row["measured"]
            assert m is not None and m["n"] >= 1 and m["min"] <= m["median"] <= m["max"], (check, m)
            # a FAIL the lab cannot help is waived in the lab stack (acceptance.waivers), with its reason
            assert row["verdict"] != "FAIL" or (row["waiver"] or "").startswith("lab: "), (check, row["message"])
    # Model distribution is driven by the filer's change events (nobody asks the mover): a model the check PUT
    # reached all three receiver directories, and the lake's hosts sent at most 1.2× its bytes in every run.
    for row in results(report, "dataflow.model_distribution"):
        assert row["verdict"] == "PASS", row["message"]
        assert row["measured"]["max"] <= 1.2, row["measured"]
        assert any("3/3 receivers got the" in d and "unasked" in d for d in row["details"]), row["details"]
    for check in (
        "conformance.sysctls",
        "conformance.nccl_conf",
        "conformance.objectstore_services",
        "conformance.objectstore_buckets",
        "security.objectstore_exposure",  # roles/firewall: compute hosts reach S3, not filer/volume/master
    ):
        for row in results(report, check):
            assert row["verdict"] == "PASS", (check, row["message"])
    # The lab has no GPUs, RDMA devices or Lustre kernel: those rows say so, and never pass.
    for check in (
        "gpu.h2d_bw",
        "storage.fio_lustre_read",
        "storage.ior_easy_read",
        "conformance.lnet",
        "conformance.gpus",
        "conformance.rdma_ports",
    ):
        for row in results(report, check):
            assert row["verdict"] == "NOT_APPLICABLE", (check, row["verdict"])
            assert "not applicable" in row["message"].lower() and len(row["message"]) > 30, row["message"]


def assert_monitoring(report: dict[str, Any]) -> None:
    """Prometheus on the lab scrapes every planned target, every panel has data (or says why it cannot), each
    injected fault fired its alert within its bound and cleared, and kiln-health judged every compute host."""
    for check in ("monitoring.targets_up", "monitoring.panels_with_data"):
        (row,) = results(report, check)
        assert row["verdict"] == "PASS", (check, row["message"], row["details"])
    for fault in ("objectstore_volume_down", "disk_fill", "sysctl_drift", "exporter_down"):
        (row,) = results(report, f"monitoring.fault_{fault}")
        assert row["verdict"] == "PASS", (fault, row["message"])
        m = row["measured"]
        assert m["n"] == 1 and 0 < m["median"] <= row["target"]["fail"], (fault, m)
        assert any("cleared after" in d for d in row["details"]), row["details"]
    for check in ("health.gpu", "health.rdma", "health.lustre", "health.lnet", "health.clock", "health.nvme"):
        rows = results(report, check)
        assert len(rows) == 2, (check, rows)  # gpu001, gpu002
        for row in rows:
            assert row["verdict"] in ("PASS", "FAIL", "NOT_APPLICABLE"), (check, row["verdict"], row["message"])
            if row["verdict"] == "NOT_APPLICABLE":
                assert "not applicable on this host:" in row["message"] and len(row["message"]) > 40
    # the lab's hosts have no GPU, RDMA or Lustre kernel: kiln-health says so, never passes them
    for check in ("health.gpu", "health.rdma", "health.lustre", "health.lnet"):
        assert {r["verdict"] for r in results(report, check)} == {"NOT_APPLICABLE"}, check
    (row,) = [r for r in results(report, "health.nvme") if r["subject"] == "gpu001"]
    assert row["verdict"] == "PASS", row["message"]


def assert_lab_verdict(report: dict[str, Any]) -> None:
    """The lab's sign-off is INCOMPLETE, and what is missing is exactly what a lab cannot measure: the checks the
    plan requires of its GPUs, Lustre and clocks (kiln.lab.lifecycle.LAB_CANNOT_MEASURE), each NOT APPLICABLE."""
    summary = report["summary"]
    assert summary["verdict"] == "INCOMPLETE" and summary["exit_code"] == 3, summary
    assert not summary["failed"], summary["failed"]  # waived stage-in FAILs only
    plan = build_plan(load_stack("lab"), source="lab")
    expected = {t.check for t in plan.targets if t.required and set(t.requires) & set(LAB_CANNOT_MEASURE)}
    missing = summary["missing"]
    assert {m["check"] for m in missing} == expected, missing
    assert all(m["verdict"] == "NOT_APPLICABLE" for m in missing), missing
    assert {"gpu.h2d_bw", "conformance.gpus", "storage.ior_easy_read", "health.clock"} <= expected


def test_lab_up_verify_rerun_down() -> None:
    first = kiln("lab", "up")
    assert first.returncode == 0, "kiln lab up failed"
    assert "[lab 4/5 configure] recap:" in first.stdout
    assert "not applicable" in first.stdout.lower()
    assert "sign-off INCOMPLETE, as a lab's must be" in first.stdout
    report = json.loads(REPORT.read_text())
    assert report["stack"] == "lab"
    assert_real_figures(report)
    assert_monitoring(report)
    assert_lab_verdict(report)

    # The warm re-run: the converge changes nothing, every check is judged again, and the benchmarks measured
    # above are reused (nothing they depend on changed) while every read runs again.
    second = kiln("lab", "up", "--skip-prepare")
    assert second.returncode == 0
    assert "changed=0 in total" in second.stdout, "the second converge changed something"
    again = json.loads(REPORT.read_text())
    assert again["started"] != report["started"], "verification was not re-run"
    assert {(r["check"], r["subject"]) for r in again["results"]} == {(r["check"], r["subject"])
                                                                       for r in report["results"]}
    before = {(r["check"], r["subject"]): r for r in report["results"]}
    for row in again["results"]:
        old = before[(row["check"], row["subject"])]
        if row["kind"] == "conformance" or old["measured"] is None:
            assert not row["reused_from"], row  # reads and rows without a measurement run again
        else:
            assert row["reused_from"] and row["samples"] == old["samples"], row
            assert row["verdict"] == old["verdict"] and "reused from" in row["message"], row
    assert again["summary"]["reused"] > 0
    assert_lab_verdict(again)
    # Each step's time is recorded (docs/benchmarks.md quotes them; no budget is asserted here).
    timings = json.loads((ROOT / ".kiln" / "lab" / "timings.json").read_text())
    assert timings["changed"] == 0 and timings["verify_exit"] == 0 and timings["sign_off"] == "INCOMPLETE"
    assert set(timings["seconds"]) == {"prepare", "hosts", "inventory", "configure", "verify", "total"}
    # The lab reaches its hosts over SSH with host keys pinned from podman, never trusted on first use.
    ssh_config = (ROOT / ".kiln" / "lab" / "ssh" / "config").read_text()
    assert "StrictHostKeyChecking yes" in ssh_config
    known = (ROOT / ".kiln" / "lab" / "ssh" / "known_hosts").read_text().splitlines()
    assert len(known) == 6 and all(line.split()[1] == "ssh-ed25519" for line in known)

    assert kiln("lab", "down").returncode == 0
    status = kiln("lab", "status")
    assert "containers: 0" in status.stdout and "networks: 0" in status.stdout and "volumes: 0" in status.stdout
    left = subprocess.run(
        ["podman", "ps", "-a", "--filter", "label=io.kiln.lab=lab", "-q"], capture_output=True, text=True, check=True
    )
    assert left.stdout.strip() == ""
