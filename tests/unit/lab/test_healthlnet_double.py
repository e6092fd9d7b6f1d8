"""The lab's healthLNET stand-in (kiln/lab/doubles/healthLNET, a TEST DOUBLE) keeps the upstream agent's rule:
lustre-release lustre/conf/resource/healthLNET ping_update(): no carrier (/sys/class/net/<device>/carrier != 1 or
operstate != up) scores 0 without pinging; else lctl_check() counts the host_list NIDs that answer, and the score
(count × multiplier) goes to the node attribute `name` through attrd_updater with -d <dampen>."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kiln.plan.model import HaLnetCheck

AGENT = Path(__file__).resolve().parents[3] / "kiln" / "lab" / "doubles" / "healthLNET"


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """A sysfs with eth1, a `ping` that answers for the addresses in answers.txt, a recording attrd_updater."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "ping").write_text(
        "#!/bin/sh\n# TEST DOUBLE: answers for the addresses listed in answers.txt\n"
        f'echo "$@" >> {tmp_path}/pings.txt\n'
        f'for a in "$@"; do last=$a; done\ngrep -qx "$last" {tmp_path}/answers.txt\n'
    )
    (bin_ / "attrd_updater").write_text(
        f'#!/bin/sh\n# TEST DOUBLE: records its arguments\nprintf "%s\\n" "$*" >> {tmp_path}/attrd.txt\n'
    )
    (bin_ / "logger").write_text("#!/bin/sh\n# TEST DOUBLE: drops the message\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    (tmp_path / "net" / "eth1").mkdir(parents=True)
    (tmp_path / "answers.txt").write_text("10.89.20.2\n10.89.20.4\n")
    link(tmp_path, carrier="1", operstate="up")
    return tmp_path


def link(world: Path, carrier: str, operstate: str) -> None:
    (world / "net" / "eth1" / "carrier").write_text(carrier + "\n")
    (world / "net" / "eth1" / "operstate").write_text(operstate + "\n")


def run(world: Path, action: str, multiplier: int = 1) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{world / 'bin'}:{os.environ['PATH']}",
        "KILN_SYSFS_NET": str(world / "net"),
        "OCF_RESOURCE_INSTANCE": "lnet-oss01-eth1",
        "HA_VARRUN": str(world),
        "OCF_RESKEY_device": "eth1",
        "OCF_RESKEY_name": "lnet_eth1",
        "OCF_RESKEY_dampen": "5s",
        "OCF_RESKEY_timeout": "2",
        "OCF_RESKEY_multiplier": str(multiplier),
        "OCF_RESKEY_host_list": "10.89.20.4@tcp0 10.89.20.2@tcp0 10.89.20.3@tcp0",
    }
    return subprocess.run([str(AGENT), action], env=env, capture_output=True, text=True, check=False)


def test_says_test_double_in_its_first_lines() -> None:
    assert "TEST DOUBLE" in AGENT.read_text().splitlines()[1]


def test_counts_the_nids_that_answer(world: Path) -> None:
    assert run(world, "score").stdout.strip() == "2"
    assert run(world, "score", multiplier=1000).stdout.strip() == "2000"


@pytest.mark.parametrize(("carrier", "operstate"), [("0", "up"), ("1", "down"), ("", "")])
def test_no_carrier_scores_zero_without_pinging(world: Path, carrier: str, operstate: str) -> None:
    link(world, carrier, operstate)
    assert run(world, "score").stdout.strip() == "0"
    assert not (world / "pings.txt").exists()


def test_start_monitor_stop_as_the_ocf_agent(world: Path) -> None:
    assert run(world, "monitor").returncode == 7  # not running before start
    assert run(world, "start").returncode == 0
    assert (world / "attrd.txt").read_text().splitlines() == ["-n lnet_eth1 -v 2 -d 5s -q"]
    link(world, "0", "down")
    assert run(world, "monitor").returncode == 0
    assert (world / "attrd.txt").read_text().splitlines()[-1] == "-n lnet_eth1 -v 0 -d 5s -q"
    assert run(world, "stop").returncode == 0
    assert (world / "attrd.txt").read_text().splitlines()[-1] == "-D -n lnet_eth1 -d 5s -q"
    assert run(world, "monitor").returncode == 7


def test_the_plans_threshold_bans_the_node_the_double_scores_low(world: Path) -> None:
    """The plan's rule on the double's score: 2 of 3 NIDs keep the node (a majority), 1 does not."""
    check = HaLnetCheck(devices=("eth1",), host_list=("a", "b", "c"), threshold=2)
    assert int(run(world, "score").stdout) >= check.threshold
    (world / "answers.txt").write_text("10.89.20.4\n")
    assert int(run(world, "score").stdout) < check.threshold
