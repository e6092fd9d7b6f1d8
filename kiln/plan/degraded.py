"""One server down: what the filesystem delivers while a failover partner serves the failed server's targets.

With failover pairs (lustre.failover: pairs) a failed OSS's OSTs are mounted by its partner, whose NICs and server
ceiling now serve two servers' targets while the drives stay the same (they are shared). Files are spread evenly
over the OSTs, so the surviving server must move 2/N of every epoch's (or checkpoint's) bytes alone: the filesystem
delivers at most N/2 × that server's rate, min(its NICs, its ceiling, both servers' drives), and never more than
healthy. The same holds for metadata: a surviving MDS serving its partner's MDTs halves the rate of every
evenly-loaded MDT. Without failover a down server's targets are unreachable: reads of the files on them stop.
See docs/sizing-model.md, "One server down".
"""

from __future__ import annotations

import math

from kiln.plan.model import Degraded, Sizing
from kiln.plan.sizing import (
    _ost_factors,
    device_figures,
    lnet_factor,
    ost_write_cost,
    protection_share,
    server_ceiling,
)
from kiln.spec import catalog
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec


def surviving_oss(spec: ClusterSpec) -> tuple[float, float, str]:
    """(read, write) GB/s one OSS moves while it serves its partner's OSTs too, and what bounds it: its NICs and
    server ceiling once, the drives of both servers."""
    lu = spec.lustre
    f, _ = lnet_factor(spec)
    nic = lu.oss.nics.count * catalog.nics(spec)[lu.oss.nics.nic].link_GBps * f
    ceiling = server_ceiling(spec)
    dev = device_figures(lu.oss.osts.device)
    n_dev = 2 * lu.oss.osts.per_node * lu.oss.osts.devices_per_target
    rf, wf = _ost_factors(spec)
    pr, _ = protection_share(spec)
    drives_r = n_dev * dev.read_GBps * rf * pr
    drives_w = n_dev * dev.write_GBps * wf * ost_write_cost(spec).efficiency
    parts = {"its NICs": nic, "its server ceiling": ceiling.read_GBps, "both servers' drives": drives_r}
    bound = min(parts, key=lambda k: parts[k])
    return min(nic, ceiling.read_GBps, drives_r), min(nic, ceiling.write_GBps, drives_w), bound


def file_rate_factor(spec: ClusterSpec) -> float:
    """Share of the metadata rate left with one MDS down: N/2 ÷ N with pairs; 0 without failover."""
    return 0.5 if spec.lustre.failover == "pairs" and spec.lustre.mds.nodes >= 2 else 0.0


def build_degraded(spec: ClusterSpec, sizing: Sizing, file_rate_read_GBps: float | None) -> Degraded:
    """The plan with one OSS (and, separately, one MDS) down. `file_rate_read_GBps` is the healthy read bound
    set by file opens (None when the workload reads large files and opens do not bound it)."""
    lu = spec.lustre
    n = lu.oss.nodes
    ck = sizing.checkpoint
    if lu.failover != "pairs" or n < 2:
        why: tuple[str, ...] = (
            f"lustre.failover is {lu.failover}: a down OSS's {lu.oss.osts.per_node} OSTs are unreachable, so reads "
            "and writes of the files striped over them stop until it returns",
        )
        return Degraded(
            failover=lu.failover, read_GBps=0.0, write_GBps=0.0, read_bound="targets offline", create_ops=0.0,
            gpus_fed=0, checkpoint_save_s=math.inf, holds=False, why=why,
        )
    r, w, bound = surviving_oss(spec)
    read = min(sizing.aggregate_read_GBps, n / 2 * r)
    write = min(sizing.aggregate_write_GBps, n / 2 * w)
    md = file_rate_factor(spec)
    read_fed = read if file_rate_read_GBps is None else min(read, file_rate_read_GBps * md)
    bound = f"file rate (one MDS down: metadata × {md:g})" if read_fed < read else (
        f"{n}/2 × surviving OSS ({bound})" if read < sizing.aggregate_read_GBps else sizing.read_bottleneck)
    per_gpu = sizing.read_per_gpu_GBps
    fed = math.floor(read_fed / per_gpu + 1e-9) if per_gpu > 0 else sizing.gpus_total
    save = ck.bytes / (write * 1e9)
    holds = fed >= sizing.gpus_total and save <= ck.budget_s
    why = (
        f"one OSS down: its partner serves {2 * lu.oss.osts.per_node} OSTs at {r:.1f} GB/s read, {w:.1f} write "
        f"(bound by {bound}); it moves 2/{n} of the bytes, so the filesystem reads at most {n}/2 × {r:.1f} = "
        f"{n / 2 * r:.1f} GB/s and writes {n / 2 * w:.1f} GB/s (healthy: {sizing.aggregate_read_GBps:.1f} read, "
        f"{sizing.aggregate_write_GBps:.1f} write)",
        f"one MDS down: its partner serves both MDTs, so creates and opens run at {md:.0%} of healthy "
        f"({sizing.metadata_create_ops * md:,.0f} creates/s)",
        f"degraded: {fed} of {sizing.gpus_total} GPUs fed, checkpoint write {save:.1f} s against a budget of "
        f"{ck.budget_s:.1f} s: " + ("the demand holds" if holds else "the demand does NOT hold"),
    )
    return Degraded(
        failover=lu.failover, read_GBps=read, write_GBps=write,
        read_bound=bound,
        create_ops=sizing.metadata_create_ops * md, gpus_fed=fed, checkpoint_save_s=save, holds=holds, why=why,
    )


def degraded_issues(spec: ClusterSpec, sizing: Sizing, d: Degraded) -> list[SpecIssue]:
    """A warning where failover pairs do not hold the demand with one OSS down, with the OSS count that does
    (without failover the plan's degraded section says the targets go offline: that is the stack's choice)."""
    if d.holds or sizing.gpus_total == 0 or d.failover != "pairs":
        return []
    lu = spec.lustre
    if d.read_bound.startswith("file rate"):
        return [SpecIssue(
            "lustre.mds.mdts", f"{lu.mds.nodes * lu.mds.mdts.per_node} MDTs",
            f"with one MDS down its partner serves both MDTs and file opens halve: the storage feeds {d.gpus_fed} "
            f"of {sizing.gpus_total} GPUs",
            "add MDS pairs and MDTs so half the open rate still feeds the GPUs, or pack samples into shards "
            "(workload.samples.files_per_sample: 0)",
            "warning",
        )]
    r, w, _ = surviving_oss(spec)
    need_read = 2 * sizing.demand_read_GBps / r if r > 0 else math.inf
    need_write = 2 * sizing.checkpoint.required_write_GBps / w if w > 0 else math.inf
    need = math.ceil(max(need_read, need_write, lu.oss.nodes) - 1e-9)
    need += need % 2
    return [SpecIssue(
        "lustre.oss.nodes", lu.oss.nodes,
        f"with one OSS down the storage feeds {d.gpus_fed} of {sizing.gpus_total} GPUs at {d.read_GBps:.1f} GB/s "
        f"and writes a checkpoint in {d.checkpoint_save_s:.1f} s (budget {sizing.checkpoint.budget_s:.1f} s)",
        f"use at least {need} OSS nodes to hold the demand through a failover, or accept degraded training "
        "while a server is down",
        "warning",
    )]
