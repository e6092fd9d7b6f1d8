"""What a spec change does to a deployed cluster: recorded host records against current ones, each difference
classified by what applying it takes (`kiln diff`, docs/runbooks/kiln-diff.md).

The records are kiln/plan/record.py's; a setting's kind (the part of its key before `/`) and the host's role say
how it is applied. Classes, least disruptive first: live (applied in place: sysctl, lctl set_param, a new job's
environment), add (a new host, target or pool member; nothing running is touched), service-restart, client-remount,
pair-failover (a Lustre server's targets move to its partner through Pacemaker while it changes), remove (a host
drained and taken out), reboot (kernel, driver), refused (a reformat or a loss of data: kiln will not apply it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from kiln.knowledge import compat

ChangeClass = Literal[
    "live", "add", "service-restart", "client-remount", "pair-failover", "remove", "reboot", "refused"
]
ORDER: tuple[ChangeClass, ...] = (
    "live", "add", "service-restart", "client-remount", "pair-failover", "remove", "reboot", "refused"
)
DISRUPTIVE: frozenset[ChangeClass] = frozenset(
    {"service-restart", "client-remount", "pair-failover", "remove", "reboot"}
)
SERVER_ROLES = frozenset({"mgs", "mds", "oss"})

RB_DIFF = "docs/runbooks/kiln-diff.md"
RB_ADD_COMPUTE = "docs/runbooks/add-compute-node.md"
RB_ADD_OSS = "docs/runbooks/add-oss-pair.md"
RB_UPGRADE = "docs/runbooks/rolling-upgrade.md"
REFORMAT_FIELDS = frozenset({"kind", "index", "device", "fsname", "backend", "mkfs_options"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One difference on one host: the setting (`<kind>/<name>`, or `host` for the host itself), its recorded and
    planned values (None: absent), its class, what applying it takes (or why kiln refuses it) and the runbook."""

    host: str
    setting: str
    old: Any
    new: Any
    change: ChangeClass
    how: str
    runbook: str


Verdict = tuple[ChangeClass, str, str]


def diff_records(recorded: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]]) -> list[Change]:
    """Every difference between the recorded and the current records, host by host in name order."""
    out: list[Change] = []
    for host in sorted(recorded.keys() | current.keys()):
        old, new = recorded.get(host), current.get(host)
        if old is None or new is None:
            out.append(_host_change(host, old, new))
            continue
        out += _setting_changes(host, str(new.get("role", old.get("role", ""))), old["settings"], new["settings"])
    return out


def worst(changes: list[Change]) -> ChangeClass | None:
    """The most disruptive class among the changes; None when there are none."""
    return max((c.change for c in changes), key=ORDER.index, default=None)


def _host_change(host: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> Change:
    if old is None:
        assert new is not None
        server = new["role"] in SERVER_ROLES
        return Change(host=host, setting="host", old=None, new=new["role"], change="add",
                      how="new host: converge it alone (ansible-playbook --limit); the others are untouched",
                      runbook=RB_ADD_OSS if server else RB_ADD_COMPUTE)
    role = old["role"]
    if role in SERVER_ROLES:
        return Change(host=host, setting="host", old=role, new=None, change="refused",
                      how="removing a Lustre server takes its targets and the data on them away: migrate the data "
                      "off (lfs migrate), deactivate its targets, then remove it by hand", runbook=RB_DIFF)
    return Change(host=host, setting="host", old=role, new=None, change="remove",
                  how="drain the host (kiln-health cordon), stop its services, then remove it", runbook=RB_DIFF)


def _setting_changes(host: str, role: str, old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    out: list[Change] = []
    targets_seen: set[str] = set()
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        kind, name = key.split("/", 1)
        if kind == "target":
            target = name.rsplit(".", 1)[0]
            if f"target/{target}.kind" not in old or f"target/{target}.kind" not in new:
                if target not in targets_seen:
                    targets_seen.add(target)
                    out.append(_whole_target(host, target, old, new))
                continue
        cls, how, runbook = _classify(kind, name, role, a, b)
        if cls == "pair-failover" and not _paired(old, new):
            cls, how = "service-restart", _ALONE[kind]
        out.append(Change(host=host, setting=key, old=a, new=b, change=cls, how=how, runbook=runbook))
    return out


#: Why a server without a failover partner stops its targets for a change a pair makes by failover.
_ALONE = {
    kind: f"no failover partner to take its targets: they stop while {why}, and what they serve (for the MGS or an "
    "MDT, the whole filesystem) waits meanwhile; plan a maintenance window"
    for kind, why in (("module_option", "the modules reload"), ("module_param", "the modules reload"),
                      ("version", "the server is upgraded"), ("target", "tunefs.lustre runs on them"))
}


def _paired(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a server has a failover partner: one of its targets lists more than one server that may mount it
    (`servicenodes`, one NID list per server; kiln/plan/record.py)."""
    return any(k.startswith("target/") and k.endswith(".servicenodes") and len(v or ()) > 1
               for settings in (old, new) for k, v in settings.items())


def _whole_target(host: str, target: str, old: dict[str, Any], new: dict[str, Any]) -> Change:
    key = f"target/{target}.device"
    if key not in old:
        return Change(host=host, setting=f"target/{target}", old=None, new=new.get(key), change="add",
                      how="new target: formatted (the reformat guard refuses a device that holds a filesystem), "
                      "registered with the MGS, added to its pools; existing data stays where it is",
                      runbook=RB_ADD_OSS)
    return Change(host=host, setting=f"target/{target}", old=old.get(key), new=None, change="refused",
                  how="removing a target loses the data on it: lfs migrate its objects to other OSTs and deactivate "
                  "it first", runbook=RB_DIFF)


def _classify(kind: str, name: str, role: str, old: Any, new: Any) -> Verdict:
    rule = _RULES.get(kind)
    if rule is None:
        return "service-restart", "a setting kiln does not classify: treated as a service restart", RB_DIFF
    return rule(name, role, old, new)


def _live(how: str, runbook: str = RB_DIFF) -> Callable[[str, str, Any, Any], Verdict]:
    return lambda name, role, old, new: ("live", how, runbook)


def _host(name: str, role: str, old: Any, new: Any) -> Verdict:
    if name == "host.memlock":
        return ("service-restart", "the limit applies to processes started after it: restart the RDMA users "
                "(drain the node first)", RB_DIFF)
    return "live", "applied in place by the common role (oneshot unit)", RB_DIFF


def _load_time(name: str, role: str, old: Any, new: Any) -> Verdict:
    """Module options are read when the module loads."""
    if role in SERVER_ROLES:
        return ("pair-failover", "read when the modules load: move the server's targets to its partner (pcs), "
                "reload, move them back", RB_UPGRADE)
    if role == "router":
        return "service-restart", "read when LNet loads: restart lnet on one router at a time", RB_UPGRADE
    return ("client-remount", "read when the modules load: drain, unmount, unload the Lustre modules, remount",
            RB_UPGRADE)


def _version(name: str, role: str, old: Any, new: Any) -> Verdict:
    if name == "doca":
        return ("reboot", "new RDMA drivers (another DOCA-Host line, or DOCA-Host instead of the distribution's or "
                "back) load at a reboot: one failure domain at a time", RB_UPGRADE)
    if name == "gpu_kernel_modules":
        return ("reboot", "the other flavor of the GPU kernel modules loads at a reboot: one failure domain at a time",
                RB_UPGRADE)
    if name in ("kernel", "gpu_driver"):
        return "reboot", f"a new {name.replace('_', ' ')} takes a reboot: one failure domain at a time", RB_UPGRADE
    if name == "lustre_server":
        return ("pair-failover", "upgrade one partner at a time: move its targets to the partner (pcs), upgrade, "
                "move them back", RB_UPGRADE)
    if name == "lustre_client":
        return "client-remount", "drain, unmount, upgrade the client packages, remount; in batches", RB_UPGRADE
    return "live", f"installed beside the running jobs; jobs started afterwards use the new {name}", RB_UPGRADE


def _target(name: str, role: str, old: Any, new: Any) -> Verdict:
    field = name.rsplit(".", 1)[1]
    if field in REFORMAT_FIELDS:
        return ("refused", f"the target's {field} is fixed when it is formatted: changing it means a reformat, "
                "which erases its data", RB_DIFF)
    return ("pair-failover", "tunefs.lustre --servicenode with the target unmounted: move it to the partner (pcs) "
            "while it changes", RB_UPGRADE)


def _objectstore(name: str, role: str, old: Any, new: Any) -> Verdict:
    if name == "version":
        builds = compat.load().seaweedfs_releases
        was, will = builds.get(str(old)), builds.get(str(new))
        if was and will and was.build != will.build:
            return ("refused", f"SeaweedFS {old} is a {was.build} build and {new} a {will.build} build: their volume "
                    "index entries differ in size (4- against 5-byte offsets), so the new servers cannot read the "
                    "volumes; pin a release of the running build (compat.yaml seaweedfs_releases)", RB_UPGRADE)
        return ("service-restart", "stage the new weed binary, then one volume server at a time under load with "
                "replication checked in between (kiln verify --only objectstore.rolling_restart --option "
                "objectstore.rolling.upgrade_binary=<staged>), then masters, filers and gateways", RB_UPGRADE)
    return "service-restart", "restart the SeaweedFS servers one at a time, replication checked in between", RB_UPGRADE


def _filesystem(name: str, role: str, old: Any, new: Any) -> Verdict:
    return ("refused", "the filesystem name is written into every target when it is formatted and into every "
            "client's mount: changing it makes a new filesystem", RB_DIFF)


def _pool(name: str, role: str, old: Any, new: Any) -> Verdict:
    if new is None:
        return ("refused", "removing an OST pool changes where files that name it are placed: empty it (lfs find "
                "--pool, lfs migrate) and destroy it by hand", RB_DIFF)
    dropped = sorted(set(old or ()) - set(new))
    if dropped:
        return ("refused", f"shrinking an OST pool that holds data: files on OST index {dropped} stay there; migrate "
                "them (lfs migrate) before lctl pool_remove", RB_DIFF)
    return "live", "lctl pool_new/pool_add on the MGS; existing files stay where they are (lfs migrate)", RB_ADD_OSS


RB_KAFKA = "docs/runbooks/kafka-add-broker.md"


def _kafka(name: str, role: str, old: Any, new: Any) -> Verdict:
    """A bare-metal KRaft node: its identity is formatted into its log directory; topics change through the
    brokers, never by restarting them; everything else is read at start (the kafka role rolls the nodes)."""
    if name in ("cluster_id", "node_id", "roles", "voters"):
        return ("refused", f"{name.replace('_', ' ')} is formatted into the node's meta.properties or the static "
                "quorum: changing it means a new node (add it, move the partitions, retire the old one)", RB_KAFKA)
    if name.startswith("topic/") and name.endswith("/partitions"):
        if isinstance(old, int) and isinstance(new, int) and new < old:
            return "refused", "Kafka cannot remove partitions from a topic: make a new topic and move to it", RB_KAFKA
        return ("live", "kafka-topics --alter adds partitions (the kafka role); training resumes with "
                "kiln.stream.merge_states(states, partitions=<new count>) to read them", RB_KAFKA)
    if name.startswith("topic/") and name.endswith("/replication"):
        return ("live", "a replica set change is a partition reassignment (kafka-reassign-partitions, throttled)",
                RB_KAFKA)
    if name.startswith("topic/"):
        return "live", "kafka-configs --alter on the topic, applied by the brokers at once", RB_DIFF
    return ("service-restart", "read when the broker starts: the kafka role restarts one node at a time and waits "
            "for under-replicated partitions to return to 0", RB_UPGRADE)


def _nic(name: str, role: str, old: Any, new: Any) -> Verdict:
    if role in SERVER_ROLES:
        return ("refused", "a server's address and NID are recorded in every target and the MGS configuration: "
                "changing them needs tunefs.lustre --writeconf on every target with the filesystem stopped (a "
                "family that grows within its networks.reserve moves no address)", RB_DIFF)
    if role == "compute":
        return "client-remount", "LNet takes the new NID when it restarts: drain, unmount, restart LNet, remount", \
            RB_DIFF
    return "service-restart", "restart the host's network services (rdma, lnet) with the new address", RB_DIFF


_RULES: dict[str, Callable[[str, str, Any, Any], Verdict]] = {
    "sysctl": _live("sysctl -w by the common role"),
    "host": _host,
    "set_param": _live("lctl set_param on the clients (lustre_client role)"),
    "set_param_persistent": _live("lctl set_param -P on the MGS; every target takes it"),
    "env": _live("read when a job starts: the next job uses it"),
    "layout": _live("lfs setstripe on the directory: new files only, existing files keep their layout"),
    "lnet": _live("lnetctl route add/del in place"),
    "fencing": _live("pcs stonith update on the pair; the targets stay where they are"),
    "ha": _live("the lustre_ha role updates the pair's healthLNET in place (kiln deploy --tags lustre_ha,record "
                "--limit <pair>): its parameters are unique=0 and it advertises reload, so Pacemaker reloads it and "
                "no target moves"),
    "mount": lambda n, r, o, w: ("client-remount", "mount options apply at mount: drain, unmount, remount",
                                 RB_UPGRADE),
    "module_param": _load_time,
    "module_option": _load_time,
    "version": _version,
    "target": _target,
    "filesystem": _filesystem,
    "pool": _pool,
    "nic": _nic,
    "objectstore": _objectstore,
    "monitoring": lambda n, r, o, w: ("service-restart", "restart Prometheus (a gap in the scrape)", RB_DIFF),
    "kafka": _kafka,
}
