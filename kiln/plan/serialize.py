"""The plan as JSON: a documented, versioned contract (docs/plan-json.md, schema kiln.plan/v2).

Stable keys (tested): sizing.aggregate.read_GBps, sizing.aggregate.write_GBps, sizing.bottleneck.read,
sizing.bottleneck.write, sizing.layers[] (name, kind, read_GBps, write_GBps, formula, factors),
sizing.gpus_fed, sizing.checkpoint (bytes, save_s, restore_s, budget_s, meets_budget, ...),
targets[] (check, metric, unit, expected, warn, fail, why, ...). GB/s = 10^9 bytes/s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterator
from typing import Any

from kiln.plan.model import (
    AcceptanceTarget,
    Amount,
    Capacity,
    Checkpoint,
    CheckpointFlowPlan,
    DataflowPlan,
    DataLinkPlan,
    Degraded,
    Host,
    KafkaPlan,
    Layer,
    Layout,
    LustreTarget,
    ModelFlowPlan,
    Nic,
    ObjectStorePlan,
    Plan,
    Sizing,
    Tunable,
)


def _num(x: float) -> float | None:
    if math.isinf(x) or math.isnan(x):
        return None
    return round(x, 4)


def _host(h: Host) -> dict[str, Any]:
    return {
        "name": h.name,
        "role": h.role,
        "pool": h.pool,
        "management_address": h.management_address,
        "groups": list(h.groups),
        "gpus": h.gpus,
        "failover_partner": h.failover_partner,
        "nics": [
            {
                "role": n.role,
                "model": n.model,
                "interface": n.interface,
                "device": n.device,
                "address": n.address,
                "nid": n.nid,
                "link_Gbps": n.link_Gbps,
            }
            for n in h.nics
        ],
    }


#: The string escaping of json.dumps (ensure_ascii, as the plan is written): the C accelerator where it is built.
_string = json.encoder.encode_basestring_ascii


def _scalar(v: str | float | None) -> str:
    """A JSON scalar exactly as json.dumps writes it."""
    if v is None:
        return "null"
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, bool) or not math.isfinite(v):
        return json.dumps(v)
    return repr(v)  # json.encoder writes int and float with their __repr__


class _HostWriter:
    """`json.dumps(_host(h))` for one host after another, byte for byte, without the dictionaries: records that
    hosts share (a pool's compute-rail NICs and its groups are one object each) are written once. The memo is keyed
    by identity and `_kept` holds each record, so no id is reused while the writer lives; NICs with an address are
    each one host's and are not kept."""

    def __init__(self) -> None:
        self._memo: dict[int, str] = {}
        self._kept: list[object] = []

    def _write_shared(self, obj: Nic | tuple[str, ...]) -> str:
        self._kept.append(obj)
        text = self._memo[id(obj)] = _nic_text(obj) if isinstance(obj, Nic) else json.dumps(list(obj))
        return text

    def host(self, h: Host) -> str:
        memo = self._memo
        nics = ", ".join(_nic_text(n) if n.address else memo.get(id(n)) or self._write_shared(n) for n in h.nics)
        groups = memo.get(id(h.groups)) or self._write_shared(h.groups)
        return (f'{{"name": {_string(h.name)}, "role": {_string(h.role)}, "pool": {_optional(h.pool)}, '
                f'"management_address": {_string(h.management_address)}, "groups": {groups}, '
                f'"gpus": {_scalar(h.gpus)}, "failover_partner": {_optional(h.failover_partner)}, "nics": [{nics}]}}')


def _optional(v: str | None) -> str:
    return "null" if v is None else _string(v)


def _nic_text(n: Nic) -> str:
    return (f'{{"role": {_string(n.role)}, "model": {_string(n.model)}, "interface": {_string(n.interface)}, '
            f'"device": {_optional(n.device)}, "address": {_optional(n.address)}, "nid": {_optional(n.nid)}, '
            f'"link_Gbps": {_scalar(n.link_Gbps)}}}')


def _routes(plan: Plan) -> dict[str, Any]:
    """`lnet_routes`, present only where the spec has LNet routers (so routerless plans keep their shape)."""
    if not plan.lnet_routes:
        return {}
    return {
        "lnet_routes": [
            {"side": r.side, "net": r.net, "via": r.via, "gateway": r.gateway, "router": r.router}
            for r in plan.lnet_routes
        ]
    }


def _tunable(t: Tunable) -> dict[str, Any]:
    return {
        "id": t.id,
        "param": t.param,
        "value": t.value,
        "side": t.side,
        "apply": t.apply,
        "pool": t.pool,
        "overridden": t.overridden,
        "reason": t.reason,
        "source": t.source,
    }


def _layout(lay: Layout) -> dict[str, Any]:
    return {
        "path": lay.path,
        "mount_path": lay.mount_path,
        "purpose": lay.purpose,
        "kind": lay.kind,
        "setstripe": lay.setstripe,
        "reason": lay.reason,
        "components": [
            {
                "extent_end": c.extent_end,
                "stripe_count": c.stripe_count,
                "stripe_size": c.stripe_size,
                "overstripe": c.overstripe,
                "dom": c.dom,
                "pool": c.pool,
            }
            for c in lay.components
        ],
        "dirstripe": None if lay.dirstripe is None else lay.dirstripe.module_args(),
        "setdirstripe": "" if lay.dirstripe is None else " ".join(lay.dirstripe.args()),
        "dirstripe_reason": lay.dirstripe_reason,
    }


def target_dict(t: AcceptanceTarget) -> dict[str, Any]:
    return {
        "check": t.check,
        "metric": t.metric,
        "unit": t.unit,
        "expected": t.expected,
        "warn": t.warn,
        "fail": t.fail,
        "why": t.why,
        "scope": t.scope,
        "higher_is_better": t.higher_is_better,
        "group": t.group,
        "requires": list(t.requires),
        "env": dict(t.env),
        "required": t.required,
        "required_why": t.required_why,
    }


def _data_link(x: DataLinkPlan) -> dict[str, Any]:
    return {
        "name": x.name,
        "bucket": x.bucket,
        "prefix": x.prefix,
        "path": x.path,
        "mount_path": x.mount_path,
        "directory": x.directory,
        "setstripe": x.setstripe,
        "import_policy": x.import_policy,
        "import_trigger": x.import_trigger,
        "schedule": x.schedule,
        "include": list(x.include),
        "exclude": list(x.exclude),
        "export_policy": x.export_policy,
        "conflict": x.conflict,
        "deletions": x.deletions,
        "max_delete_fraction": x.max_delete_fraction,
        "posix_metadata": x.posix_metadata,
        "note": x.note,
    }


def _checkpoint_flow(ck: CheckpointFlowPlan | None) -> dict[str, Any] | None:
    if ck is None:
        return None
    return {
        "path": ck.path,
        "mount_path": ck.mount_path,
        "bucket": ck.bucket,
        "prefix": ck.prefix,
        "commit_marker": ck.commit_marker,
        "write_back": ck.write_back,
        "part_size_MiB": ck.part_size_MiB,
        "keep_resident": ck.keep_resident,
        "release_after_verify": ck.release_after_verify,
        "bytes": ck.bytes,
        "write_s": _num(ck.write_s),
        "export_s": _num(ck.export_s),
        "export_GBps": _num(ck.export_GBps),
        "export_bottleneck": ck.export_bottleneck,
        "blocked_s": _num(ck.blocked_s),
        "blocked_sync_s": _num(ck.blocked_sync_s),
        "restore_fast_s": _num(ck.restore_fast_s),
        "restore_lake_s": _num(ck.restore_lake_s),
        "interval_s": _num(ck.interval_s),
    }


def _model_flow(m: ModelFlowPlan) -> dict[str, Any]:
    return {
        "bucket": m.bucket,
        "prefix": m.prefix,
        "pool": m.pool,
        "target": m.target,
        "events": m.events,
        "fanout": m.fanout,
        "receivers": m.receivers,
        "lake_bytes_factor": _num(m.lake_bytes_factor),
        "hosts": list(m.hosts),
        "targets": list(m.targets),
        "filer_access": m.filer_access,
    }


def kafka_dict(k: KafkaPlan | None) -> dict[str, Any] | None:
    """The `kafka` section (docs/plan-json.md): the token stream; None when the stack declares none."""
    if k is None:
        return None
    return dataclasses.asdict(k)


def dataflow_dict(df: DataflowPlan | None) -> dict[str, Any] | None:
    """The `dataflow` section (docs/plan-json.md); None when the stack declares no data flow."""
    if df is None:
        return None
    return {
        "engine": df.engine,
        "movers": {
            "hosts": list(df.mover_hosts),
            "group": df.mover_group,
            "host_GBps": _num(df.host_GBps),
            "stream_GBps": _num(df.stream_GBps),
            "concurrency": df.concurrency,
            "part_size_MiB": df.part_size_MiB,
            "multipart_cutoff_MiB": df.multipart_cutoff_MiB,
            "poll_s": df.poll_s,
        },
        "lake": {"get_GBps": _num(df.lake_get_GBps), "put_GBps": _num(df.lake_put_GBps)},
        "stage_in": {
            "GBps": _num(df.stage_GBps),
            "bottleneck": df.stage_bottleneck,
            "dataset_bytes": df.dataset_bytes,
            "seconds": _num(df.stage_in_s),
            "naive_seconds": _num(df.naive_stage_in_s),
        },
        "links": [_data_link(x) for x in df.links],
        "checkpoints": _checkpoint_flow(df.checkpoints),
        "models": [_model_flow(m) for m in df.models],
        "filer_subscribers": list(df.filer_subscribers),
        "why": list(df.why),
        "targets": [target_dict(t) for t in df.targets],
    }


def _monitoring(plan: Plan, include_targets: bool) -> dict[str, Any]:
    m = plan.monitoring
    out: dict[str, Any] = {
        "hosts": list(m.hosts),
        "retention_days": m.retention_days,
        "scrape_interval_s": m.scrape_interval_s,
        "receivers": [{"name": r.name, "severities": list(r.severities)} for r in m.receivers],
        "node_exporter_args": list(m.node_exporter_args),
        "alerts": [
            {
                "alert": r.alert,
                "group": r.group,
                "severity": r.severity,
                "expr": r.expr,
                "for_s": r.for_s,
                "labels": r.labels,
                "runbook": r.runbook,
            }
            for r in m.rules
        ],
        "lustre_snapshots": [{"name": s.name, "every_hours": s.every_hours, "keep": s.keep} for s in m.snapshots],
    }
    if include_targets:
        out["scrape_targets"] = [
            {"job": t.job, "host": t.host, "address": t.address, "labels": t.labels} for t in m.scrape_targets
        ]
    return out


def _layer(la: Layer) -> dict[str, Any]:
    return {
        "name": la.name,
        "kind": la.kind,
        "read_GBps": _num(la.read_GBps),
        "write_GBps": _num(la.write_GBps),
        "formula": la.formula,
        "factors": list(la.factors),
    }


def _checkpoint(ck: Checkpoint) -> dict[str, Any]:
    return {
        "bytes": ck.bytes,
        "bytes_per_param": ck.bytes_per_param,
        "save_s": _num(ck.save_s),
        "restore_s": _num(ck.restore_s),
        "budget_s": _num(ck.budget_s),
        "required_write_GBps": _num(ck.required_write_GBps),
        "meets_budget": ck.meets_budget,
        "why": ck.why,
        "terms": [{"name": t.name, "seconds": _num(t.seconds), "why": t.why} for t in ck.terms],
        "save_total_s": _num(ck.save_total_s),
        "lower_bound": ck.lower_bound,
    }


def _sizing(s: Sizing) -> dict[str, Any]:
    return {
        "bottleneck": {"read": s.read_bottleneck, "write": s.write_bottleneck},
        "aggregate": {"read_GBps": _num(s.aggregate_read_GBps), "write_GBps": _num(s.aggregate_write_GBps)},
        "demand": {
            "read_GBps": _num(s.demand_read_GBps),
            "read_per_gpu_GBps": _num(s.read_per_gpu_GBps),
            "single_node_read_GBps": _num(s.single_node_demand_read_GBps),
            "source": s.read_demand_source,
        },
        "per_client": {"read_GBps": _num(s.per_client_read_GBps), "write_GBps": _num(s.per_client_write_GBps)},
        "single_client": {
            "read_GBps": _num(s.single_client_read_GBps),
            "write_GBps": _num(s.single_client_write_GBps),
        },
        "layers": [_layer(la) for la in s.layers],
        "gpus_total": s.gpus_total,
        "gpus_fed": s.gpus_fed,
        "gpus_fed_bound": s.gpus_fed_bound,
        "headroom_read": _num(s.headroom_read),
        "metadata": {"create_ops_per_s": _num(s.metadata_create_ops)},
        "checkpoint": _checkpoint(s.checkpoint),
        "stage_in": {
            "seconds": _num(s.stage_in_s),
            "GBps": _num(s.stage_in_GBps),
            "bottleneck": s.stage_in_bottleneck,
        },
        "objectstore_GBps": _num(s.objectstore_GBps),
        "recommended_oss_nodes": s.recommended_oss_nodes,
        "notes": list(s.notes),
    }


def _amounts(items: tuple[Amount, ...]) -> list[dict[str, Any]]:
    return [{"name": a.name, "TB": _num(a.TB), "why": a.why} for a in items]


def capacity_dict(c: Capacity | None) -> dict[str, Any] | None:
    """The `capacity` section (docs/plan-json.md): usable space, overheads, demand, fill and inodes."""
    if c is None:
        return None
    return {
        "raw_TB": _num(c.raw_TB),
        "usable_TB": _num(c.usable_TB),
        "overheads": _amounts(c.overheads),
        "demand": _amounts(c.demand),
        "demand_TB": _num(c.demand_TB),
        "fill_percent": _num(c.fill_percent),
        "fill_warn_percent": c.fill_warn_percent,
        "fill_critical_percent": c.fill_critical_percent,
        "files": c.files,
        "mdt_inodes": c.mdt_inodes,
        "ost_objects": c.ost_objects,
        "why": list(c.why),
    }


def degraded_dict(d: Degraded | None) -> dict[str, Any] | None:
    """The `degraded` section (docs/plan-json.md): one OSS / one MDS down."""
    if d is None:
        return None
    return {
        "failover": d.failover,
        "read_GBps": _num(d.read_GBps),
        "write_GBps": _num(d.write_GBps),
        "read_bound": d.read_bound,
        "create_ops_per_s": _num(d.create_ops),
        "gpus_fed": d.gpus_fed,
        "checkpoint_save_s": _num(d.checkpoint_save_s),
        "holds": d.holds,
        "why": list(d.why),
    }


def _lustre_target(t: LustreTarget) -> dict[str, Any]:
    return {
        "name": t.name,
        "kind": t.kind,
        "index": t.index,
        "host": t.host,
        "device": t.device,
        "mount_point": t.mount_point,
        "servicenodes": [list(x) for x in t.servicenodes],
        "failover_host": t.failover_host,
        "vdevs": list(t.vdevs),
        "protection": t.protection,
        "drives": list(t.drives),
        "mkfs_options": list(t.mkfs_options),
        "raid_chunk_KiB": t.raid_chunk_KiB,
        "ashift": t.ashift,
        "attachment": t.attachment,
    }


def _lustre(plan: Plan) -> dict[str, Any]:
    return {
        "fsname": plan.fsname,
        "mount_point": plan.mount_point,
        "mgs_nids": [list(n) for n in plan.mgs_nids],
        "lnet": [{"name": n.name, "lnd": n.lnd, "multi_rail": n.multi_rail} for n in plan.lnet],
        **_routes(plan),
        "targets": [_lustre_target(t) for t in plan.lustre_targets],
        "layouts": [_layout(x) for x in plan.layouts],
        "quota_defaults": [{**q.module_args(), "setquota": " ".join(q.args())} for q in plan.quota_defaults],
        "ost_pools": {k: list(v) for k, v in plan.ost_pools.items()},
    }


def _objectstore(os_: ObjectStorePlan) -> dict[str, Any]:
    return {
        "backend": os_.backend,
        "endpoint": os_.endpoint,
        "hosts": list(os_.hosts),
        "masters": list(os_.masters),
        "buckets": [{"name": b.name, "purpose": b.purpose} for b in os_.buckets],
        "raw_capacity_TB": _num(os_.raw_capacity_TB),
        "usable_capacity_TB": _num(os_.usable_capacity_TB),
        "capacity_TB": os_.capacity_TB,
        "replication": os_.replication,
        "volume_size_limit_MB": os_.volume_size_limit_MB,
        "volumes_per_server": os_.volumes_per_server,
        "version": os_.version,
    }


#: Hosts encoded at a time by plan_json: large enough that each encoder call does real work.
HOSTS_PER_CHUNK = 1024


def plan_to_dict(plan: Plan, include_hosts: bool = True) -> dict[str, Any]:
    """The plan as the JSON document of docs/plan-json.md, one helper per section."""
    out = _sections(plan, include_hosts)
    if include_hosts:
        out["hosts"] = [_host(h) for h in plan.hosts]
    return out


def plan_json(plan: Plan, include_hosts: bool = True) -> Iterator[str]:
    """`json.dumps(plan_to_dict(plan, include_hosts))`, byte for byte, in pieces: the hosts (last in the document,
    and most of a large plan) are encoded a chunk at a time, so a 100,000-node plan is never one tree or one
    string in memory."""
    head = json.dumps(_sections(plan, include_hosts))
    if not include_hosts:
        yield head
        return
    yield f'{head[:-1]}, "hosts": ['
    writer = _HostWriter()
    for i in range(0, len(plan.hosts), HOSTS_PER_CHUNK):
        if i:
            yield ", "
        yield ", ".join(writer.host(h) for h in plan.hosts[i:i + HOSTS_PER_CHUNK])
    yield "]}"


def _sections(plan: Plan, include_hosts: bool) -> dict[str, Any]:
    """Every section of the document but the hosts (scrape targets only where the hosts are in)."""
    out: dict[str, Any] = {
        "schema": plan.schema,
        "stack": plan.stack,
        "description": plan.description,
        "spec_digest": plan.spec_digest,
        "warnings": [w.line() for w in plan.warnings],
        "sizing": _sizing(plan.sizing),
        "capacity": capacity_dict(plan.capacity),
        "degraded": degraded_dict(plan.degraded),
        "targets": [target_dict(t) for t in plan.targets],
        "acceptance": plan.acceptance.model_dump(),
        "lustre": _lustre(plan),
        "tunables": [_tunable(t) for t in plan.tunables],
        "nccl": [{"pool": n.pool, "env": n.env, "hcas": list(n.hcas)} for n in plan.nccl],
        "objectstore": _objectstore(plan.objectstore),
        "groups": {g: list(v) for g, v in plan.groups.items()},
        "dataflow": dataflow_dict(plan.dataflow),
        "kafka": kafka_dict(plan.kafka),
        "monitoring": _monitoring(plan, include_hosts),
    }
    return out


def plan_digest(plan: Plan) -> str:
    """A digest of the whole plan JSON (hosts included): it changes with anything the plan derives, also where the
    spec did not change (a new kiln, new knowledge). The acceptance report records it, and a measurement is reused
    only under the same digest (kiln/verify/reuse.py)."""
    text = json.dumps(plan_to_dict(plan, include_hosts=True), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
