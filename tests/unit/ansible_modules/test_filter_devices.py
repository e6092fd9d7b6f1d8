"""plugins/filter/devices.py: what the gpu and rdma roles say they looked at."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from kiln_filters import filter_plugin

F = filter_plugin("devices")

CLASSES = ["0x0300", "0x0302"]


def gpu_probe(proc: bool, pci: list[str], smi: str | None) -> dict[str, object]:
    return {"paths": {"/proc/driver/nvidia/gpus": {"exists": proc}},
            "pci": [{"address": a, "vendor": "0x10de", "class": "0x030200"} for a in pci],
            "tools": {"nvidia-smi": smi}}


def test_gpu_nothing_found_reads_as_the_role_has_always_said_it() -> None:
    assert F.gpu_looked_at(gpu_probe(False, [], None), "0x10de", CLASSES) == (
        "/proc/driver/nvidia/gpus: absent; PCI functions with vendor 0x10de and class 0x0300/0x0302: none; "
        "nvidia-smi: not installed")


def test_gpu_found() -> None:
    assert F.gpu_looked_at(gpu_probe(True, ["0000:17:00.0", "0000:3d:00.0"], "/usr/bin/nvidia-smi"), "0x10de",
                           CLASSES) == (
        "/proc/driver/nvidia/gpus: present; PCI functions with vendor 0x10de and class 0x0300/0x0302: "
        "0000:17:00.0, 0000:3d:00.0; nvidia-smi: /usr/bin/nvidia-smi")


def test_gpu_probe_without_the_driver_path_is_a_role_bug() -> None:
    with pytest.raises(AnsibleFilterError, match="did not look at /proc/driver/nvidia/gpus"):
        F.gpu_looked_at({"paths": {}, "pci": [], "tools": {}}, "0x10de", CLASSES)


@pytest.mark.parametrize(("answer", "pci", "expected"), [
    ({"exists": False, "entries": None}, [], "/sys/class/infiniband: absent; PCI functions with vendor 0x15b3 in "
                                             "/sys/bus/pci/devices: none"),
    ({"exists": True, "entries": []}, ["0000:0c:00.0"], "/sys/class/infiniband: empty; PCI functions with vendor "
                                                        "0x15b3 in /sys/bus/pci/devices: 0000:0c:00.0"),
    ({"exists": True, "entries": ["mlx5_0", "mlx5_1"]}, ["0000:0c:00.0", "0000:0d:00.0"],
     "/sys/class/infiniband: mlx5_0, mlx5_1; PCI functions with vendor 0x15b3 in /sys/bus/pci/devices: "
     "0000:0c:00.0, 0000:0d:00.0"),
])
def test_rdma_looked_at(answer: dict[str, object], pci: list[str], expected: str) -> None:
    probe = {"paths": {"/sys/class/infiniband": answer}, "pci": [{"address": a} for a in pci]}
    assert F.rdma_looked_at(probe, "/sys/class/infiniband", ["0x15b3"]) == expected


def test_rdma_vendors_are_joined_with_a_slash() -> None:
    probe = {"paths": {"/sys/class/infiniband": {"exists": False}}, "pci": []}
    assert "vendor 0x15b3/0x1077 in" in F.rdma_looked_at(probe, "/sys/class/infiniband", ["0x15b3", "0x1077"])
