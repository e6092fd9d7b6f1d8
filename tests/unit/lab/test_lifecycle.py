"""The lab's pure parts: which stacks it accepts, its SSH files, its verify options, the recap parser."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from kiln.deploy.runner import parse_recap
from kiln.lab import lifecycle
from kiln.lab.lifecycle import VERIFY_OPTIONS, Lab, LabError, lab_outcome
from kiln.verify.checks.network import Iperf3Variables
from kiln.verify.checks.objectstore import WarpVariables
from kiln.verify.checks.options import Options

ROOT = Path(__file__).resolve().parents[3]


def lab_copy(tmp_path: Path, **inventory: object) -> str:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.lab.yaml").read_text())
    doc["config"]["kiln:cluster"]["inventory"] = inventory
    path = tmp_path / "Pulumi.lab.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def test_the_lab_stack_is_reached_over_ssh_as_root() -> None:
    lab = Lab.load("lab")
    assert (lab.plan.inventory.connection, lab.plan.inventory.address_by) == ("ssh", "management_ip")


@pytest.mark.parametrize(
    "inventory",
    [
        {"connection": "podman", "address_by": "hostname"},
        {"connection": "ssh", "address_by": "hostname", "ansible_user": "root"},
        {"connection": "ssh", "address_by": "management_ip", "ansible_user": "ubuntu"},
    ],
)
def test_a_stack_the_lab_cannot_reach_is_refused_with_the_fix(tmp_path: Path, inventory: dict[str, str]) -> None:
    with pytest.raises(LabError) as err:
        Lab.load(lab_copy(tmp_path, **inventory))
    text = str(err.value)
    assert "lab step 'load' failed" in text
    assert "inventory.connection: ssh" in text and "inventory.address_by: management_ip" in text


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="not applicable on this host: no ssh-keygen")
def test_ssh_files_pin_host_keys_and_keep_the_key_private(tmp_path: Path) -> None:
    lab = Lab.load("lab")
    lab.state = tmp_path / "state"
    known = {"10.89.10.3": "ssh-ed25519 AAAAB", "10.89.10.2": "ssh-ed25519 AAAAA"}
    lab.write_ssh_files(known)
    key = lab.ssh_dir / "id_ed25519"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(lab.ssh_dir.stat().st_mode) == 0o700
    assert (lab.ssh_dir / "known_hosts").read_text() == (
        "10.89.10.2 ssh-ed25519 AAAAA\n10.89.10.3 ssh-ed25519 AAAAB\n"
    )
    config = lab.ssh_config.read_text()
    assert "Host 10.89.10.2 10.89.10.3\n" in config
    assert "StrictHostKeyChecking yes" in config and f"IdentityFile {key}" in config
    assert "PRIVATE KEY" not in config
    before = key.read_text()
    lab.write_ssh_files({"10.89.10.2": "ssh-ed25519 CCCC"})  # a recreated container: new key, same lab key
    assert key.read_text() == before
    assert (lab.ssh_dir / "known_hosts").read_text() == "10.89.10.2 ssh-ed25519 CCCC\n"


def test_verify_options_are_known_run_options() -> None:
    opts = Options().with_values(VERIFY_OPTIONS)
    assert opts.var(Iperf3Variables).seconds == int(VERIFY_OPTIONS["network.iperf3.seconds"])
    assert opts.var(WarpVariables).duration_s < Options().var(WarpVariables).duration_s


def test_parse_recap_reads_the_last_recap() -> None:
    log = (
        "PLAY RECAP ***\nold : ok=1 changed=9 unreachable=0 failed=0\n"
        "PLAY RECAP ***\ngpu001                     : ok=53   changed=0    unreachable=0    failed=0    "
        "skipped=10   rescued=0    ignored=0   \n"
    )
    assert parse_recap(log) == {
        "gpu001": {"ok": 53, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 10, "rescued": 0, "ignored": 0}
    }


def test_the_lab_deploys_the_mover_with_its_stack_wheelhouse_and_fast_tier(tmp_path: Path) -> None:
    lab = Lab.load("lab")
    lab.state = tmp_path / "state"
    data = yaml.safe_load(lab.lab_vars().read_text())
    assert Path(data["datamover_stack_src"]) == (ROOT / "stacks" / "Pulumi.lab.yaml")
    assert data["datamover_wheelhouse_src"] == str(lab.state / "wheelhouse")
    assert data["datamover_weed_src"].endswith(".tools/bin/weed")
    assert data["datamover_mount_point"] == "/srv/kiln-fast"
    # The role is in the site playbook, after the object store it talks to.
    site = (ROOT / "playbooks" / "site.yml").read_text()
    assert site.index("plays/objectstore.yml") < site.index("plays/datamover.yml")


def _missing(check: str, verdict: str, requires: list[str]) -> dict[str, object]:
    return {"check": check, "subject": "gpu001", "verdict": verdict, "reason": "r", "requires": requires,
            "required_why": "w"}


def test_the_lab_accepts_only_an_incomplete_for_what_it_cannot_measure() -> None:
    lacking = [_missing("gpu.h2d_bw", "NOT_APPLICABLE", ["gpu"]),
               _missing("storage.ior_easy_read", "NOT_APPLICABLE", ["lustre"]),
               _missing("health.clock", "NOT_APPLICABLE", ["clock"]),
               _missing("network.iperf3", "NOT_RUN", [])]  # left out by a --only pass
    ok, lines = lab_outcome({"summary": {"verdict": "INCOMPLETE", "missing": lacking}})
    assert ok and lines[0].startswith("gpu: no GPU in a podman container — gpu.h2d_bw")
    assert [line.split(":")[0] for line in lines] == ["gpu", "lustre", "clock"]
    for other in (_missing("objectstore.s3_put", "ERROR", ["objectstore"]),  # a flake is never expected
                  _missing("storage.fio_local_read", "NOT_APPLICABLE", ["nvme"]),  # the lab has its volumes
                  _missing("*", "NOT_RUN", [])):  # nothing measured
        assert not lab_outcome({"summary": {"verdict": "INCOMPLETE", "missing": [*lacking, other]}})[0], other
    assert not lab_outcome({"summary": {"verdict": "REJECTED", "missing": lacking}})[0]
    assert lab_outcome({"summary": {"verdict": "ACCEPTED WITH WAIVERS", "missing": []}}) == (True, [])


def test_lab_verify_measures_everything_after_a_converge_that_changed_something(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = lifecycle.Lab.load("lab")
    lab.root, lab.state = tmp_path, tmp_path / ".kiln" / "lab"
    (lab.state / "secrets").mkdir(parents=True)
    (lab.state / "secrets" / "s3.env").write_text("KILN_S3_ACCESS_KEY=a\nKILN_S3_SECRET_KEY=b\n")
    seen: list[list[str]] = []

    def fake_run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 3)

    monkeypatch.setattr(lifecycle.subprocess, "run", fake_run)
    report = lab.state / "report" / "report.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"summary": {"verdict": "INCOMPLETE", "missing": [
        _missing("gpu.h2d_bw", "NOT_APPLICABLE", ["gpu"])]}}))
    assert lab.verify(full=True) == 0 and "--full" in seen[-1]
    assert "--option" in seen[-1] and "benchmark_workers=1" in seen[-1]
    assert lab.verify() == 0 and "--full" not in seen[-1]
    report.write_text(json.dumps({"summary": {"verdict": "INCOMPLETE", "missing": [
        _missing("objectstore.s3_put", "ERROR", ["objectstore"])]}}))
    assert lab.verify() == 3  # an ERROR is not what a lab lacks: verify's exit code stands
