"""The lab hosts' /dev/shm, against a TEST DOUBLE of podman (`_run`): `container inspect --format` prints the field
asked for (podman-container-inspect(1)), `run` is recorded. Each host gets a tmpfs made afresh at each start, large
enough for Corosync and Pacemaker's IPC (kiln/lab/podman.py SHM_MIB); a container with podman's own /dev/shm, which
outlives a restart, is remade."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest

from kiln.lab import podman

HOST = podman.HostSpec(container="kiln-lab-oss02", hostname="oss02", image="localhost/kiln-node:bookworm",
                       networks=(), volumes=(), labels={})


def fake_podman(monkeypatch: pytest.MonkeyPatch, exists: bool, tmpfs: str) -> list[list[str]]:
    calls: list[list[str]] = []

    def run(args: list[str], check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        out, rc = "", 0
        if args[:2] == ["container", "inspect"]:
            present = exists and not any(a[:2] == ["rm", "-f"] for a in calls)
            fmt = args[-1]
            out = {"{{.State.Status}}": "running", "{{json .HostConfig.Tmpfs}}": tmpfs}.get(fmt, "")
            rc = 0 if present else 125
        return subprocess.CompletedProcess(args, rc, out + "\n", "")

    monkeypatch.setattr(podman, "_run", run)
    return calls


def test_a_new_lab_host_gets_the_larger_shm(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_podman(monkeypatch, exists=False, tmpfs="null")
    assert podman.ensure_container(HOST) == "created"
    (run,) = [c for c in calls if c[0] == "run"]
    i = run.index(f"/dev/shm:rw,size={podman.SHM_MIB}m,mode=1777")
    assert run[i - 1] == "--tmpfs" and podman.SHM_MIB >= 128


def test_a_host_made_with_podmans_own_shm_is_remade(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_podman(monkeypatch, exists=True, tmpfs="null")
    assert podman.ensure_container(HOST) == "recreated (new mount)"
    assert ["rm", "-f", HOST.container] in calls


def test_a_host_with_the_lab_shm_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_podman(monkeypatch, exists=True, tmpfs='{"/dev/shm": "rw,size=256m,mode=1777,nosuid,nodev"}')
    assert podman.ensure_container(HOST) == "running"
    assert not [c for c in calls if c[0] in ("rm", "run")]


def test_each_network_lands_on_the_interface_the_plan_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """podman 4 attaches several networks in no fixed order (a lab once had oss01's management network on eth1, and
    the LNet loss drill downed it): the storage network goes on the storage NIC's planned interface."""
    from kiln.lab.lifecycle import lab_networks
    from kiln.plan import build_plan
    from kiln.spec import load_stack

    plan = build_plan(load_stack("lab"), "lab")
    oss01, kafka = plan.host("oss01"), plan.host("kafka-01")
    storage_nic = next(n for n in oss01.nics if n.carries_storage)
    nets = lab_networks(oss01, "mgmt", "storage")
    assert nets == [("mgmt", oss01.management_address, "eth0"), ("storage", storage_nic.address, "eth1")]
    assert storage_nic.interface == "eth1"
    assert lab_networks(kafka, "mgmt", "storage") == [("mgmt", kafka.management_address, "eth0")]

    calls = fake_podman(monkeypatch, exists=False, tmpfs="{}")
    podman.ensure_container(replace(HOST, networks=tuple(nets)))
    (run,) = [c for c in calls if c[0] == "run"]
    assert f"storage:ip={storage_nic.address},interface_name=eth1" in run
    assert f"mgmt:ip={oss01.management_address},interface_name=eth0" in run
