"""The kit's knowledge base: hardware catalog, efficiency factors and workload figures as data.

Every figure is read from the YAML files beside this module, where each value sits next to its source
and reason. Code asks for figures by name; it never carries its own copy of a number.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from kiln import yamlio


@dataclass(frozen=True, slots=True)
class Sourced:
    """A number with the reason it has that value and where it comes from."""

    value: float
    reason: str
    source: str


@dataclass(frozen=True, slots=True)
class GpuModel:
    name: str
    description: str
    memory_GB: float
    pcie_gen: int
    nvswitch: bool
    nvlink_GBps: float
    nccl_intra_busbw_GBps: float
    source: str


@dataclass(frozen=True, slots=True)
class NicModel:
    name: str
    description: str
    link_Gbps: float
    fabrics: tuple[str, ...]
    pcie_gen: int
    source: str

    @property
    def link_GBps(self) -> float:
        return self.link_Gbps / 8.0


@dataclass(frozen=True, slots=True)
class NvmeModel:
    name: str
    description: str
    read_GBps: float
    write_GBps: float
    capacity_TB: float
    source: str


@dataclass(frozen=True, slots=True)
class ReadProfile:
    name: str
    GBps_per_gpu: float
    single_node_GBps: float
    reason: str
    source: str


@dataclass(frozen=True, slots=True)
class Knowledge:
    gpus: dict[str, GpuModel]
    nics: dict[str, NicModel]
    nvme: dict[str, NvmeModel]
    factors: dict[str, Sourced]
    read_profiles: dict[str, ReadProfile]
    bytes_per_param: Sourced
    mdt_create_ops_per_s: dict[str, float]
    mdt_rate_reason: str
    mdt_rate_source: str
    pcie_GBps_per_direction: dict[int, float]
    pcie_source: str
    tuning: dict[str, Any]
    seaweedfs: dict[str, dict[str, Any]]  # name → {value, reason, source}

    def factor(self, name: str) -> float:
        return self.factors[name].value


def _read(name: str) -> dict[str, Any]:
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    data = yamlio.load(text)
    assert isinstance(data, dict), f"{name} must hold a mapping"
    return data


@cache
def load() -> Knowledge:
    """Load the knowledge base once per process."""
    hw = _read("hardware.yaml")
    eff = _read("efficiency.yaml")
    wl = _read("workload.yaml")
    tuning = _read("tuning.yaml")
    seaweedfs = _read("objectstore.yaml")["seaweedfs"]
    gpus = {k: GpuModel(name=k, **v) for k, v in hw["gpus"].items()}
    nics = {k: NicModel(name=k, **{**v, "fabrics": tuple(v["fabrics"])}) for k, v in hw["nics"].items()}
    nvme = {k: NvmeModel(name=k, **v) for k, v in hw["nvme"].items()}
    factors = {k: Sourced(float(v["value"]), v["reason"], v["source"]) for k, v in eff["factors"].items()}
    profiles = {k: ReadProfile(name=k, **v) for k, v in wl["read_profiles"].items()}
    bpp = wl["checkpoint"]["bytes_per_param"]
    md = wl["metadata"]["mdt_create_ops_per_s"]
    pcie = dict(wl["pcie_GBps_per_direction"])
    pcie_source = pcie.pop("source")
    return Knowledge(
        gpus=gpus,
        nics=nics,
        nvme=nvme,
        factors=factors,
        read_profiles=profiles,
        bytes_per_param=Sourced(float(bpp["value"]), bpp["reason"], bpp["source"]),
        mdt_create_ops_per_s={k: float(v) for k, v in md.items() if k not in ("reason", "source")},
        mdt_rate_reason=md["reason"],
        mdt_rate_source=md["source"],
        pcie_GBps_per_direction={int(k): float(v) for k, v in pcie.items()},
        pcie_source=pcie_source,
        tuning=tuning,
        seaweedfs=seaweedfs,
    )


@cache
def protection_levels() -> dict[str, dict[str, Any]]:
    """Data protection levels (kiln/knowledge/protection.yaml): backends, device rules and data shares."""
    levels = _read("protection.yaml")["levels"]
    assert isinstance(levels, dict)
    return levels
