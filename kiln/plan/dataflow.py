"""The data-flow plan: links, checkpoint write-back and model distribution between the lake and the fast tier.

Pure: spec + the plan's hosts, layouts and sizing in, a DataflowPlan, acceptance targets and SpecIssues out. The
section's cross-field rules are spec checks (kiln/spec/checks_dataflow.py): the builders take a checked spec.
Rates are GB/s (10^9 bytes/s). The figures come from the hardware catalog and kiln/knowledge/efficiency.yaml
(tcp_payload, s3_gateway, s3_stream_GBps, s3_multipart_max_parts); sizing.objectstore_rates gives the lake.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath

from kiln import knowledge
from kiln.lustre.lustre_common import parse_size
from kiln.plan.groups import pool_group
from kiln.plan.model import (
    AcceptanceTarget,
    CheckpointFlowPlan,
    DataflowPlan,
    DataLinkPlan,
    Host,
    Layout,
    ModelFlowPlan,
    Sizing,
)
from kiln.plan.sizing import mover_host_GBps, objectstore_rates
from kiln.spec.checks_dataflow import under
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, DataCheckpoints, Dataflow, DataLink, DataModels
from kiln.spec.schedule import systemd_calendar as systemd_calendar  # re-exported: the datamover role's timers

#: The transfer engine the mover drives (chosen by measurement: bench/dataflow_engine.py, docs/benchmarks.md
#: "The data mover's transfer engine").
ENGINE = "rclone"

#: Floors of the data-flow acceptance ratios (the kit's criteria for a mover worth running); the plan's
#: prediction is the expected value.
#: stage_in_efficiency: the stage's rate ÷ min(fast-tier write, S3 GET) measured in the same pass.
FLOORS = {
    "stage_in": 3.0,
    "stage_in_efficiency": 0.8,
    "checkpoint_blocked": 5.0,
    "checkpoint_restore": 3.0,
    "model_distribution": 1.2,
}
#: Ceiling on a re-sync with nothing changed: its time ÷ the full stage's.
RESYNC_MAX_SHARE = 0.05

MAX_CONCURRENCY = 256
MIN_PART_MiB = 8  # rclone's and the AWS CLI's default multipart chunk size is 5-8 MiB; kit floor
MAX_PART_MiB = 5120  # S3: a part is at most 5 GiB


def _round_pow2(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(x, 1.0))))


def _layout_for(path: str, layouts: tuple[Layout, ...]) -> Layout:
    return max((lay for lay in layouts if under(path, lay.path)), key=lambda lay: len(lay.path))


def _stripe_MiB(layout: Layout) -> int:
    """The stripe size of the layout's last (largest-file) component, MiB."""
    return max(1, parse_size(layout.components[-1].stripe_size) >> 20)


def _host_GBps(spec: ClusterSpec, hosts: tuple[Host, ...], name: str) -> tuple[float, str]:
    """(GB/s, how) one mover host moves at most: its ports on the network the lake is reached over × tcp_payload."""
    host = next(h for h in hosts if h.name == name)
    pool = next(p for p in spec.compute.pools if p.name == host.pool)
    return mover_host_GBps(spec, pool)


def _stage(sizing: Sizing, mover_GBps: float, get: float) -> tuple[float, str]:
    """(GB/s, bottleneck) of the stage-in: the slowest of the movers' NICs, the lake's GET and Lustre's write."""
    candidates = {
        "mover_nics": mover_GBps,
        "objectstore_get": get,
        f"lustre_write ({sizing.write_bottleneck})": sizing.aggregate_write_GBps,
    }
    bottleneck = min(candidates, key=lambda k: candidates[k])
    return candidates[bottleneck], bottleneck


def _concurrency(spec: ClusterSpec, df: Dataflow, stage: float, n: int) -> tuple[int, str]:
    """(parallel transfers per mover host, why): enough streams on each host to carry its share of the
    bottleneck, and at least one writer per OST the host's share of files lands on; never more than the kit's
    ceiling."""
    stream = knowledge.load().factor("s3_stream_GBps")
    osts = spec.lustre.oss.nodes * spec.lustre.oss.osts.per_node
    per_host = stage / n
    want = max(math.ceil(per_host / stream), math.ceil(osts / n), 4)
    concurrency = df.movers.concurrency or min(MAX_CONCURRENCY, want)
    why = (
        f"concurrency {concurrency} per host = max(share {per_host:.3f} GB/s ÷ stream {stream:g} GB/s, "
        f"{osts} OSTs ÷ {n} hosts, 4), ≤ {MAX_CONCURRENCY}"
        + (" (set by dataflow.movers.concurrency)" if df.movers.concurrency else "")
    )
    return concurrency, why


def _part_size(spec: ClusterSpec, layouts: tuple[Layout, ...], sizing: Sizing) -> tuple[int, str]:
    """(multipart part size in MiB, why): whole stripes of the dataset layout (each part lands on whole stripes),
    large enough for the largest file (a checkpoint shard) to fit in the S3 part limit."""
    max_parts = knowledge.load().factor("s3_multipart_max_parts")
    ds_layout = next((lay for lay in layouts if lay.purpose == "datasets"), layouts[0] if layouts else None)
    stripe = _stripe_MiB(ds_layout) if ds_layout else 4
    c = sizing.checkpoint
    shard = c.bytes / max(1, sizing.gpus_total) if spec.workload.checkpoint.sharded else c.bytes
    part = min(MAX_PART_MiB, _round_pow2(max(MIN_PART_MiB, 2 * stripe, shard / max_parts / 2**20)))
    why = (
        f"part size {part} MiB: ≥ 2 × the dataset stripe ({stripe} MiB) and ≥ the largest file "
        f"({shard / 2**20:.0f} MiB) ÷ {max_parts:g} parts, a power of two"
    )
    return part, why


def data_link(spec: ClusterSpec, link: DataLink, layouts: tuple[Layout, ...]) -> DataLinkPlan:
    """A link with the planned directory it lies under and that directory's layout."""
    lay = _layout_for(link.path, layouts)
    note = ""
    if link.import_policy == "on-access":
        note = (
            "on-access needs Lustre HSM (a copytool restoring released files); kiln's mover does not run "
            "one, so the link is listed (metadata) and copied by the next stage"
        )
    return DataLinkPlan(
        name=link.name,
        bucket=link.bucket,
        prefix=link.prefix,
        path=link.path,
        mount_path=posixpath.join(spec.lustre.mount_point, link.path.lstrip("/")),
        directory=lay.path,
        setstripe=lay.setstripe,
        import_policy=link.import_policy,
        import_trigger=link.import_trigger,
        schedule=link.schedule,
        include=tuple(link.include),
        exclude=tuple(link.exclude),
        export_policy=link.export_policy,
        conflict=link.conflict,
        deletions=link.deletions,
        max_delete_fraction=link.max_delete_fraction,
        posix_metadata=link.posix_metadata,
        note=note,
    )


def checkpoint_flow(
    spec: ClusterSpec, ck: DataCheckpoints, sizing: Sizing, *, mover_GBps: float, get: float, put: float, part: int
) -> CheckpointFlowPlan:
    """Checkpoint write-back: the fast-tier write, the export to the lake at the slowest of the movers' NICs, the
    lake's PUT and Lustre's read, what the job waits for, and restore from either tier."""
    c = sizing.checkpoint
    candidates = {
        "mover_nics": mover_GBps,
        "objectstore_put": put,
        f"lustre_read ({sizing.read_bottleneck})": sizing.aggregate_read_GBps,
    }
    bottleneck = min(candidates, key=lambda k: candidates[k])
    export_GBps = candidates[bottleneck]
    export_s = c.bytes / (export_GBps * 1e9)
    blocked_sync = c.save_s + export_s
    return CheckpointFlowPlan(
        path=ck.path,
        mount_path=posixpath.join(spec.lustre.mount_point, ck.path.lstrip("/")),
        bucket=ck.bucket,
        prefix=ck.prefix,
        commit_marker=ck.commit_marker,
        write_back=ck.write_back,
        part_size_MiB=ck.part_size_MiB or part,
        keep_resident=ck.keep_resident,
        release_after_verify=ck.release_after_verify,
        bytes=c.bytes,
        write_s=c.save_s,
        export_s=export_s,
        export_GBps=export_GBps,
        export_bottleneck=bottleneck,
        blocked_s=c.save_s if ck.write_back == "async" else blocked_sync,
        blocked_sync_s=blocked_sync,
        restore_fast_s=c.restore_s,
        restore_lake_s=c.bytes / (min(get, mover_GBps) * 1e9),
        interval_s=spec.workload.checkpoint.interval_min * 60,
    )


def _checkpoint_why(ck: CheckpointFlowPlan) -> str:
    return (
        f"checkpoint {ck.bytes / 1e9:.2f} GB: fast-tier write {ck.write_s:.1f} s, export {ck.export_s:.1f} s at "
        f"{ck.export_GBps:.3f} GB/s ({ck.export_bottleneck}); blocked {ck.blocked_s:.1f} s ({ck.write_back}) vs "
        f"{ck.blocked_sync_s:.1f} s write + upload"
    )


def export_backlog(spec: ClusterSpec, ck: CheckpointFlowPlan | None) -> list[SpecIssue]:
    """A warning where exporting one checkpoint takes longer than the interval between two."""
    if ck is None or ck.export_s <= ck.interval_s:
        return []
    return [
        SpecIssue(
            "workload.checkpoint.interval_min",
            spec.workload.checkpoint.interval_min,
            f"exporting one checkpoint takes {ck.export_s:.0f} s, longer than the interval, so the export "
            "backlog would grow without bound",
            f"lengthen interval_min beyond {math.ceil(ck.export_s / 60)} or add mover hosts / lake gateways",
            "warning",
        )
    ]


def model_flow(spec: ClusterSpec, m: DataModels, hosts: tuple[Host, ...]) -> ModelFlowPlan:
    """Model distribution to one pool: its receiver nodes and directories, and the lake bytes it costs."""
    pool = next(p for p in spec.compute.pools if p.name == m.pool)
    target = m.target or posixpath.join(pool.local_nvme.mount_point if pool.local_nvme else "/", "models")
    receivers = tuple(h.name for h in hosts if h.role == "compute" and h.pool == m.pool)[: m.max_nodes]
    targets = (target,) if m.receivers_per_node == 1 else tuple(
        posixpath.join(target, f"receiver-{i}") for i in range(1, m.receivers_per_node + 1)
    )
    n = len(receivers) * len(targets)
    return ModelFlowPlan(
        bucket=m.bucket, prefix=m.prefix, pool=m.pool, target=target, events=m.events, fanout=m.fanout, receivers=n,
        lake_bytes_factor=1.0 if m.fanout == "relay" else float(n), hosts=receivers, targets=targets,
        filer_access=m.filer_access,
    )


def build_dataflow(
    spec: ClusterSpec, hosts: tuple[Host, ...], layouts: tuple[Layout, ...], sizing: Sizing
) -> tuple[DataflowPlan | None, list[SpecIssue]]:
    """The data-flow plan, or None when the stack declares no dataflow section. Its issues are warnings: an
    export backlog, and predictions below their acceptance floors."""
    df = spec.dataflow
    if df is None:
        return None, []
    pools = df.movers.pools or [spec.compute.pools[0].name]
    movers = tuple(h.name for h in hosts if h.role == "compute" and h.pool in pools)[: df.movers.max_hosts]
    (host_GBps, host_how), n = _host_GBps(spec, hosts, movers[0]), len(movers)
    mover_GBps = n * host_GBps
    get, put, _how = objectstore_rates(spec)
    stage, stage_bn = _stage(sizing, mover_GBps, get)
    concurrency, concurrency_why = _concurrency(spec, df, stage, n)
    part, part_why = _part_size(spec, layouts, sizing)
    ck = None if df.checkpoints is None else checkpoint_flow(
        spec, df.checkpoints, sizing, mover_GBps=mover_GBps, get=get, put=put, part=part
    )
    stream, ds_bytes = knowledge.load().factor("s3_stream_GBps"), int(spec.workload.dataset_TB * 1e12)
    why = (
        f"mover hosts: {n} node(s) of pool(s) {', '.join(pools)}, each {host_GBps:.3f} GB/s ({host_how})",
        f"stage-in rate {stage:.3f} GB/s = min(mover NICs {mover_GBps:.3f}, lake GET {get:.3f}, Lustre write "
        f"{sizing.aggregate_write_GBps:.3f}); bottleneck {stage_bn}",
        concurrency_why,
        part_why,
        *(() if ck is None else (_checkpoint_why(ck),)),
    )
    plan = DataflowPlan(
        engine=ENGINE, mover_hosts=movers, mover_group=pool_group(pools[0]),
        host_GBps=host_GBps, stream_GBps=stream, concurrency=concurrency, part_size_MiB=part,
        multipart_cutoff_MiB=part, poll_s=df.movers.poll_s, lake_get_GBps=get, lake_put_GBps=put, stage_GBps=stage,
        stage_bottleneck=stage_bn, dataset_bytes=ds_bytes, stage_in_s=ds_bytes / (stage * 1e9),
        naive_stage_in_s=ds_bytes / (min(stream, stage) * 1e9),
        links=tuple(data_link(spec, link, layouts) for link in df.links), checkpoints=ck,
        models=tuple(model_flow(spec, m, hosts) for m in df.models), why=why,
    )
    plan = dataclasses.replace(plan, targets=dataflow_targets(spec, plan))
    return plan, export_backlog(spec, ck) + floor_warnings(spec, plan)


#: Allowance for a change event to reach a subscriber (the filer pushes it over the open gRPC stream) and for the
#: service to start the transfer [kit].
MODEL_EVENT_ALLOWANCE_S = 5.0


def model_arrival_s(plan: DataflowPlan, m: ModelFlowPlan, nbytes: int) -> float:
    """Predicted seconds from a model object's upload to its arrival on every receiver directory: the event
    allowance, one read from the lake and one copy per receiver directory of a node, each at the planned stage
    rate (the relay copies run on the receiver nodes in parallel)."""
    per_node = len(m.targets) if m.fanout == "relay" else 1
    return MODEL_EVENT_ALLOWANCE_S + nbytes * (1 + per_node) / (plan.stage_GBps * 1e9)


def predicted_ratios(plan: DataflowPlan) -> dict[str, float]:
    """The plan's predicted ratio for each ratio check with a floor (stage-in, checkpoint blocked and restore)."""
    out = {"stage_in": plan.naive_stage_in_s / plan.stage_in_s}
    ck = plan.checkpoints
    if ck is not None:
        if ck.write_back == "async":
            out["checkpoint_blocked"] = ck.blocked_sync_s / ck.blocked_s
        out["checkpoint_restore"] = ck.restore_lake_s / ck.restore_fast_s
    return out


def _stage_in_fix(spec: ClusterSpec, plan: DataflowPlan, ratio: float) -> SpecIssue:
    """The field that bounds the stage-in (its bottleneck) and how far to raise it for the floor."""
    need = FLOORS["stage_in"] * min(plan.stream_GBps, plan.stage_GBps)
    short = need / plan.stage_GBps  # the bottleneck must grow by this factor
    problem = (f"the plan predicts dataflow.stage_in at {ratio:.2f}× one stream, below its floor of "
               f"{FLOORS['stage_in']:g}×: the stage needs {need:.3g} GB/s and {plan.stage_bottleneck} gives "
               f"{plan.stage_GBps:.3g} GB/s")
    waive = "; or waive dataflow.stage_in (acceptance.waivers) with the reason the floor cannot hold here"
    if plan.stage_bottleneck == "objectstore_get":
        n = spec.objectstore.nodes
        return SpecIssue("objectstore.nodes", n, problem,
                         f"add S3 gateways: about {math.ceil(n * short)} object-store nodes give {need:.3g} GB/s of "
                         f"GET{waive}", "warning")
    if plan.stage_bottleneck == "mover_nics":
        n = len(plan.mover_hosts)
        movers = spec.dataflow.movers if spec.dataflow else None
        return SpecIssue("dataflow.movers.max_hosts", movers.max_hosts if movers else n, problem,
                         f"let about {math.ceil(n * short)} hosts move data (max_hosts, or more pools in "
                         f"dataflow.movers.pools){waive}", "warning")
    n = spec.lustre.oss.nodes
    return SpecIssue("lustre.oss.nodes", n, problem,
                     f"add OSS nodes until Lustre writes {need:.3g} GB/s (about {math.ceil(n * short)}){waive}",
                     "warning")


def _checkpoint_fixes(spec: ClusterSpec, ck: CheckpointFlowPlan, ratios: dict[str, float]) -> list[SpecIssue]:
    out = []
    blocked = ratios.get("checkpoint_blocked")
    if blocked is not None and blocked < FLOORS["checkpoint_blocked"]:
        write_need = (FLOORS["checkpoint_blocked"] - 1) * ck.bytes / ck.export_s / 1e9  # write ≤ upload ÷ (floor−1)
        out.append(SpecIssue(
            "dataflow.checkpoints.write_back", ck.write_back,
            f"async write-back spares the job only {blocked:.2f}× of its wait (floor "
            f"{FLOORS['checkpoint_blocked']:g}×): the upload ({ck.export_s:.1f} s) is under "
            f"{FLOORS['checkpoint_blocked'] - 1:g}× the fast-tier write ({ck.write_s:.1f} s)",
            f"set write_back: sync (the job then waits {ck.blocked_sync_s - ck.blocked_s:.1f} s more per checkpoint "
            f"and no floor applies), or make the fast-tier write reach {write_need:.3g} GB/s with more OSS nodes "
            f"(lustre.oss.nodes, now {spec.lustre.oss.nodes})", "warning"))
    restore = ratios.get("checkpoint_restore")
    if restore is not None and restore < FLOORS["checkpoint_restore"]:
        have = ck.bytes / ck.restore_fast_s / 1e9
        need = FLOORS["checkpoint_restore"] * ck.bytes / ck.restore_lake_s / 1e9
        n = spec.lustre.oss.nodes
        out.append(SpecIssue(
            "lustre.oss.nodes", n,
            f"a restore from the fast tier is only {restore:.2f}× faster than from the lake (floor "
            f"{FLOORS['checkpoint_restore']:g}×): Lustre reads the checkpoint at {have:.3g} GB/s",
            f"add OSS nodes until Lustre reads it at {need:.3g} GB/s (about {math.ceil(n * need / have)}), or keep no "
            f"checkpoint resident for restores (dataflow.checkpoints.keep_resident, now {ck.keep_resident}): the "
            "lake restores nearly as fast", "warning"))
    return out


def floor_warnings(spec: ClusterSpec, plan: DataflowPlan) -> list[SpecIssue]:
    """A warning for each ratio the plan itself predicts below its acceptance floor (the check still measures it),
    naming the field that bounds it, its value and how to change it."""
    ratios = predicted_ratios(plan)
    out = [_stage_in_fix(spec, plan, ratios["stage_in"])] if ratios["stage_in"] < FLOORS["stage_in"] else []
    if plan.checkpoints is not None:
        out += _checkpoint_fixes(spec, plan.checkpoints, ratios)
    return out


def _ratio_target(
    spec: ClusterSpec,
    *,
    check: str,
    metric: str,
    predicted: float,
    floor: float,
    why: str,
    group: str,
    floor_fails: bool = False,
) -> AcceptanceTarget:
    """expected = the plan's prediction. Where it clears the floor, the floor fails and the acceptance fraction
    warns; where it does not (the plan warns), the acceptance fractions of the prediction judge it, unless
    `floor_fails`: then the floor fails whatever the plan predicts (the floor is the criterion itself)."""
    a = spec.acceptance
    if predicted >= floor or floor_fails:
        fail, warn = floor, max(floor, predicted * a.warn_fraction)
    else:
        fail, warn = predicted * a.fail_fraction, predicted * a.warn_fraction
    return AcceptanceTarget(
        check=check, metric=metric, unit="ratio", expected=round(predicted, 4), warn=round(warn, 4),
        fail=round(fail, 4), why=why, scope="aggregate", higher_is_better=True, group=group,
        requires=("objectstore",),
    )


def stage_in_targets(spec: ClusterSpec, plan: DataflowPlan) -> list[AcceptanceTarget]:
    """The stage-in's speed-up over one stream, and its rate against the slower of its two ends."""
    return [
        _ratio_target(
            spec, check="dataflow.stage_in", metric="speedup_vs_single_stream",
            predicted=plan.naive_stage_in_s / plan.stage_in_s, floor=FLOORS["stage_in"],
            why=f"parallel stage-in at {plan.stage_GBps:.3f} GB/s ({plan.stage_bottleneck}) against one sequential "
            f"stream at {min(plan.stream_GBps, plan.stage_GBps):.3f} GB/s; the kit's floor of "
            f"{FLOORS['stage_in']:g}× fails whatever the plan predicts",
            group=plan.mover_group, floor_fails=True,
        ),
        _ratio_target(
            spec, check="dataflow.stage_in_efficiency", metric="stage_over_min_write_get",
            predicted=1.0,  # the plan's stage rate is the minimum of its ends (stage_bottleneck)
            floor=FLOORS["stage_in_efficiency"],
            why="the stage's rate ÷ min(fast-tier write, S3 GET with the mover's engine) measured in the same pass",
            group=plan.mover_group, floor_fails=True,
        ),
    ]


def resync_targets(plan: DataflowPlan) -> list[AcceptanceTarget]:
    """A re-sync with nothing changed moves nothing and takes a small share of the stage's time; a mover killed
    mid-transfer loses nothing; a bad download or a corrupted copy on the fast tier is repaired."""
    g = plan.mover_group
    return [
        AcceptanceTarget(
            check="dataflow.resync", metric="bytes_moved", unit="bytes", expected=0, warn=0, fail=0,
            why="a re-sync with nothing changed moves no byte (size + ETag manifest)", scope="aggregate",
            higher_is_better=False, group=g, requires=("objectstore",),
        ),
        AcceptanceTarget(
            check="dataflow.resync_time", metric="share_of_stage_time", unit="ratio", expected=0.0,
            warn=RESYNC_MAX_SHARE, fail=RESYNC_MAX_SHARE,
            why="a re-sync with nothing changed lists and compares, moves nothing: at most "
            f"{RESYNC_MAX_SHARE:.0%} of the full stage's time",
            scope="aggregate", higher_is_better=False, group=g, requires=("objectstore",),
        ),
        AcceptanceTarget(
            check="dataflow.resume", metric="lost_or_partial_files", unit="count", expected=0, warn=0, fail=0,
            why="a mover killed mid-transfer and restarted loses nothing and exposes no partial file",
            scope="aggregate", higher_is_better=False, group=g, requires=("objectstore",),
        ),
        AcceptanceTarget(
            check="dataflow.repair", metric="corrupt_visible_or_unrepaired_files", unit="count", expected=0, warn=0,
            fail=0, why="a bad download is never visible under its name and a corrupted fast-tier copy is restored; "
            "the next passes repair both",
            scope="aggregate", higher_is_better=False, group=g, requires=("objectstore",),
        ),
    ]


def checkpoint_targets(spec: ClusterSpec, plan: DataflowPlan) -> list[AcceptanceTarget]:
    """What write-back saves the job, and restore from the fast tier against the lake."""
    ck = plan.checkpoints
    if ck is None:
        return []
    return [
        _ratio_target(
            spec, check="dataflow.checkpoint_blocked", metric="sync_over_async_blocked",
            predicted=ck.blocked_sync_s / ck.blocked_s,
            floor=FLOORS["checkpoint_blocked"] if ck.write_back == "async" else 1.0,
            why=f"the job waits {ck.blocked_s:.1f} s ({ck.write_back}) instead of {ck.blocked_sync_s:.1f} s "
            "write + upload",
            group=plan.mover_group,
        ),
        _ratio_target(
            spec, check="dataflow.checkpoint_restore", metric="lake_over_fast_restore",
            predicted=ck.restore_lake_s / ck.restore_fast_s, floor=FLOORS["checkpoint_restore"],
            why=f"restore the newest from the fast tier in {ck.restore_fast_s:.1f} s vs {ck.restore_lake_s:.1f} s "
            "from the lake",
            group=plan.mover_group,
        ),
    ]


def model_targets(plan: DataflowPlan) -> list[AcceptanceTarget]:
    """For each model distribution entry, the lake bytes it serves per model byte (a relay serves it once)."""
    return [
        AcceptanceTarget(
            check="dataflow.model_distribution", metric="lake_bytes_over_model_bytes", unit="ratio",
            expected=round(m.lake_bytes_factor, 4), warn=round(max(m.lake_bytes_factor, 1.0) * 1.1, 4),
            fail=FLOORS["model_distribution"] if m.fanout == "relay" else float(m.receivers),
            why=f"{m.receivers} receivers of pool {m.pool} ({m.fanout}): the lake serves "
            f"{m.lake_bytes_factor:g}× the model's bytes",
            scope="aggregate", higher_is_better=False, group=pool_group(m.pool),
            requires=("objectstore",),
        )
        for m in plan.models
    ]


def dataflow_targets(spec: ClusterSpec, plan: DataflowPlan) -> tuple[AcceptanceTarget, ...]:
    """Acceptance targets under `dataflow.`: each names the plan's prediction and the floor it must clear."""
    return (
        *stage_in_targets(spec, plan),
        *resync_targets(plan),
        *checkpoint_targets(spec, plan),
        *model_targets(plan),
    )
