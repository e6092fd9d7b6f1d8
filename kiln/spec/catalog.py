"""The hardware a spec may name: the kit's catalog plus the spec's own inline entries (`hardware:`)."""

from __future__ import annotations

from kiln import knowledge
from kiln.knowledge import GpuModel, NicModel
from kiln.spec.models import ClusterSpec, ComputePool


def nics(spec: ClusterSpec) -> dict[str, NicModel]:
    """NIC models by name: the catalog's, then the spec's inline ones (checks forbid shadowing)."""
    out = dict(knowledge.load().nics)
    for name, n in spec.hardware.nics.items():
        out.setdefault(
            name,
            NicModel(name=name, description=n.description, source=f"stack (inline): {n.source}",
                     link_Gbps=n.link_Gbps, fabrics=tuple(n.fabrics), pcie_gen=n.pcie_gen),
        )
    return out


def gpus(spec: ClusterSpec) -> dict[str, GpuModel]:
    """GPU models by name: the catalog's, then the spec's inline ones (checks forbid shadowing)."""
    out = dict(knowledge.load().gpus)
    for name, g in spec.hardware.gpus.items():
        out.setdefault(
            name,
            GpuModel(name=name, description=g.description, source=f"stack (inline): {g.source}",
                     memory_GB=g.memory_GB, pcie_gen=g.pcie_gen, nvswitch=g.nvswitch, nvlink_GBps=g.nvlink_GBps,
                     nccl_intra_busbw_GBps=g.nccl_intra_busbw_GBps, nccl_intra_gate_GBps=None, h2d_GBps=None,
                     h2d_gate_GBps=None, figures_source=f"stack (inline): {g.source}"),
        )
    return out


def storage_ports(spec: ClusterSpec, pool: ComputePool) -> list[NicModel]:
    """The NIC model of every port of one pool's node that carries storage traffic: its storage NICs, then the
    compute-rail ports it shares with storage (shared_storage_rails). Each port is listed once."""
    models = nics(spec)
    out = [models[pool.storage_nics.nic]] * pool.storage_nics.count
    if pool.compute_rails is not None:
        out += [models[pool.compute_rails.nic]] * len(pool.shared_storage_rails)
    return out
