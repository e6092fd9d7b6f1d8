"""kiln-health's verdicts on the cases an independent review found wrong: idle Lustre imports drained, planned
parts passed as not applicable, nvidia-smi error strings passed, another filesystem at a planned mount point,
XIDs unchecked, probe errors ending the loop. Fixtures: tests/fixtures/health (each with its .source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.node import health
from kiln.node.health import Expect, Result, check_xid, import_verdict, run_checks, xid_is_hardware

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
IDLE = FIX / "idle"
OST, MDT = "temp-OST0004", "temp-MDT0000"
EXPECT = Expect(host="gpu001", gpus=2, rdma={}, lustre_mount="/lustre", server_nids=[],
                nvme_mount="/mnt/local-nvme", lustre_targets=[MDT, OST])
SMI_OK = (0, "0, 0, Not Active\n1, 0, Not Active\n")


def fake(outputs: dict[str, tuple[int, str]]):  # type: ignore[no-untyped-def]
    """TEST DOUBLE of the command runner: answers by program name; None (not installed) otherwise."""
    def runner(argv: list[str]) -> tuple[int, str] | None:
        return outputs.get(argv[0])
    return runner


def one(results: list[Result], check: str) -> Result:
    (r,) = [r for r in results if r.check == check]
    return r


# --- Lustre imports ----------------------------------------------------------------------------------------


def test_an_idle_import_is_healthy_as_lustre_counts_it() -> None:
    """Lustre >= 2.12 parks an unused OSC import IDLE (osc_idle_timeout); osc_import_not_healthy() counts FULL and
    IDLE as healthy. The fixture is a real 2.12.7 client's IDLE import."""
    r = one(run_checks(EXPECT, IDLE, fake({})), "health.lustre")
    assert r.status == "ok", r.line()
    assert "2 OST/MDT imports FULL or IDLE" in r.detail


@pytest.mark.parametrize(("edit", "why"), [
    (lambda t: t.replace("state: IDLE", "state: DISCONN"), "DISCONN"),
    (lambda t: t.replace("state: IDLE", "state: CONNECTING"), "CONNECTING"),
    (lambda t: t.replace("[ replayable,", "[ invalid, replayable,"), "IDLE, invalid"),
    (lambda t: t.replace("[ replayable,", "[ deactive, replayable,"), "IDLE, deactive"),
    (lambda t: t.replace("    state: IDLE\n", ""), "no state line"),
], ids=["disconnected", "connecting", "invalid", "deactivated", "no-state"])
def test_an_import_lustre_calls_unhealthy_is_a_fault(edit, why) -> None:  # type: ignore[no-untyped-def]
    text = (IDLE / "proc/fs/lustre/osc/temp-OST0004-osc-ffff9068ea7c9000/import").read_text()
    assert import_verdict(text) is None
    assert import_verdict(edit(text)) == why


def _client(tmp_path: Path, imports: dict[str, str]) -> Path:
    (tmp_path / "sys/fs/lustre").mkdir(parents=True)
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/mounts").write_text((IDLE / "proc/mounts").read_text())
    text = (IDLE / "proc/fs/lustre/osc/temp-OST0004-osc-ffff9068ea7c9000/import").read_text()
    for name, state in imports.items():
        kind = "osc" if "-OST" in name else "mdc"
        d = tmp_path / "proc/fs/lustre" / kind / f"{name}-{kind}-ffff9068ea7c9000"
        d.mkdir(parents=True)
        (d / "import").write_text(text.replace("state: IDLE", f"state: {state}"))
    return tmp_path


def test_fewer_imports_than_the_plans_targets_is_a_fault(tmp_path: Path) -> None:
    root = _client(tmp_path, {OST: "FULL"})
    r = one(run_checks(EXPECT, root, fake({})), "health.lustre")
    assert r.code == 32 and MDT in r.detail and "1 targets imported of the plan's 2" in r.detail


def test_zero_imports_is_not_healthy(tmp_path: Path) -> None:
    root = _client(tmp_path, {})
    assert one(run_checks(EXPECT, root, fake({})), "health.lustre").code == 32
    # an expectations file without the plan's targets still asks for one import at least
    old = Expect(host="gpu001", gpus=0, rdma={}, lustre_mount="/lustre", server_nids=[])
    assert one(run_checks(old, root, fake({})), "health.lustre").code == 32


def test_an_unreadable_import_file_is_a_fault_not_a_crash(tmp_path: Path) -> None:
    root = _client(tmp_path, {OST: "FULL", MDT: "FULL"})
    imp = next((root / "proc/fs/lustre/osc").glob("*/import"))
    imp.unlink()
    imp.mkdir()  # reading a directory raises IsADirectoryError, as a vanished or unreadable proc file would
    r = one(run_checks(EXPECT, root, fake({})), "health.lustre")
    assert r.code == 31 and "import unreadable" in r.detail


def test_expectations_carry_the_plans_targets() -> None:
    from kiln.cli.common import load

    _, plan = load("lab")
    e = health.expectations(plan, "gpu001", "/mnt/local-nvme")
    assert e.lustre_targets == sorted(t.name for t in plan.lustre_targets if t.kind in ("ost", "mdt"))
    assert len(e.lustre_targets) == 5  # lab: 1 MDT, 2 OSS x 2 OSTs


# --- planned parts the host lacks ---------------------------------------------------------------------------


def test_planned_gpus_without_nvidia_smi_fail(tmp_path: Path) -> None:
    r = one(run_checks(EXPECT, IDLE, fake({})), "health.gpu")
    assert r.status == "fault" and r.code == 10 and "nvidia-smi is not installed" in r.detail


def test_a_planned_lustre_client_without_the_modules_fails(tmp_path: Path) -> None:
    r = one(run_checks(EXPECT, tmp_path, fake({})), "health.lustre")
    assert r.status == "fault" and r.code == 30 and "/sys/fs/lustre absent" in r.detail


def test_a_lab_stand_in_says_not_applicable_with_the_reason(tmp_path: Path) -> None:
    stand_in = Expect(**{**{f: getattr(EXPECT, f) for f in EXPECT.__slots__}, "stand_in": True})
    res = run_checks(stand_in, tmp_path, fake({}))
    for check in ("health.gpu", "health.lustre"):
        r = one(res, check)
        assert r.status == "not_applicable" and r.detail.startswith("lab stand-in"), r.line()
    # a part that is there is judged as anywhere else
    assert one(run_checks(stand_in, tmp_path, fake({"nvidia-smi": (0, "0, 3, Not Active\n1, 0, Not Active\n")})),
               "health.gpu").code == 11


@pytest.mark.parametrize("row", [
    "0, [Unknown Error], Not Active", "0, ERR!, Not Active", "0, [N/A], Not Active", "0, 0, [Not Supported]",
    "0, [GPU requires reset], Not Active", "0, 0",
], ids=["unknown-error", "err", "n-a", "not-supported", "requires-reset", "short-row"])
def test_an_error_string_where_a_value_is_required_fails(row: str) -> None:
    """nvidia-smi prints these where it has no value; a check that needs the value cannot pass on one."""
    out = (0, f"{row}\n1, 0, Not Active\n")
    r = one(run_checks(EXPECT, IDLE, fake({"nvidia-smi": out})), "health.gpu")
    assert r.code == 14 and "GPU 0" in r.detail, r.line()


@pytest.mark.parametrize(("mounts", "code", "words"), [
    ("tmpfs /lustre tmpfs rw 0 0\n", 30, "tmpfs filesystem, not Lustre"),
    ("192.168.1.11@tcp:/temp /lustre lustre rw 0 0\ntmpfs /lustre tmpfs rw 0 0\n", 30, "not Lustre"),
], ids=["other-fs", "lustre-hidden-under-tmpfs"])
def test_another_filesystem_at_the_lustre_mount_point_fails(tmp_path: Path, mounts: str, code: int,
                                                            words: str) -> None:
    root = _client(tmp_path, {OST: "FULL", MDT: "FULL"})
    (root / "proc/mounts").write_text(mounts)
    r = one(run_checks(EXPECT, root, fake({})), "health.lustre")
    assert r.code == code and words in r.detail


@pytest.mark.parametrize(("line", "code", "words"), [
    ("/dev/nvme1n1 /mnt/local-nvme xfs ro,relatime 0 0", 61, "read-only"),
    ("tmpfs /mnt/local-nvme tmpfs rw,size=1g 0 0", 61, "tmpfs (memory)"),
    ("/dev/nvme1n1 /mnt/local-nvme xfs rw 0 0\nnone /mnt/local-nvme ramfs rw 0 0", 61, "ramfs"),
    ("/dev/nvme1n1 /mnt/local-nvme xfs rw,relatime 0 0", 0, ""),
], ids=["read-only", "tmpfs", "ramfs-over-nvme", "healthy"])
def test_local_nvme_read_only_or_in_memory_fails(tmp_path: Path, line: str, code: int, words: str) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/mounts").write_text(line + "\n")
    r = one(run_checks(EXPECT, tmp_path, fake({})), "health.nvme")
    assert r.code == code and words in r.detail, r.line()


# --- XIDs ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("xid", [48, 63, 64, 74, 79, 92, 94, 95, 119])
def test_hardware_and_driver_xids_drain(xid: int) -> None:
    assert xid_is_hardware(xid)


@pytest.mark.parametrize("xid", [13, 31, 43, 45, 154])
def test_application_and_informational_xids_do_not(xid: int) -> None:
    assert not xid_is_hardware(xid)


def _nvidia(tmp_path: Path) -> Path:
    """A root with the NVIDIA kernel module loaded (/proc/driver/nvidia): only such a host can log XIDs."""
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    return tmp_path


def test_without_the_nvidia_module_no_xid_is_not_a_pass(tmp_path: Path) -> None:
    r = one(list(check_xid(EXPECT, fake({"journalctl": (0, "")}), root=tmp_path)), "health.xid")
    assert r.status == "not_applicable" and "/proc/driver/nvidia" in r.detail


def test_a_hardware_xid_in_the_kernel_log_is_a_fault(tmp_path: Path) -> None:
    log = (FIX / "kernel-log/xid-119.log").read_text()
    r = one(list(check_xid(EXPECT, fake({"journalctl": (0, log)}), root=_nvidia(tmp_path))), "health.xid")
    assert r.code == 13 and "XID 119 on 0000:9b:00" in r.detail


def test_an_application_xid_is_noted_not_drained(tmp_path: Path) -> None:
    log = (FIX / "kernel-log/xid-13.log").read_text()
    r = one(list(check_xid(EXPECT, fake({"journalctl": (0, log)}), root=_nvidia(tmp_path))), "health.xid")
    assert r.status == "ok" and "XID 13 on 0000:38:00" in r.detail and "not drained" in r.detail


def test_without_a_readable_kernel_log_xids_are_not_applicable(tmp_path: Path) -> None:
    r = one(list(check_xid(EXPECT, fake({}), tmp_path)), "health.xid")
    assert r.status == "not_applicable" and "kernel log" in r.detail


# --- probe errors are verdicts; the loop goes on ------------------------------------------------------------


def test_a_missing_sysfs_file_is_a_verdict_not_a_traceback(tmp_path: Path) -> None:
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    port.mkdir(parents=True)  # the port is there, its state and rate files are not
    e = Expect(host="gpu001", gpus=0, rdma={"mlx5_0": 400.0}, lustre_mount="/lustre", server_nids=[])
    r = one(run_checks(e, tmp_path, fake({})), "health.rdma")
    assert r.code == 21 and "not readable" in r.detail
    (port / "state").write_text("4: ACTIVE\n")
    r = one(run_checks(e, tmp_path, fake({})), "health.rdma")
    assert r.code == 22 and "unreadable" in r.detail


def test_a_probe_that_raises_becomes_fault_90(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(*_a: object) -> None:
        raise PermissionError("[Errno 13] Permission denied: '/proc/1/mounts'")
    monkeypatch.setattr(health, "_mounts", broken)
    res = run_checks(EXPECT, IDLE, fake({}))
    r = one(res, "health.nvme")
    assert r.code == health.PROBE_FAILED and "PermissionError" in r.detail
    assert [x.check for x in res] == list(health.CHECKS)  # every check still gave its verdict


def test_the_every_loop_outlives_a_failing_round(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    expect = tmp_path / "health.json"
    expect.write_text('{"host": "gpu001", "gpus": 0, "rdma": {}, "lustre_mount": "/lustre", "server_nids": []}')
    rounds: list[int] = []

    def once(*_a: object) -> int:
        rounds.append(1)
        raise OSError("the mount table vanished")

    def sleep(_s: float) -> None:
        if len(rounds) >= 3:
            raise KeyboardInterrupt  # stop the test after three rounds
    monkeypatch.setattr(health, "_once", once)
    monkeypatch.setattr(health.time, "sleep", sleep)
    with pytest.raises(KeyboardInterrupt):
        health.main(["--expect", str(expect), "--every", "1"])
    assert len(rounds) == 3
