"""The data-flow plan: links, checkpoint write-back and model distribution between the lake and the fast tier.

Pure: spec + the plan's hosts, layouts and sizing in, a DataflowPlan, acceptance targets and SpecIssues out.
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
from kiln.plan.sizing import objectstore_rates
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, Dataflow

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


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _overlap(a: str, b: str) -> bool:
    return _under(a, b) or _under(b, a)


def _prefix_overlap(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)


def validate(spec: ClusterSpec, df: Dataflow) -> list[SpecIssue]:
    """Links under planned directories, buckets the plan creates, no overlaps, pools that exist."""
    issues: list[SpecIssue] = []
    dirs = [d.path for d in spec.lustre.directories]
    buckets = [b.name for b in spec.objectstore.buckets]
    pools = {p.name: p for p in spec.compute.pools}

    def where(path: str, value: str) -> None:
        if not any(_under(value, d) for d in dirs):
            issues.append(
                SpecIssue(
                    path,
                    value,
                    f"not under a planned directory ({', '.join(dirs) or 'lustre.directories is empty'}), so no "
                    "layout would be set before data lands",
                    "put it under one of lustre.directories[].path, or add a directory entry for it",
                )
            )

    def bucket(path: str, value: str) -> None:
        if value not in buckets:
            issues.append(
                SpecIssue(
                    path,
                    value,
                    f"the plan does not create this bucket (objectstore.buckets: {', '.join(buckets)})",
                    "use one of those buckets, or add it to objectstore.buckets",
                )
            )

    def prefix(path: str, value: str) -> None:
        if value and not value.endswith("/"):
            issues.append(
                SpecIssue(
                    path, value, "a prefix maps to a directory, so it must be '' or end with '/'", f"write {value}/"
                )
            )

    for i, link in enumerate(df.links):
        p = f"dataflow.links[{i}]"
        where(f"{p}.path", link.path)
        bucket(f"{p}.bucket", link.bucket)
        prefix(f"{p}.prefix", link.prefix)
        if link.schedule is not None:
            try:
                systemd_calendar(link.schedule)
            except ValueError as exc:
                issues.append(
                    SpecIssue(
                        f"{p}.schedule",
                        link.schedule,
                        f"the datamover role runs it as a systemd timer, and {exc}",
                        "restrict either the day of month or the day of week (leave the other '*'), "
                        "without a step in the day of week",
                    )
                )
        if (link.import_trigger == "schedule") != (link.schedule is not None):
            issues.append(
                SpecIssue(
                    f"{p}.schedule",
                    link.schedule,
                    "a schedule is needed exactly when import_trigger is schedule",
                    "set import_trigger: schedule with a cron schedule, or drop schedule",
                )
            )
        for j, other in enumerate(df.links[:i]):
            if other.name == link.name:
                issues.append(SpecIssue(f"{p}.name", link.name, f"also the name of links[{j}]", "give it a new name"))
            if _overlap(link.path, other.path):
                issues.append(
                    SpecIssue(
                        f"{p}.path",
                        link.path,
                        f"overlaps links[{j}].path ({other.path}): two links would own the same files",
                        "give each link its own directory, neither inside the other",
                    )
                )
            if link.bucket == other.bucket and _prefix_overlap(link.prefix, other.prefix):
                issues.append(
                    SpecIssue(
                        f"{p}.prefix",
                        link.prefix,
                        f"overlaps links[{j}] ({other.bucket}/{other.prefix}): two links would own the same keys",
                        "give each link its own key prefix, neither a prefix of the other",
                    )
                )
    ck = df.checkpoints
    if ck is not None:
        where("dataflow.checkpoints.path", ck.path)
        bucket("dataflow.checkpoints.bucket", ck.bucket)
        prefix("dataflow.checkpoints.prefix", ck.prefix)
        for j, link in enumerate(df.links):
            if _overlap(ck.path, link.path):
                issues.append(
                    SpecIssue(
                        "dataflow.checkpoints.path",
                        ck.path,
                        f"overlaps links[{j}].path ({link.path})",
                        "keep checkpoints in a directory of their own",
                    )
                )
            if ck.bucket == link.bucket and _prefix_overlap(ck.prefix, link.prefix):
                issues.append(
                    SpecIssue(
                        "dataflow.checkpoints.prefix",
                        ck.prefix,
                        f"overlaps links[{j}] ({link.bucket}/{link.prefix})",
                        "give checkpoints a key prefix of their own",
                    )
                )
    for i, m in enumerate(df.models):
        p = f"dataflow.models[{i}]"
        bucket(f"{p}.bucket", m.bucket)
        prefix(f"{p}.prefix", m.prefix)
        pool = pools.get(m.pool)
        if pool is None:
            issues.append(SpecIssue(f"{p}.pool", m.pool, "no such compute pool", f"use one of {', '.join(pools)}"))
        elif m.target is None and pool.local_nvme is None:
            issues.append(
                SpecIssue(
                    f"{p}.target",
                    None,
                    f"pool {m.pool} has no local_nvme, so there is no default fast tier",
                    "set target to a directory on the nodes, or give the pool local_nvme",
                )
            )
        if m.filer_access and m.events != "filer-subscribe":
            issues.append(
                SpecIssue(
                    f"{p}.filer_access",
                    m.filer_access,
                    f"opens the filer to the receivers, but events is {m.events}, which needs no filer",
                    "remove filer_access (or use events: filer-subscribe)",
                )
            )
        if m.events == "filer-subscribe" and spec.objectstore.backend != "seaweedfs":
            issues.append(
                SpecIssue(
                    f"{p}.events",
                    m.events,
                    "filer metadata subscription needs the SeaweedFS filer kiln deploys; this lake is external",
                    "use events: poll",
                )
            )
    for i, name in enumerate(df.movers.pools):
        if name not in pools:
            issues.append(
                SpecIssue(f"dataflow.movers.pools[{i}]", name, "no such compute pool", f"use one of {', '.join(pools)}")
            )
    return issues


_DOW = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_CRON_FLOOR = (0, 0, 1, 1, 0)  # minute, hour, day of month, month, day of week


def _calendar_field(field: str, floor: int, dow: bool) -> str:
    parts = []
    for item in field.split(","):
        rng, _, step = item.partition("/")
        if dow and step:
            raise ValueError("a step in the day-of-week field has no systemd calendar equivalent")
        if rng == "*":
            parts.append(f"{floor}/{step}" if step else "*")
            continue
        lo, _, hi = rng.partition("-")
        if dow:
            if int(lo) > 7 or (hi and int(hi) > 7):
                raise ValueError(f"day of week {rng} is out of 0-7")
            parts.append(_DOW[int(lo)] + (f"..{_DOW[int(hi)]}" if hi else ""))
        else:
            parts.append(lo + (f"..{hi}" if hi else "") + (f"/{step}" if step else ""))
    return ",".join(parts)


def systemd_calendar(cron: str) -> str:
    """A 5-field cron schedule as a systemd OnCalendar expression (systemd.time(7)), for the datamover role's
    timers. Raises ValueError where the two disagree: cron ORs a restricted day of month with a restricted
    day of week, systemd ANDs them."""
    minute, hour, dom, month, dow = cron.split()
    if dom != "*" and dow != "*":
        raise ValueError("cron runs when the day of month OR the day of week matches; systemd needs both")
    m, h, d, mo = (_calendar_field(f, _CRON_FLOOR[i], False) for i, f in enumerate((minute, hour, dom, month)))
    weekday = "" if dow == "*" else _calendar_field(dow, 0, True) + " "
    return f"{weekday}*-{mo}-{d} {h}:{m}:00"


def _round_pow2(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(x, 1.0))))


def _layout_for(path: str, layouts: tuple[Layout, ...]) -> Layout:
    return max((lay for lay in layouts if _under(path, lay.path)), key=lambda lay: len(lay.path))


def _stripe_MiB(layout: Layout) -> int:
    """The stripe size of the layout's last (largest-file) component, MiB."""
    return max(1, parse_size(layout.components[-1].stripe_size) >> 20)


def build_dataflow(
    spec: ClusterSpec, hosts: tuple[Host, ...], layouts: tuple[Layout, ...], sizing: Sizing
) -> tuple[DataflowPlan | None, list[SpecIssue]]:
    """The data-flow plan, or None when the stack declares no dataflow section."""
    df = spec.dataflow
    if df is None:
        return None, []
    issues = validate(spec, df)
    if issues:
        return None, issues
    kb = knowledge.load()
    pools = df.movers.pools or [spec.compute.pools[0].name]
    movers = tuple(h.name for h in hosts if h.role == "compute" and h.pool in pools)[: df.movers.max_hosts]
    first = next(h for h in hosts if h.name == movers[0])
    payload = kb.factor("tcp_payload")
    host_GBps = sum(n.link_Gbps for n in first.nics if n.carries_storage) / 8 * payload
    stream = kb.factor("s3_stream_GBps")
    get, put, _how = objectstore_rates(spec)
    n = len(movers)
    mover_GBps = n * host_GBps
    osts = spec.lustre.oss.nodes * spec.lustre.oss.osts.per_node
    stage_candidates = {
        "mover_nics": mover_GBps,
        "objectstore_get": get,
        f"lustre_write ({sizing.write_bottleneck})": sizing.aggregate_write_GBps,
    }
    stage_bn = min(stage_candidates, key=lambda k: stage_candidates[k])
    stage = stage_candidates[stage_bn]
    # Enough streams on each host to carry its share of the bottleneck, and at least one writer per
    # OST the host's share of files lands on; never more than the kit's ceiling.
    per_host = stage / n
    want = max(math.ceil(per_host / stream), math.ceil(osts / n), 4)
    concurrency = df.movers.concurrency or min(MAX_CONCURRENCY, want)
    ds_bytes = int(spec.workload.dataset_TB * 1e12)
    # Part size: whole stripes of the dataset layout (each part lands on whole stripes), large enough
    # for the largest file (a checkpoint shard) to fit in the S3 part limit.
    ds_layout = next((lay for lay in layouts if lay.purpose == "datasets"), layouts[0] if layouts else None)
    stripe = _stripe_MiB(ds_layout) if ds_layout else 4
    shard = (
        sizing.checkpoint.bytes / max(1, sizing.gpus_total)
        if spec.workload.checkpoint.sharded
        else (sizing.checkpoint.bytes)
    )
    need_part = shard / kb.factor("s3_multipart_max_parts") / 2**20
    part = min(MAX_PART_MiB, _round_pow2(max(MIN_PART_MiB, 2 * stripe, need_part)))
    why = [
        f"mover hosts: {n} node(s) of pool(s) {', '.join(pools)}, each {host_GBps:.3f} GB/s "
        f"(storage NICs × tcp_payload {payload:g})",
        f"stage-in rate {stage:.3f} GB/s = min(mover NICs {mover_GBps:.3f}, lake GET {get:.3f}, Lustre write "
        f"{sizing.aggregate_write_GBps:.3f}); bottleneck {stage_bn}",
        f"concurrency {concurrency} per host = max(share {per_host:.3f} GB/s ÷ stream {stream:g} GB/s, "
        f"{osts} OSTs ÷ {n} hosts, 4), ≤ {MAX_CONCURRENCY}"
        + (" (set by dataflow.movers.concurrency)" if df.movers.concurrency else ""),
        f"part size {part} MiB: ≥ 2 × the dataset stripe ({stripe} MiB) and ≥ the largest file "
        f"({shard / 2**20:.0f} MiB) ÷ {kb.factor('s3_multipart_max_parts'):g} parts, a power of two",
    ]
    links = []
    for link in df.links:
        lay = _layout_for(link.path, layouts)
        note = ""
        if link.import_policy == "on-access":
            note = (
                "on-access needs Lustre HSM (a copytool restoring released files); kiln's mover does not run "
                "one, so the link is listed (metadata) and copied by the next stage"
            )
        links.append(
            DataLinkPlan(
                link.name,
                link.bucket,
                link.prefix,
                link.path,
                posixpath.join(spec.lustre.mount_point, link.path.lstrip("/")),
                lay.path,
                lay.setstripe,
                link.import_policy,
                link.import_trigger,
                link.schedule,
                tuple(link.include),
                tuple(link.exclude),
                link.export_policy,
                note,
            )
        )
    ck_plan = None
    ck = df.checkpoints
    if ck is not None:
        c = sizing.checkpoint
        export_candidates = {
            "mover_nics": mover_GBps,
            "objectstore_put": put,
            f"lustre_read ({sizing.read_bottleneck})": sizing.aggregate_read_GBps,
        }
        ex_bn = min(export_candidates, key=lambda k: export_candidates[k])
        ex = export_candidates[ex_bn]
        export_s = c.bytes / (ex * 1e9)
        lake_read = min(get, mover_GBps)
        blocked_sync = c.save_s + export_s
        ck_plan = CheckpointFlowPlan(
            ck.path,
            posixpath.join(spec.lustre.mount_point, ck.path.lstrip("/")),
            ck.bucket,
            ck.prefix,
            ck.commit_marker,
            ck.write_back,
            ck.part_size_MiB or part,
            ck.keep_resident,
            ck.release_after_verify,
            c.bytes,
            c.save_s,
            export_s,
            ex,
            ex_bn,
            c.save_s if ck.write_back == "async" else blocked_sync,
            blocked_sync,
            c.restore_s,
            c.bytes / (lake_read * 1e9),
            spec.workload.checkpoint.interval_min * 60,
        )
        why.append(
            f"checkpoint {c.bytes / 1e9:.2f} GB: fast-tier write {c.save_s:.1f} s, export {export_s:.1f} s at "
            f"{ex:.3f} GB/s ({ex_bn}); blocked {ck_plan.blocked_s:.1f} s ({ck.write_back}) vs {blocked_sync:.1f} s "
            "write + upload"
        )
        if export_s > ck_plan.interval_s:
            issues.append(
                SpecIssue(
                    "workload.checkpoint.interval_min",
                    spec.workload.checkpoint.interval_min,
                    f"exporting one checkpoint takes {export_s:.0f} s, longer than the interval, so the export "
                    "backlog would grow without bound",
                    f"lengthen interval_min beyond {math.ceil(export_s / 60)} or add mover hosts / lake gateways",
                    "warning",
                )
            )
    naive_s = ds_bytes / (min(stream, stage) * 1e9)
    stage_s = ds_bytes / (stage * 1e9)
    models = []
    for m in df.models:
        pool = next(p for p in spec.compute.pools if p.name == m.pool)
        target = m.target or posixpath.join(pool.local_nvme.mount_point if pool.local_nvme else "/", "models")
        receivers = tuple(h.name for h in hosts if h.role == "compute" and h.pool == m.pool)[: m.max_nodes]
        targets = (target,) if m.receivers_per_node == 1 else tuple(
            posixpath.join(target, f"receiver-{i}") for i in range(1, m.receivers_per_node + 1)
        )
        n = len(receivers) * len(targets)
        factor = 1.0 if m.fanout == "relay" else float(n)
        models.append(ModelFlowPlan(m.bucket, m.prefix, m.pool, target, m.events, m.fanout, n, factor, receivers,
                                    targets, m.filer_access))
    plan = DataflowPlan(
        engine=ENGINE,
        mover_hosts=movers,
        mover_group=pool_group(pools[0]),
        host_GBps=host_GBps,
        stream_GBps=stream,
        concurrency=concurrency,
        part_size_MiB=part,
        multipart_cutoff_MiB=part,
        poll_s=df.movers.poll_s,
        lake_get_GBps=get,
        lake_put_GBps=put,
        stage_GBps=stage,
        stage_bottleneck=stage_bn,
        dataset_bytes=ds_bytes,
        stage_in_s=stage_s,
        naive_stage_in_s=naive_s,
        links=tuple(links),
        checkpoints=ck_plan,
        models=tuple(models),
        why=tuple(why),
    )
    plan = dataclasses.replace(plan, targets=dataflow_targets(spec, plan))
    return plan, issues + floor_warnings(plan)


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


def floor_warnings(plan: DataflowPlan) -> list[SpecIssue]:
    """A warning for each ratio the plan itself predicts below its acceptance floor (the check still measures it)."""
    fixes = {
        "stage_in": ("dataflow.movers", "add lake gateways (objectstore nodes/NICs) or mover hosts"),
        "checkpoint_blocked": (
            "dataflow.checkpoints.write_back",
            "the upload is already short next to the fast-tier write; the floor matters where the lake is slower",
        ),
        "checkpoint_restore": (
            "dataflow.checkpoints",
            "the lake reads almost as fast as the fast tier here; restore from the lake is acceptable",
        ),
    }
    out = []
    for key, ratio in predicted_ratios(plan).items():
        if ratio < FLOORS[key]:
            path, fix = fixes[key]
            out.append(
                SpecIssue(
                    path,
                    round(ratio, 3),
                    f"the plan predicts dataflow.{key} at {ratio:.2f}×, below its floor of {FLOORS[key]:g}×",
                    fix,
                    "warning",
                )
            )
    return out


def _ratio_target(
    spec: ClusterSpec,
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
        check,
        metric,
        "ratio",
        round(predicted, 4),
        round(warn, 4),
        round(fail, 4),
        why,
        "aggregate",
        True,
        group,
        ("objectstore",),
    )


def dataflow_targets(spec: ClusterSpec, plan: DataflowPlan) -> tuple[AcceptanceTarget, ...]:
    """Acceptance targets under `dataflow.`: each names the plan's prediction and the floor it must clear."""
    g = plan.mover_group
    out = [
        _ratio_target(
            spec,
            "dataflow.stage_in",
            "speedup_vs_single_stream",
            plan.naive_stage_in_s / plan.stage_in_s,
            FLOORS["stage_in"],
            f"parallel stage-in at {plan.stage_GBps:.3f} GB/s ({plan.stage_bottleneck}) against one sequential "
            f"stream at {min(plan.stream_GBps, plan.stage_GBps):.3f} GB/s; the kit's floor of "
            f"{FLOORS['stage_in']:g}× fails whatever the plan predicts",
            g,
            floor_fails=True,
        ),
        _ratio_target(
            spec,
            "dataflow.stage_in_efficiency",
            "stage_over_min_write_get",
            1.0,  # the plan's stage rate is the minimum of its ends (stage_bottleneck)
            FLOORS["stage_in_efficiency"],
            "the stage's rate ÷ min(fast-tier write, S3 GET with the mover's engine) measured in the same pass",
            g,
            floor_fails=True,
        ),
        AcceptanceTarget(
            "dataflow.resync",
            "bytes_moved",
            "bytes",
            0,
            0,
            0,
            "a re-sync with nothing changed moves no byte (size + ETag manifest)",
            "aggregate",
            False,
            g,
            ("objectstore",),
        ),
        AcceptanceTarget(
            "dataflow.resync_time",
            "share_of_stage_time",
            "ratio",
            0.0,
            RESYNC_MAX_SHARE,
            RESYNC_MAX_SHARE,
            "a re-sync with nothing changed lists and compares, moves nothing: at most "
            f"{RESYNC_MAX_SHARE:.0%} of the full stage's time",
            "aggregate",
            False,
            g,
            ("objectstore",),
        ),
        AcceptanceTarget(
            "dataflow.resume",
            "lost_or_partial_files",
            "count",
            0,
            0,
            0,
            "a mover killed mid-transfer and restarted loses nothing and exposes no partial file",
            "aggregate",
            False,
            g,
            ("objectstore",),
        ),
    ]
    ck = plan.checkpoints
    if ck is not None:
        out.append(
            _ratio_target(
                spec,
                "dataflow.checkpoint_blocked",
                "sync_over_async_blocked",
                ck.blocked_sync_s / ck.blocked_s,
                FLOORS["checkpoint_blocked"] if ck.write_back == "async" else 1.0,
                f"the job waits {ck.blocked_s:.1f} s ({ck.write_back}) instead of {ck.blocked_sync_s:.1f} s "
                "write + upload",
                g,
            )
        )
        out.append(
            _ratio_target(
                spec,
                "dataflow.checkpoint_restore",
                "lake_over_fast_restore",
                ck.restore_lake_s / ck.restore_fast_s,
                FLOORS["checkpoint_restore"],
                f"restore the newest from the fast tier in {ck.restore_fast_s:.1f} s vs {ck.restore_lake_s:.1f} s "
                "from the lake",
                g,
            )
        )
    for m in plan.models:
        out.append(
            AcceptanceTarget(
                "dataflow.model_distribution",
                "lake_bytes_over_model_bytes",
                "ratio",
                round(m.lake_bytes_factor, 4),
                round(max(m.lake_bytes_factor, 1.0) * 1.1, 4),
                FLOORS["model_distribution"] if m.fanout == "relay" else float(m.receivers),
                f"{m.receivers} receivers of pool {m.pool} ({m.fanout}): the lake serves "
                f"{m.lake_bytes_factor:g}× the model's bytes",
                "aggregate",
                False,
                pool_group(m.pool),
                ("objectstore",),
            )
        )
    return tuple(out)
