"""spec → Plan: pure functions, no I/O.

One builder per section of the plan, each in its module, and one convention for them all:

- A builder that can find problems is `build_<section>(spec, …) -> tuple[Section, list[SpecIssue]]`: the section
  and the problems it found while building it. An issue's severity says what becomes of it: `build_plan`
  raises SpecError with every error of every builder, in the order the builders run, and carries the warnings
  in `Plan.warnings`. A builder reports what it finds as issues rather than raising.
- A builder that cannot find problems returns its section alone (`build_hosts(spec) -> tuple[Host, ...]`).
- Checks over sections already built return issues alone (mkfs_issues, plan_warnings, waiver_issues).

Builders take a spec that kiln.spec has validated and checked (kiln/spec/checks.py and checks_dataflow.py);
they do not repeat those cross-field rules.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from kiln.plan.bulk import cyclic_gc_paused
from kiln.plan.capacity import build_capacity
from kiln.plan.dataflow import build_dataflow
from kiln.plan.degraded import build_degraded, degraded_issues
from kiln.plan.ha import build_ha, ha_targets
from kiln.plan.kafka import build_kafka, kafka_targets
from kiln.plan.layouts import build_layouts
from kiln.plan.mkfs import mkfs_issues
from kiln.plan.model import PLAN_SCHEMA, AcceptanceTarget, LustreTarget, Plan, Sizing
from kiln.plan.monitoring import build_monitoring, monitoring_targets
from kiln.plan.objectstore import build_objectstore
from kiln.plan.quotas import build_quota_defaults
from kiln.plan.reader import readers_per_gpu
from kiln.plan.settings import (
    build_compute_pools,
    build_inventory,
    build_kubernetes,
    build_lustre,
    build_networks,
    build_rdma,
    link_mtu_issues,
)
from kiln.plan.signoff import mark_required
from kiln.plan.sizing import build_sizing
from kiln.plan.targets import build_targets
from kiln.plan.topology import build_groups, build_hosts, build_routes, build_target_map, lnet_nets, naming_warnings
from kiln.plan.tuning import build_tunables, nccl_pools
from kiln.plan.versions import build_versions
from kiln.spec.errors import SpecError, SpecIssue, suggest
from kiln.spec.models import ClusterSpec

__all__ = ["Plan", "build_plan"]


def plan_warnings(spec: ClusterSpec, sizing: Sizing, lustre_targets: tuple[LustreTarget, ...]) -> tuple[SpecIssue, ...]:
    """What the plan can build but the stack should fix: issues of severity warning."""
    out: list[SpecIssue] = []
    ck = sizing.checkpoint
    rec = sizing.recommended_oss_nodes
    if not ck.meets_budget:
        out.append(
            SpecIssue(
                "workload.checkpoint.budget_fraction",
                spec.workload.checkpoint.budget_fraction,
                f"checkpoint save takes {ck.save_s:.1f} s, over its budget of {ck.budget_s:.1f} s",
                f"add OSS/OSTs (the planner recommends {rec} OSS; the stack has {spec.lustre.oss.nodes}) "
                "or relax the budget",
                "warning",
            )
        )
    unprotected = sorted({t.name for t in lustre_targets if t.protection == "none"})
    if unprotected:
        kinds = {t.kind for t in lustre_targets if t.protection == "none"}
        where = "lustre.oss.osts.protection" if kinds == {"ost"} else "lustre.*.protection"
        out.append(
            SpecIssue(
                where,
                "none",
                f"{len(unprotected)} Lustre target(s) without redundancy: a drive failure loses the target "
                f"({', '.join(unprotected[:4])}{', ...' if len(unprotected) > 4 else ''})",
                "set protection to a redundant level (mirror, raidz2, raid6, ...) or external for a RAID array",
                "warning",
            )
        )
    fencing = spec.lustre.ha.fencing
    if spec.lustre.failover == "pairs" and fencing is not None and fencing.agent == "none-lab":
        out.append(
            SpecIssue(
                "lustre.ha.fencing.agent",
                fencing.agent,
                "Pacemaker runs without fencing (stonith-enabled=false): a hung server can keep a target while "
                "its partner mounts it",
                "name a real fence agent (e.g. fence_ipmilan) for data that matters",
                "warning",
            )
        )
    if sizing.gpus_fed < sizing.gpus_total:
        out.append(underfed_issue(spec, sizing))
    return tuple(out)


#: Where to act when a file-rate layer bounds the GPUs fed: (field path, fix).
FILE_RATE_FIX = {
    "metadata": ("lustre.mds.mdts", "add MDTs (lustre.mds.nodes / mdts.per_node): file opens at the MDTs bind"),
    "ost_iops": ("lustre.oss.osts", "add OST drives or faster media: the drives' read IOPS bind"),
    "client_loader": ("workload.samples.readers_per_gpu", "run more data-loader readers per GPU"),
}


def underfed_issue(spec: ClusterSpec, sizing: Sizing) -> SpecIssue:
    """The warning where storage feeds fewer GPUs than the cluster has, with the fix for what binds: more OSS for a
    bandwidth bound, the file-rate layer's own remedy (and packing samples into shards) for a file-rate bound."""
    problem = f"storage feeds {sizing.gpus_fed} of {sizing.gpus_total} GPUs at the planned read rate"
    if sizing.gpus_fed_bound.startswith("file rate"):
        path, fix = FILE_RATE_FIX[sizing.read_bottleneck]
        lu = spec.lustre
        value = {
            "lustre.mds.mdts": f"{lu.mds.nodes * lu.mds.mdts.per_node} MDTs",
            "lustre.oss.osts": f"{lu.oss.nodes * lu.oss.osts.per_node} OSTs",
        }.get(path, readers_per_gpu(spec))
        return SpecIssue(path, value, f"{problem}, bound by {sizing.gpus_fed_bound}",
                         f"{fix}, or pack samples into shards (workload.samples.files_per_sample: 0)", "warning")
    return SpecIssue(
        "lustre.oss.nodes", spec.lustre.oss.nodes, problem,
        f"use at least {sizing.recommended_oss_nodes} OSS nodes (the planner's recommendation), or lower "
        "workload.read_demand", "warning",
    )


def waiver_issues(spec: ClusterSpec, targets: tuple[AcceptanceTarget, ...]) -> list[SpecIssue]:
    """Warnings for waivers naming a check this plan lacks (misspelt, or its section removed): they waive nothing,
    which fails safe (the FAIL counts), but the operator should know."""
    known = {t.check for t in targets}
    out = []
    for i, w in enumerate(spec.acceptance.waivers):
        if w.check in known:
            continue
        close = suggest(w.check, known)
        hint = close if close.startswith("did you mean") else "`kiln plan <stack>` lists the plan's acceptance targets"
        out.append(SpecIssue(f"acceptance.waivers[{i}].check", w.check,
                             "is not an acceptance check of this plan, so the waiver waives nothing",
                             f"name one of the plan's checks ({hint}), or remove the waiver", "warning"))
    return out


@cyclic_gc_paused()
def build_plan(spec: ClusterSpec, source: str = "<spec>") -> Plan:
    """Derive the plan of an environment. Raises SpecError for contradictions only the plan can see."""
    hosts = build_hosts(spec)
    lustre_targets, mgs_nids = build_target_map(spec, hosts)
    tunables, tunable_issues = build_tunables(spec)
    layouts, layout_issues = build_layouts(spec)
    quota_defaults, quota_issues = build_quota_defaults(spec)
    sizing, sizing_issues = build_sizing(spec)
    capacity, capacity_issues = build_capacity(spec)
    file_rate = next((la.read_GBps for la in sizing.layers if la.name == "metadata"), None)
    degraded = build_degraded(spec, sizing, file_rate)
    objectstore, os_issues = build_objectstore(spec, hosts)
    dataflow, df_issues = build_dataflow(spec, hosts, layouts, sizing)
    kafka, kafka_issues = build_kafka(spec)
    monitoring, mon_issues = build_monitoring(
        spec=spec, hosts=hosts, targets=lustre_targets, tunables=tunables, objectstore=objectstore,
        demand_read_GBps=sizing.demand_read_GBps, kafka=kafka,
    )
    ha, ha_issues = build_ha(spec, hosts, lustre_targets)
    versions, version_issues = build_versions(spec)
    found = [
        *version_issues, *tunable_issues, *layout_issues, *quota_issues, *mkfs_issues(spec, lustre_targets, mgs_nids),
        *sizing_issues, *capacity_issues, *degraded_issues(spec, sizing, degraded), *os_issues, *df_issues,
        *mon_issues, *ha_issues, *kafka_issues,
    ]
    errors = [i for i in found if i.severity == "error"]
    if errors:
        raise SpecError(source, errors)
    # The dataflow.* targets join the others: kiln verify runs those checks (kiln/verify/checks/dataflow.py).
    # Each target says whether a sign-off needs its evidence (kiln/plan/signoff.py).
    targets = mark_required(spec, build_targets(spec, sizing) + tuple(monitoring_targets(monitoring))
                            + (dataflow.targets if dataflow is not None else ()) + tuple(ha_targets(ha))
                            + tuple(kafka_targets(spec, kafka)))
    if dataflow is not None:  # the data-flow section shows its targets as marked
        dataflow = dataclasses.replace(dataflow, targets=tuple(t for t in targets if t.check.startswith("dataflow.")))
    digest = hashlib.sha256(json.dumps(spec.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:16]
    warnings = (plan_warnings(spec, sizing, lustre_targets) + tuple(i for i in found if i.severity != "error")
                + tuple(waiver_issues(spec, targets)) + tuple(link_mtu_issues(spec)) + tuple(naming_warnings(spec)))
    return Plan(
        schema=PLAN_SCHEMA,
        stack=spec.name,
        description=spec.description,
        fabric=spec.fabric.kind,
        fsname=spec.lustre.fsname,
        mount_point=spec.lustre.mount_point,
        hosts=hosts,
        groups=build_groups(hosts),
        lnet=lnet_nets(spec),
        lnet_routes=build_routes(spec, hosts),
        mgs_nids=mgs_nids,
        lustre_targets=lustre_targets,
        tunables=tunables,
        layouts=layouts,
        ost_pools={p.name: tuple(p.osts) for p in spec.lustre.pools},
        nccl=nccl_pools(tunables, spec),
        objectstore=objectstore,
        sizing=sizing,
        targets=targets,
        acceptance=spec.acceptance,
        kubernetes_version=spec.kubernetes.version,
        spec_digest=digest,
        monitoring=monitoring,
        warnings=warnings,
        dataflow=dataflow,
        quota_defaults=quota_defaults,
        capacity=capacity,
        degraded=degraded,
        kafka=kafka,
        networks=build_networks(spec),
        inventory=build_inventory(spec),
        rdma=build_rdma(spec),
        lustre=build_lustre(spec),
        compute_pools=build_compute_pools(spec),
        kubernetes=build_kubernetes(spec),
        ha=ha,
        versions=versions,
    )
