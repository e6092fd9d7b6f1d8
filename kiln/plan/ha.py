"""Failover pairs under Pacemaker: each pair's nodes, Corosync links, targets (with their md arrays or pools), the
LNet health check of each node, fencing delays, and the takeover bounds the ha.* acceptance checks judge against.

The healthLNET rule follows lustre-release lustre/conf/resource/healthLNET: ping_update() reads
/sys/class/net/<device>/carrier and scores 0 without carrier, else the number of host_list NIDs that answer
`lctl ping` (lctl_check()). So each node pings NIDs outside its own pair (the partner's loss must never lower the
survivor's score), one agent instance runs per storage interface (the agent reads one device), and a target is
banned from a node only where every one of its interfaces scores below the threshold.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, islice

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


def _nets(h: Host) -> frozenset[str]:
    return frozenset(nid.split("@", 1)[1] for nid in h.nids)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Reach:
    """The hosts with a NID on a set of LNet networks, in plan order, and each one's first NID there: the servers
    (with their positions among all servers), the LNet routers and the clients."""

    nets: frozenset[str]
    nid: dict[str, str]
    servers: tuple[str, ...]
    index: dict[str, int]
    order: tuple[int, ...]
    routers: tuple[str, ...]
    clients: tuple[Host, ...]

    def client_nids(self, pair: set[str]) -> Iterator[str]:
        """The clients' NIDs there, in plan order, found only as far as they are asked for: the servers and routers
        usually fill a ping list, and a large plan has a hundred thousand clients."""
        return (n for h in self.clients if h.name not in pair and (n := _nid_on(h, self.nets)))


def _nid_on(h: Host, nets: frozenset[str]) -> str | None:
    """The host's first NID on one of `nets`."""
    return next((n for n in h.nids if n.split("@", 1)[1] in nets), None)


def _reach(hosts: tuple[Host, ...], nets: frozenset[str]) -> _Reach:
    nid = {h.name: n for h in hosts if COMPUTE not in h.groups and (n := _nid_on(h, nets))}
    servers = [(i, h.name) for i, h in enumerate(h for h in hosts if LUSTRE_SERVERS in h.groups) if h.name in nid]
    return _Reach(nets=nets, nid=nid, servers=tuple(n for _, n in servers),
                  index={n: j for j, (_, n) in enumerate(servers)}, order=tuple(i for i, _ in servers),
                  routers=tuple(h.name for h in hosts if LNET_ROUTERS in h.groups and h.name in nid),
                  clients=tuple(h for h in hosts if COMPUTE in h.groups))


def _ping_candidates(position: int, pair: set[str], reach: _Reach, shift: int, wanted: int) -> list[str]:
    """The first `wanted` of one NID per host outside the pair that shares an LNet network with the node at
    `position` among the servers: other servers (from the one after the node, moved on by `shift` so the two nodes
    of a pair ping different servers), then LNet routers, then clients. The ring of servers is never built: the
    pair's members are skipped by index, so each node costs `wanted` steps however many servers there are."""
    skip = sorted(reach.index[n] for n in pair if n in reach.index)
    size = len(reach.servers) - len(skip)
    after = bisect_right(reach.order, position)
    first = after - sum(1 for j in skip if j < after) + (shift % size if size else 0)

    def server(e: int) -> str:
        for j in skip:
            if j <= e:
                e += 1
        return reach.servers[e]

    ring = (reach.nid[server((first + m) % size)] for m in range(size))
    routers = (reach.nid[h] for h in reach.routers if h not in pair)
    return list(islice(chain(ring, routers, reach.client_nids(pair)), wanted))


class _Peers:
    """The servers' positions in plan order and, built once per set of LNet networks, the hosts reachable there."""

    def __init__(self, hosts: tuple[Host, ...]) -> None:
        self.hosts = hosts
        self.position = {h.name: i for i, h in enumerate(h for h in hosts if LUSTRE_SERVERS in h.groups)}
        self.by_nets: dict[frozenset[str], _Reach] = {}

    def reach(self, node: Host) -> _Reach:
        nets = _nets(node)
        if nets not in self.by_nets:
            self.by_nets[nets] = _reach(self.hosts, nets)
        return self.by_nets[nets]


def _lnet_check(node: Host, pair: set[str], peers: _Peers, index: int) -> HaLnetCheck | None:
    wanted = knowledge.load().tuning.ha.lnet_ping_hosts.value
    nids = tuple(_ping_candidates(peers.position[node.name], pair, peers.reach(node), index * wanted, wanted))
    devices = tuple(n.interface for n in node.nics if n.carries_storage and n.nid)
    if not nids or not devices:
        return None
    return HaLnetCheck(devices=devices, host_list=nids, threshold=len(nids) // 2 + 1)


def _links(h: Host) -> tuple[str, ...]:
    """Corosync knet links: the management address, then the first storage address (a second, independent path)."""
    storage = next((n.address for n in h.nics if n.carries_storage and n.address), None)
    return (h.management_address, storage) if storage and storage != h.management_address else (h.management_address,)


def _pair(spec: ClusterSpec, a: Host, b: Host, peers: _Peers, targets: dict[str, list[LustreTarget]]) -> HaPair:
    names = {a.name, b.name}
    delay = knowledge.load().tuning.ha.fence_delay_s.value
    nodes = tuple(
        # The fence device that targets the first node waits pcmk_delay_base: in a split the first node fences first.
        HaNode(name=h.name, links=_links(h), lnet=_lnet_check(h, names, peers, i), fence_delay_s=delay if i == 0 else 0)
        for i, h in enumerate((a, b))
    )
    mine = sorted(targets.get(a.name, []) + targets.get(b.name, []), key=lambda t: (TIER[t.kind], t.index))
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
    peers = _Peers(hosts)
    by_host: dict[str, list[LustreTarget]] = {}
    for t in targets:
        by_host.setdefault(t.host, []).append(t)
    pairs = tuple(
        _pair(spec, h, by_name[h.failover_partner], peers, by_host)
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
