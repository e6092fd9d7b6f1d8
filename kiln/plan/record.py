"""The deployed-plan record: per host, the plan digest and the settings a converge applies there.

`kiln inventory` writes each host's record into its host_vars (`kiln_deployed_record`); the record play
(playbooks/plays/record.yml) copies it, after a converge, to /etc/kiln/deployed-plan.json on the host and to
`<inventory>/deployed/<host>.json` beside the inventory. `kiln diff` builds the same records from the current
spec and compares (kiln/plan/changes.py). A record holds values, never a secret; one that names where a credential is
used (the fence device's address and login) is root-only (`root_only`).

Settings are keyed `<kind>/<name>`; the kind says how a change is applied (kiln/plan/changes.py classifies by it):
sysctl, host, set_param, set_param_persistent, module_param, module_option, mount, env (the tunables' `apply`),
version, target, filesystem, pool, layout, nic, lnet, fencing, ha, objectstore, monitoring.
"""

from __future__ import annotations

from typing import Any

from kiln.plan.groups import LUSTRE_MGS, LUSTRE_SERVERS
from kiln.plan.model import Host, LustreTarget, Plan, Tunable

RECORD_SCHEMA = "kiln.record/v1"
LUSTRE_ROLES = frozenset({"compute", "mgs", "mds", "oss", "router"})
SERVER_SIDES = {"mgs": "mgs", "mds": "mds", "oss": "oss"}
#: Kinds of setting that name where a credential is used (the fence device's address and login): root-only records.
ROOT_ONLY_KINDS = ("fencing/",)


def host_record(plan: Plan, host: Host) -> dict[str, Any]:
    """The record of one host: what a converge of this plan applies there."""
    settings = host_settings(plan, host)
    return {
        "schema": RECORD_SCHEMA,
        "stack": plan.stack,
        "host": host.name,
        "role": host.role,
        "plan_digest": plan.spec_digest,
        "root_only": any(key.startswith(ROOT_ONLY_KINDS) for key in settings),
        "settings": settings,
    }


def host_records(plan: Plan) -> dict[str, dict[str, Any]]:
    """Host name → its record, for every planned host."""
    return {h.name: host_record(plan, h) for h in plan.hosts}


def host_settings(plan: Plan, host: Host) -> dict[str, Any]:
    """`<kind>/<name>` → value for everything the converge applies on the host."""
    out: dict[str, Any] = {}
    for t in plan.tunables:
        if _applies(t, host, plan):
            out[f"{t.apply}/{t.id}"] = t.value
    out.update(_versions(plan, host))
    out.update(_network(plan, host))
    for target in plan.lustre_targets:
        if target.host == host.name:
            out.update(_target(plan, target))
    if LUSTRE_MGS in host.groups:
        out.update(_filesystem(plan))
    fencing = plan.lustre.fencing
    if host.failover_partner and fencing is not None:
        out.update({"fencing/agent": fencing.agent, "fencing/address": fencing.address,
                    "fencing/username": fencing.username})
    out.update(_lnet_check(plan, host))
    if host.name in plan.objectstore.hosts:
        out.update(_objectstore(plan))
    if host.name in plan.monitoring.hosts:
        out["monitoring/retention_days"] = plan.monitoring.retention_days
    out.update(_kafka(plan, host))
    return dict(sorted(out.items()))


def _lnet_check(plan: Plan, host: Host) -> dict[str, Any]:
    """The NIDs a failover node's healthLNET pings and how many must answer (kiln/plan/ha.py): growing the servers
    changes them on the existing pairs, which the lustre_ha role applies with `--tags lustre_ha,record`."""
    pair = plan.ha.pair_of(host.name)
    node = next((n for n in pair.nodes if n.name == host.name), None) if pair is not None else None
    if node is None or node.lnet is None:
        return {}
    return {"ha/lnet_host_list": " ".join(node.lnet.host_list), "ha/lnet_threshold": node.lnet.threshold}


def _kafka(plan: Plan, host: Host) -> dict[str, Any]:
    """A bare-metal KRaft node's identity, the cluster's settings it runs with, and the planned topics (the role
    creates them from any node)."""
    k = plan.kafka
    node = next((n for n in k.nodes if n.host == host.name), None) if k is not None else None
    if k is None or node is None:
        return {}
    out: dict[str, Any] = {"kafka/cluster_id": k.cluster_id, "kafka/node_id": node.node_id,
                           "kafka/roles": list(node.roles), "kafka/version": k.version,
                           "kafka/voters": [n.node_id for n in k.nodes if "controller" in n.roles]}
    out.update({f"kafka/broker/{s.name}": s.value for s in k.broker})
    for t in k.topics:
        out[f"kafka/topic/{t.name}/partitions"] = t.partitions
        out[f"kafka/topic/{t.name}/replication"] = t.replication
        out.update({f"kafka/topic/{t.name}/{s.name}": s.value for s in t.settings})
    return out


def _applies(t: Tunable, host: Host, plan: Plan) -> bool:
    """Whether a tunable is applied on (or, persistent ones, read back on) this host."""
    if t.side == "host":
        return True
    if t.side == "lnet":
        return host.role in LUSTRE_ROLES
    if t.side in ("client", "nccl") and t.pool is not None:
        return host.role == "compute" and host.pool == t.pool
    if t.side == "client":  # persistent client settings (jobid_var) are set on the MGS
        return LUSTRE_MGS in host.groups
    return SERVER_SIDES.get(host.role) == t.side or (t.side == "mgs" and LUSTRE_MGS in host.groups)


def _versions(plan: Plan, host: Host) -> dict[str, Any]:
    v = plan.versions
    out: dict[str, Any] = {"version/kernel": v.kernel}
    if LUSTRE_SERVERS in host.groups:
        out["version/lustre_server"] = v.lustre_server
    elif host.role in LUSTRE_ROLES:
        out["version/lustre_client"] = v.lustre_client
    if any(n.device for n in host.nics) and plan.fabric != "tcp":  # whose RDMA drivers: DOCA-Host's line or inbox
        out["version/doca"] = v.doca if plan.rdma.stack == "doca" else "inbox"
    if host.gpus:
        out.update({"version/gpu_driver": v.gpu_driver, "version/gpu_kernel_modules": v.gpu_kernel_modules,
                    "version/cuda": v.cuda, "version/nccl": v.nccl})
    return out


def _network(plan: Plan, host: Host) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in host.nics:
        if n.address:
            out[f"nic/{n.interface}.address"] = n.address
        if n.nid:
            out[f"nic/{n.interface}.nid"] = n.nid
    routes = plan.routes_for(host)
    if routes:
        out["lnet/routes"] = sorted(f"{r.net} via {r.gateway}" for r in routes)
    return out


def _target(plan: Plan, t: LustreTarget) -> dict[str, Any]:
    """A target this host formats and serves: what its on-disk format is made of, and who may mount it."""
    base = f"target/{t.name}"
    return {
        f"{base}.kind": t.kind,
        f"{base}.index": t.index,
        f"{base}.device": t.device,
        f"{base}.fsname": plan.fsname,
        f"{base}.backend": plan.lustre.backend,
        f"{base}.mkfs_options": list(t.mkfs_options),
        f"{base}.failover_host": t.failover_host,
        f"{base}.servicenodes": [list(x) for x in t.servicenodes],
    }


def _filesystem(plan: Plan) -> dict[str, Any]:
    """Filesystem-wide settings the MGS holds: the name, the OST pools and the directory layouts."""
    out: dict[str, Any] = {"filesystem/fsname": plan.fsname}
    out.update({f"pool/{name}": list(osts) for name, osts in plan.ost_pools.items()})
    out.update({f"layout/{lay.mount_path}": lay.setstripe for lay in plan.layouts})
    return out


def _objectstore(plan: Plan) -> dict[str, Any]:
    os_ = plan.objectstore
    return {
        "objectstore/version": os_.version,
        "objectstore/replication": os_.replication,
        "objectstore/masters": list(os_.masters),
        "objectstore/volume_size_limit_MB": os_.volume_size_limit_MB,
        "objectstore/volumes_per_server": os_.volumes_per_server,
    }
