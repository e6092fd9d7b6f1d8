"""The data-loader pipeline on the clients: reader concurrency × per-sample latency (workload.samples).

A reader process takes its sample's files one after another: each file costs a per-request latency (open, first
read, close: `small_file_s`, measured with mdtest-hard-read) and its bytes stream at the node's share of its
streaming ceiling. With C readers on a node of streaming ceiling R, samples of S bytes in f files arrive at

    S ÷ (f × t ÷ C + S ÷ R)   bytes/s per node,

R for large samples, C × S ÷ (f × t) when the per-file latency dominates. Sources: kiln/knowledge/workload.yaml
(`reader`). See docs/sizing-model.md, "Small files and the reader pipeline".
"""

from __future__ import annotations

from kiln import knowledge
from kiln.plan.model import Layer
from kiln.spec import catalog
from kiln.spec.models import ClusterSpec

#: Layers that bound reads by the rate files are opened rather than by bytes: gpus_fed says which kind bound it.
FILE_RATE_LAYERS = ("metadata", "ost_iops", "client_loader")


def readers_per_gpu(spec: ClusterSpec) -> int:
    smp = spec.workload.samples
    if smp is not None and smp.readers_per_gpu is not None:
        return smp.readers_per_gpu
    return knowledge.load().workload.reader.readers_per_gpu.value


def loader_layer(spec: ClusterSpec, node_ceiling_GBps: float) -> tuple[Layer, ...]:
    """`client_loader`: every GPU node's readers at the per-file latency and the node's streaming ceiling
    (`node_ceiling_GBps` per GB/s of storage link). None for packed shards or without workload.samples."""
    smp = spec.workload.samples
    if smp is None or not smp.files_per_sample:
        return ()
    t = knowledge.load().workload.reader.small_file_s.value
    sample = smp.size_KB * 1e3
    total, parts = 0.0, []
    for p in spec.compute.pools:
        if not p.gpus_per_node:
            continue
        readers = p.gpus_per_node * readers_per_gpu(spec)
        ceiling = sum(m.link_GBps for m in catalog.storage_ports(spec, p)) * node_ceiling_GBps * 1e9
        per_node = sample / (smp.files_per_sample * t / readers + sample / ceiling)
        total += p.nodes * per_node / 1e9
        parts.append(f"{p.nodes} × {per_node / 1e9:.3g} ({readers} readers, {ceiling / 1e9:g} GB/s ceiling)")
    if not parts:
        return ()
    formula = (
        f"Σ nodes × sample ÷ (files {smp.files_per_sample} × {t * 1e3:g} ms ÷ readers + sample ÷ node ceiling), "
        f"sample {smp.size_KB:g} KB: " + " + ".join(parts)
    )
    return (Layer(
        name="client_loader", kind="supply", read_GBps=total, write_GBps=float("inf"), formula=formula,
        factors=("reader.small_file_s", "reader.readers_per_gpu", "client_stream"),
    ),)


def fed_bound(read_bottleneck: str) -> str:
    """What bounds gpus_fed: `file rate (<layer>)` when a file-rate layer is the read bottleneck, else
    `bandwidth (<layer>)`."""
    kind = "file rate" if read_bottleneck in FILE_RATE_LAYERS else "bandwidth"
    return f"{kind} ({read_bottleneck})"
