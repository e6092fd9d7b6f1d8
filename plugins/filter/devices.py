"""Filters that say what the gpu and rdma roles looked at, from kiln.cluster.host_probe answers.

Both roles stop (or lay down configuration only) on a host without their hardware, and say what they looked
at in that message; these filters write that part of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

#: Where the NVIDIA driver lists its GPUs once it is loaded.
NVIDIA_PROC = "/proc/driver/nvidia/gpus"


def _addresses(probe: Mapping[str, Any]) -> list[str]:
    return [str(function["address"]) for function in probe.get("pci") or []]


def _path(probe: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    answer = (probe.get("paths") or {}).get(path)
    if not isinstance(answer, Mapping):
        raise AnsibleFilterError(f"the probe did not look at {path}; add it to the host_probe task's paths")
    return answer


def gpu_looked_at(probe: Mapping[str, Any], vendor: str, classes: Sequence[str]) -> str:
    """``/proc/driver/nvidia/gpus: absent; PCI functions with vendor 0x10de and class 0x0300/0x0302: none;
    nvidia-smi: not installed`` for a probe that asked for /proc/driver/nvidia/gpus, the vendor's PCI functions
    of these classes (pci_vendors, pci_classes) and the nvidia-smi tool."""
    proc = "present" if _path(probe, NVIDIA_PROC)["exists"] else "absent"
    smi = (probe.get("tools") or {}).get("nvidia-smi") or "not installed"
    return (
        f"{NVIDIA_PROC}: {proc}; PCI functions with vendor {vendor} and class {'/'.join(classes)}: "
        f"{', '.join(_addresses(probe)) or 'none'}; nvidia-smi: {smi}"
    )


def rdma_looked_at(probe: Mapping[str, Any], sysfs_class: str, vendors: Sequence[str]) -> str:
    """``/sys/class/infiniband: absent; PCI functions with vendor 0x15b3 in /sys/bus/pci/devices: none`` for a probe
    that listed the RDMA device class (list_dirs) and the vendors' PCI functions (pci)."""
    answer = _path(probe, sysfs_class)
    devices = (", ".join(answer.get("entries") or []) or "empty") if answer["exists"] else "absent"
    return (
        f"{sysfs_class}: {devices}; PCI functions with vendor {'/'.join(vendors)} in /sys/bus/pci/devices: "
        f"{', '.join(_addresses(probe)) or 'none'}"
    )


class FilterModule:
    """What the hardware roles looked at."""

    def filters(self) -> dict[str, Any]:
        return {"gpu_looked_at": gpu_looked_at, "rdma_looked_at": rdma_looked_at}
