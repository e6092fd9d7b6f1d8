"""Failover pairs under Pacemaker: each pair's nodes, Corosync links, targets (with their md arrays or pools), the
LNet health check of each node, fencing delays, and the takeover bounds the ha.* acceptance checks judge against.

The healthLNET rule follows lustre-release lustre/conf/resource/healthLNET: ping_update() reads
/sys/class/net/<device>/carrier and scores 0 without carrier, else the number of host_list NIDs that answer
`lctl ping` (lctl_check()). So each node pings NIDs outside its own pair (the partner's loss must never lower the
survivor's score), one agent instance runs per storage interface (the agent reads one device), and a target is
banned from a node only where every one of its interfaces scores below the threshold.
"""

from __future__ import annotations

from kiln import knowledge
from kiln.plan.groups import COMPUTE, LNET_ROUTERS, LUSTRE_SERVERS
from kiln.plan.model import (
    AcceptanceTarget,
    HaLnetCheck,
    HaNode,
    HaPair,
    HaPlan,
    HaResource,
    HaTimingPlan,
    Host,
    LustreTarget,
)
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec

TIER = {"mgt": 0, "mdt": 1, "ost": 2}
MD_LEVELS = ("raid1", "raid5", "raid6", "raid10")
GROUP = LUSTRE_SERVERS


def _resource(t: LustreTarget, backend: str) -> HaResource:
    md = backend == "ldiskfs" and t.protection in MD_LEVELS and t.device.startswith("/dev/md/")
    return HaResource(
        name=t.name, kind=t.kind, tier=TIER[t.kind], node=t.host, device=t.device, mount_point=t.mount_point,
        md_device=t.device if md else "", md_members=t.drives if md else (),
        zpool=t.device.split("/", 1)[0] if backend == "zfs" else "",
    )


def _nets(h: Host) -> set[str]:
    return {nid.split("@", 1)[1] for nid in h.nids}


def _ping_candidates(node: Host, pair: set[str], hosts: tuple[Host, ...], shift: int) -> list[str]:
    """One NID per host outside the pair that shares an LNet network with `node`: other servers (from the one after
    `node` in plan order, moved on by `shift` so the two nodes of a pair ping different servers), then LNet routers,
    then clients."""
    nets = _nets(node)
    nid = {h.name: next((n for n in h.nids if n.split("@", 1)[1] in nets), None) for h in hosts if h.name not in pair}

    def members(group: str) -> list[str]:
        return [h.name for h in hosts if group in h.groups and nid.get(h.name)]

    servers = [h.name for h in hosts if LUSTRE_SERVERS in h.groups]
    after = servers.index(node.name) + 1
    ring = [h for h in servers[after:] + servers[:after] if nid.get(h)]
    k = shift % len(ring) if ring else 0
    return [nid[h] or "" for h in ring[k:] + ring[:k] + members(LNET_ROUTERS) + members(COMPUTE)]


def _lnet_check(node: Host, pair: set[str], hosts: tuple[Host, ...], index: int) -> HaLnetCheck | None:
    wanted = knowledge.load().tuning.ha.lnet_ping_hosts.value
    nids = tuple(_ping_candidates(node, pair, hosts, index * wanted)[:wanted])
    devices = tuple(n.interface for n in node.nics if n.carries_storage and n.nid)
    if not nids or not devices:
        return None
    return HaLnetCheck(devices=devices, host_list=nids, threshold=len(nids) // 2 + 1)


def _links(h: Host) -> tuple[str, ...]:
    """Corosync knet links: the management address, then the first storage address (a second, independent path)."""
    storage = next((n.address for n in h.nics if n.carries_storage and n.address), None)
    return (h.management_address, storage) if storage and storage != h.management_address else (h.management_address,)


def _pair(spec: ClusterSpec, a: Host, b: Host, hosts: tuple[Host, ...],
          targets: tuple[LustreTarget, ...]) -> HaPair:
    names = {a.name, b.name}
    delay = knowledge.load().tuning.ha.fence_delay_s.value
    nodes = tuple(
        # The fence device that targets the first node waits pcmk_delay_base: in a split the first node fences first.
        HaNode(name=h.name, links=_links(h), lnet=_lnet_check(h, names, hosts, i), fence_delay_s=delay if i == 0 else 0)
        for i, h in enumerate((a, b))
    )
    mine = sorted((t for t in targets if t.host in names), key=lambda t: (TIER[t.kind], t.index))
    return HaPair(cluster=f"{spec.lustre.fsname}-{a.name}-{b.name}"[:32], nodes=nodes,
                  resources=tuple(_resource(t, spec.lustre.backend) for t in mine))


def _starts(pair: HaPair, node: str) -> int:
    """Start steps of the targets `node` runs, in order: one per tier, one more where arrays or pools come first."""
    own = [r for r in pair.resources if r.node == node]
    return len({r.tier for r in own}) + (1 if any(r.md_device or r.zpool for r in own) else 0)


def _timing(pairs: tuple[HaPair, ...]) -> HaTimingPlan:
    ha = knowledge.load().tuning.ha
    token = ha.corosync_token_ms.value
    consensus = round(token * ha.corosync_consensus_factor.value)
    start = ha.resource_start_s.value
    steps = max((_starts(p, n.name) for p in pairs for n in p.nodes), default=1)
    detect = (token + consensus) / 1000 + 0.05  # corosync.conf(5) token: a new membership ~50 ms after consensus
    partner = detect + ha.fence_delay_s.value + ha.fence_action_s.value + steps * start
    lnet = ha.lnet_monitor_s.value + ha.lnet_dampen_s.value + 2 * steps * start
    return HaTimingPlan(
        token_ms=token, consensus_ms=consensus, fence_delay_s=ha.fence_delay_s.value,
        lnet_monitor_s=ha.lnet_monitor_s.value, lnet_dampen_s=ha.lnet_dampen_s.value,
        lnet_ping_timeout_s=ha.lnet_ping_timeout_s.value,
        partner_loss_bound_s=round(partner, 2), lnet_loss_bound_s=round(lnet, 2),
    )


def build_ha(spec: ClusterSpec, hosts: tuple[Host, ...],
             targets: tuple[LustreTarget, ...]) -> tuple[HaPlan, list[SpecIssue]]:
    """The failover pairs (none with failover: none) and warnings for nodes without an LNet check."""
    by_name = {h.name: h for h in hosts}
    pairs = tuple(
        _pair(spec, h, by_name[h.failover_partner], hosts, targets)
        for h in hosts
        if h.failover_partner and h.failover_partner in by_name and h.name < h.failover_partner
    )
    issues = [
        SpecIssue(
            "lustre.lnet", [n.name for n in spec.lustre.lnet],
            f"{node.name} has no NID outside its pair to ping, so Pacemaker cannot see its LNet fail",
            "add servers, LNet routers or clients on the servers' LNet networks",
            "warning",
        )
        for p in pairs for node in p.nodes if node.lnet is None
    ]
    if spec.lustre.failover == "pairs" and "mds" not in spec.lustre.ha.tiers:
        issues.append(SpecIssue(
            "lustre.ha.tiers", list(spec.lustre.ha.tiers),
            "the MGS and the MDTs have no failover partner: losing an MDS stops the filesystem",
            "add mds to lustre.ha.tiers (with an even number of MDS nodes)", "warning",
        ))
    return HaPlan(pairs=pairs, timing=_timing(pairs)), issues


def ha_targets(ha: HaPlan) -> list[AcceptanceTarget]:
    """The failover drills: fencing really power-cycles a node, a lost partner's targets move to the survivor, and
    a node that loses its LNet hands its targets over. On a stack without pairs the checks say not applicable."""
    t = ha.timing
    partner = t.partner_loss_bound_s
    lnet = t.lnet_loss_bound_s
    return [
        AcceptanceTarget(
            check="ha.fencing", metric="fencing faults", unit="count", expected=0, warn=0, fail=0,
            why="the fence device of each pair really power-cycles its node (stonith_admin --reboot from the partner): "
            "the fence action succeeds and the node's PID 1 restarts",
            scope="aggregate", higher_is_better=False, group=GROUP,
        ),
        AcceptanceTarget(
            check="ha.partner_loss", metric="seconds to take over", unit="s", expected=partner, warn=partner,
            fail=partner,
            why=f"a server lost abruptly: Corosync token {t.token_ms} ms + consensus {t.consensus_ms} ms, fence delay "
            f"{t.fence_delay_s} s, the fence action and each start step; the survivor runs every target of the pair "
            f"within {partner:g} s and its own targets never stop",
            scope="aggregate", higher_is_better=False, group=GROUP,
        ),
        AcceptanceTarget(
            check="ha.lnet_loss", metric="seconds to move", unit="s", expected=lnet, warn=lnet, fail=lnet,
            why=f"a server's storage interface loses carrier: healthLNET's monitor ({t.lnet_monitor_s} s) and "
            f"dampening ({t.lnet_dampen_s} s) ban its targets there, which stop and start on the partner within "
            f"{lnet:g} s; with the link back nothing moves again",
            scope="aggregate", higher_is_better=False, group=GROUP,
        ),
    ]
