"""The time of one checkpoint save as the terms PyTorch Distributed Checkpoint (DCP) pays, in order:

1. device-to-host copies: each rank stages its shard of the training state in host memory (DCP's staging;
   async_save blocks only for it) at the GPU's host-link rate, all GPUs at once;
2. file creates: one file per rank and a .metadata file (FileSystemWriter), at the MDTs' create rate;
3. the storage write with fsync: FileSystemWriter(sync_files=True) fsyncs every file, so the write counts until
   the bytes are on the OSTs, at the storage path's aggregate write rate.

Serialisation (torch.save of each tensor into the stream, planning and the ranks' collectives) is not modelled:
no published per-byte figure was found, so the total is labelled a lower bound. Sources in the term texts and
docs/sizing-model.md, "Checkpoint time".
"""

from __future__ import annotations

from kiln import knowledge
from kiln.plan.model import Term
from kiln.spec import catalog
from kiln.spec.models import ClusterSpec

#: Where the staging term comes from.
DCP_STAGING = (
    "PyTorch blog 'Reducing Model Checkpointing Times by Over 10x with PyTorch Distributed Asynchronous "
    "Checkpointing' (async_save blocks only for staging to CPU: 7B model 148.8 s -> 6.3 s)"
)
DCP_WRITER = "pytorch torch/distributed/checkpoint/filesystem.py FileSystemWriter (one file per rank, sync_files=True)"


def d2h_GBps(spec: ClusterSpec) -> tuple[float, str]:
    """(GB/s, how) of the slowest GPU pool's device-to-host copy per GPU: the GPU's measured host link, else its
    PCIe link × pcie_h2d."""
    kb = knowledge.load()
    rates = []
    for p in spec.compute.pools:
        if p.gpu is None:
            continue
        g = catalog.gpus(spec)[p.gpu.model]
        if g.h2d_GBps is not None:
            rates.append((float(g.h2d_GBps), f"{g.name} measured {g.h2d_GBps:g} GB/s"))
        elif g.pcie_gen in kb.pcie.rates:
            rate = kb.pcie.rates[g.pcie_gen] * kb.factor("pcie_h2d")
            rates.append((rate, f"{g.name} PCIe Gen{g.pcie_gen} x16 × pcie_h2d = {rate:.3g} GB/s"))
    return min(rates) if rates else (0.0, "no GPUs")


def checkpoint_terms(
    spec: ClusterSpec, *, nbytes: int, gpus: int, files: int, create_ops: float, write_GBps: float, write_bound: str
) -> tuple[Term, ...]:
    """The terms of one save (module docstring)."""
    out = []
    rate, how = d2h_GBps(spec)
    if rate > 0 and gpus:
        sharded = spec.workload.checkpoint.sharded
        per_gpu = nbytes / gpus if sharded else nbytes
        out.append(Term(
            name="device_to_host", seconds=per_gpu / (rate * 1e9),
            why=f"{per_gpu / 1e9:.3g} GB per GPU ({'its shard' if sharded else 'the whole state, one GPU'}) at "
            f"{how}; {DCP_STAGING}",
        ))
    out.append(Term(
        name="file_creates", seconds=files / create_ops if create_ops else 0.0,
        why=f"{files:,} files at {create_ops:,.0f} creates/s (all MDTs); {DCP_WRITER}",
    ))
    out.append(Term(
        name="storage_write", seconds=nbytes / (write_GBps * 1e9),
        why=f"{nbytes / 1e9:.1f} GB at {write_GBps:.1f} GB/s ({write_bound}), fsync'd per file; {DCP_WRITER}",
    ))
    return tuple(out)
