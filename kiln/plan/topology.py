"""Hosts, groups, addresses, LNet NIDs and the Lustre target map."""

from __future__ import annotations

import ipaddress
import socket
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from kiln.plan.groups import (
    COMPUTE,
    KAFKA,
    LNET_ROUTERS,
    LUSTRE_CLIENTS,
    LUSTRE_MDS,
    LUSTRE_MGS,
    LUSTRE_SERVERS,
    OBJECTSTORE,
    lustre_group,
    pool_group,
    router_group,
)
from kiln.plan.kafka import kafka_nodes
from kiln.plan.model import Host, LnetNet, LnetRoute, LustreTarget, Nic, Role, TargetKind
from kiln.spec import catalog
from kiln.spec.addressing import lnet_subnets, reserved
from kiln.spec.checks import mgt_attachment, rail_devices
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, NicGroup, TargetGroup
from kiln.spec.naming import objectstore_family, pool_family, router_family, server_family
from kiln.spec.protection import (
    default_drive_base,
    default_level,
    default_target_device,
    ext4_raid_options,
    zfs_vdevs,
)


@dataclass
class _Allocator:
    """Hands out addresses of a subnet in order, skipping the network address and .1 (gateway)."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    next_offset: int = 2
    _base: int = field(init=False, repr=False)
    _size: int = field(init=False, repr=False)
    _v4: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._base = int(self.network.network_address)
        self._size = self.network.num_addresses
        self._v4 = self.network.version == 4

    def skip(self, count: int) -> None:
        """Leave `count` addresses to hosts a family reserves (networks.reserve) but does not have yet."""
        self.next_offset += count

    def take(self) -> str:
        offset = self.next_offset
        if offset >= self._size:
            raise IndexError(f"{self.network} has no address at offset {offset}")
        self.next_offset = offset + 1
        if self._v4:  # a hundred thousand hosts: ipaddress's formatting was a third of the plan
            return socket.inet_ntoa((self._base + offset).to_bytes(4, "big"))
        return str(self.network[offset])


class _Storage:
    """Storage addresses per LNet network, each from its network's subnet (kiln.spec.addressing.lnet_subnets);
    networks that share a subnet share its allocator, so their addresses never repeat."""

    def __init__(self, spec: ClusterSpec) -> None:
        subnets = lnet_subnets(spec)
        pools = {cidr: _Allocator(ipaddress.ip_network(cidr)) for cidr in sorted(set(subnets.values()))}
        self._by_net = {net: pools[cidr] for net, cidr in subnets.items()}

    def take(self, net: str) -> str:
        return self._by_net[net].take()

    def skip(self, ports: tuple[_Port, ...], hosts: int) -> None:
        """Leave the storage addresses of `hosts` more hosts with these ports on each of their networks."""
        for p in ports:
            if p.net is not None:
                self._by_net[p.net].skip(hosts)


@dataclass(frozen=True, slots=True)
class _Pools:
    """The allocators of one plan: management, storage, and the RoCE rails' where there are any."""

    mgmt: _Allocator
    stor: _Storage
    rails: _Allocator | None

    def keep(self, spec: ClusterSpec, family: str, hosts: int, ports: tuple[_Port, ...]) -> None:
        """After a family's hosts: skip the addresses of the hosts it reserves beyond them (networks.reserve)."""
        more = reserved(spec, family, hosts) - hosts
        if more <= 0:
            return
        self.mgmt.skip(more)
        self.stor.skip(ports, more)
        if self.rails is not None:
            self.rails.skip(more * sum(1 for p in ports if p.rail))


def lnet_nets(spec: ClusterSpec) -> tuple[LnetNet, ...]:
    names = [n.name for n in spec.lustre.lnet]
    counts = _nics_per_net(spec)
    return tuple(
        LnetNet(name=n, lnd="o2ib" if n.startswith("o2ib") else "tcp", multi_rail=counts[n] > 1) for n in names
    )


def _nics_per_net(spec: ClusterSpec) -> dict[str, int]:
    """Most storage NICs any one host puts on each LNet network (multi-rail when > 1)."""
    lu = spec.lustre
    sides: list[tuple[list[str], int]] = [
        (lu.lnet_names("clients"), p.storage_nics.count + len(p.shared_storage_rails)) for p in spec.compute.pools
    ]
    sides += [(lu.lnet_names("servers"), g.count) for g in (lu.mds.nics, lu.oss.nics)]
    sides += [([rg.client_net], rg.client_nics.count) for rg in lu.routers]
    sides += [([rg.server_net], rg.server_nics.count) for rg in lu.routers]
    out = dict.fromkeys((n.name for n in lu.lnet), 0)
    for names, ports in sides:
        if not names:
            continue
        # Storage port j of a host (storage NICs, then shared rails) goes on network j mod len(names), as _nics
        # assigns NIDs.
        for n, count in Counter(names[j % len(names)] for j in range(ports)).items():
            out[n] = max(out.get(n, 0), count)
    return out


def _interfaces(group: NicGroup, fabric: str, start: int) -> list[str]:
    """The group's interface names as the spec gives them, else the kernel's traditional names, counted across the
    host's groups: ib<n> for IPoIB, eth<n> after the management eth0 (podman's names for a lab container's
    networks). Real InfiniBand and RoCE hosts name ports otherwise: naming_warnings says so."""
    if group.interfaces:
        return list(group.interfaces)
    if fabric == "infiniband":
        return [f"ib{start + i}" for i in range(group.count)]
    return [f"eth{1 + start + i}" for i in range(group.count)]


#: Fabrics whose hosts name their ports in ways the defaults do not match.
NAMED_FABRICS = ("infiniband", "roce")
_NAMES_FIX = "as the host shows them (`ibdev2netdev`, `rdma link`, `ip -br link`)"


def _nic_groups(spec: ClusterSpec) -> Iterator[tuple[str, NicGroup]]:
    lu = spec.lustre
    for i, pool in enumerate(spec.compute.pools):
        if pool.compute_rails is not None:
            yield f"compute.pools[{i}].compute_rails", pool.compute_rails
        yield f"compute.pools[{i}].storage_nics", pool.storage_nics
    yield "lustre.mds.nics", lu.mds.nics
    yield "lustre.oss.nics", lu.oss.nics
    for i, rg in enumerate(lu.routers):
        yield f"lustre.routers[{i}].client_nics", rg.client_nics
        yield f"lustre.routers[{i}].server_nics", rg.server_nics
    if spec.objectstore.nics is not None:
        yield "objectstore.nics", spec.objectstore.nics


def naming_warnings(spec: ClusterSpec) -> list[SpecIssue]:
    """Warnings for InfiniBand and RoCE ports left to the default names: EL9 and Ubuntu name ports predictably
    (ibp24s0, ens1f0np0) and RDMA devices are numbered per machine (a DGX H100's rails are mlx5_0, mlx5_3, ...,
    NVIDIA DGX H100/H200 User Guide, "Network Modules"), so ib<n>, eth<n>, mlx5_<n> and eth0 rarely match."""
    fabric = spec.fabric.kind
    if fabric not in NAMED_FABRICS:
        return []
    why = (f"left to the default names, which {fabric} hosts with predictable names (ibp24s0, ens1f0np0) and "
           "per-machine RDMA numbering (a DGX H100's rails are mlx5_0, mlx5_3, ...) do not have")
    out = [SpecIssue(f"{path}.{field}", None, why, f"list the {group.count} {field} {_NAMES_FIX}", "warning")
           for path, group in _nic_groups(spec) if group.count
           for field in ("devices", "interfaces") if getattr(group, field) is None]
    out += [SpecIssue(f"compute.pools[{i}].management_interface", None, why,
                      f"name the interface NCCL bootstraps on {_NAMES_FIX}", "warning")
            for i, pool in enumerate(spec.compute.pools) if pool.management_interface is None]
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _Port:
    """A port as every host of one layout has it, less what each host is given: a storage address and NID on LNet
    network `net`, or (`rail`) a RoCE rail address. A port given nothing is the same Nic on every host."""

    nic: Nic
    net: str | None = None
    rail: bool = False


def _ports(
    spec: ClusterSpec,
    compute: NicGroup | None,
    storage: NicGroup,
    shared: tuple[str, ...] = (),
    nets: list[str] | None = None,
    start: int | None = None,
) -> tuple[_Port, ...]:
    """A host layout's ports: compute rails (those named in `shared` also carry storage), then its storage NICs.

    Storage port j (the storage NICs, then the shared rails) gets a storage address and a NID on LNet network
    j mod len(nets) (default every network of the servers' side). A shared rail's one address serves LNet and,
    on RoCE, its RoCEv2 GID. `start` numbers the storage NICs after others the host has. Built once per layout,
    not per host: a hundred thousand hosts share a handful of layouts."""
    nic_models = catalog.nics(spec)
    fabric = spec.fabric.kind
    rdma = fabric != "tcp"
    out: list[_Port] = []
    nets = nets if nets is not None else spec.lustre.lnet_names("servers")

    def port(group: NicGroup, role: Literal["compute", "storage", "shared"], iface: str, dev: str | None) -> Nic:
        return Nic(role=role, model=group.nic, interface=iface, device=dev, address=None, nid=None,
                   link_Gbps=nic_models[group.nic].link_Gbps)

    if compute is not None:
        devs = rail_devices(compute) if rdma else [None] * compute.count
        for iface, dev in zip(_interfaces(compute, fabric, 0), devs, strict=True):
            if dev is not None and dev in shared:
                net = nets[(storage.count + shared.index(dev)) % len(nets)]
                out.append(_Port(nic=port(compute, "shared", iface, dev), net=net))
            else:  # RoCE rails carry an IPv4 address for their RoCEv2 GID; InfiniBand rails need none.
                out.append(_Port(nic=port(compute, "compute", iface, dev), rail=True))
    first = (compute.count if compute is not None else 0) if start is None else start
    devs = rail_devices(storage, start=first) if rdma else [None] * storage.count
    for j, (iface, dev) in enumerate(zip(_interfaces(storage, fabric, first), devs, strict=True)):
        out.append(_Port(nic=port(storage, "storage", iface, dev), net=nets[j % len(nets)]))
    return tuple(out)


def _nics(ports: tuple[_Port, ...], storage_alloc: _Storage, rail_alloc: _Allocator | None = None) -> tuple[Nic, ...]:
    """One host's ports, with the addresses it takes (in port order) from the storage and RoCE rail subnets."""
    out: list[Nic] = []
    for p in ports:
        n = p.nic
        if p.net is not None:
            addr = storage_alloc.take(p.net)
            out.append(Nic(role=n.role, model=n.model, interface=n.interface, device=n.device, address=addr,
                           nid=f"{addr}@{p.net}", link_Gbps=n.link_Gbps))
        elif p.rail and rail_alloc is not None:
            out.append(Nic(role=n.role, model=n.model, interface=n.interface, device=n.device,
                           address=rail_alloc.take(), nid=None, link_Gbps=n.link_Gbps))
        else:
            out.append(n)
    return tuple(out)


def build_hosts(spec: ClusterSpec) -> tuple[Host, ...]:
    """Every host of the environment, in a stable order: compute pools, MGS, MDS, OSS, LNet routers, object store.
    Addresses are handed out in that order; a family with a reserve (networks.reserve) leaves room after its hosts
    for the ones it may grow to, so its growth moves no other host's address."""
    mgmt = _Allocator(ipaddress.ip_network(spec.networks.management))
    stor = _Storage(spec)
    roce = spec.networks.roce_rails if spec.fabric.kind == "roce" else None
    rails = _Allocator(ipaddress.ip_network(roce)) if roce else None
    pools = _Pools(mgmt=mgmt, stor=stor, rails=rails)  # each family then skips what it reserves beyond its hosts
    hosts: list[Host] = []
    lu = spec.lustre
    for p, pool in enumerate(spec.compute.pools):
        names = pool_family(p, pool)
        pool_groups = (COMPUTE, pool_group(pool.name), LUSTRE_CLIENTS)
        ports = _ports(spec=spec, compute=pool.compute_rails, storage=pool.storage_nics,
                       shared=tuple(pool.shared_storage_rails), nets=lu.lnet_names("clients"))
        for i in range(1, pool.nodes + 1):
            hosts.append(
                Host(
                    name=names.name(i),
                    role="compute",
                    pool=pool.name,
                    management_address=mgmt.take(),
                    groups=pool_groups,
                    nics=_nics(ports, stor, rails),
                    gpus=pool.gpus_per_node,
                    gpu_model=pool.gpu.model if pool.gpu is not None else None,
                    ram_GiB=pool.ram_GiB,
                    cpu_cores=pool.cpu_cores,
                )
            )
        pools.keep(spec, pool.name, pool.nodes, ports)
    pairs = lu.failover == "pairs"
    if lu.mgs.mode == "standalone":
        mgs, ports = server_family("mgs", 1).name(1), _ports(spec, None, lu.mds.nics)
        hosts.append(_server(name=mgs, role="mgs", groups=(LUSTRE_MGS, LUSTRE_SERVERS), ports=ports, mgmt=mgmt,
                             stor=stor))
        pools.keep(spec, "mgs", 1, ports)
    colocated = lu.mds.colocated_with_oss
    tiers = (("mds", lu.mds.nodes, lu.mds.nics), ("oss", lu.oss.nodes, lu.oss.nics))
    for role, count, nics in tiers[1:] if colocated else tiers:
        names = server_family(role, count)
        ports = _ports(spec, None, nics)
        for i in range(1, count + 1):
            groups: tuple[str, ...] = (lustre_group(role), LUSTRE_SERVERS)
            if colocated and i <= lu.mds.nodes:
                # MDS and OSS share hosts (lustre.mds.colocated_with_oss): the first mds.nodes OSS run the MDTs too.
                groups = (LUSTRE_MDS, *groups)
            if (role == "mds" or colocated) and i == 1 and lu.mgs.mode == "combined":
                groups = (LUSTRE_MGS, *groups)
            partner = None
            if pairs and role in lu.ha.tiers:
                partner = names.name(i + 1 if i % 2 else i - 1)
            hosts.append(_server(name=names.name(i), role=role,  # type: ignore[arg-type]
                                 groups=groups, ports=ports, mgmt=mgmt, stor=stor, partner=partner))
        pools.keep(spec, role, count, ports)
    for r, rg in enumerate(lu.routers):
        names = router_family(r, rg)
        groups = (LNET_ROUTERS, router_group(rg.name))
        ports = (_ports(spec, None, rg.client_nics, nets=[rg.client_net])
                 + _ports(spec, None, rg.server_nics, nets=[rg.server_net], start=rg.client_nics.count))
        for i in range(1, rg.count + 1):
            hosts.append(
                Host(
                    name=names.name(i),
                    role="router",
                    pool=None,
                    management_address=mgmt.take(),
                    groups=groups,
                    nics=_nics(ports, stor),
                )
            )
        pools.keep(spec, rg.name, rg.count, ports)
    os_ = spec.objectstore
    if os_.backend == "seaweedfs" and os_.nics is not None:
        ports = _ports(spec, None, os_.nics)
        for name in objectstore_family(os_.nodes).names():
            hosts.append(_server(name=name, role="objectstore", groups=(OBJECTSTORE,), ports=ports,
                                 mgmt=mgmt, stor=stor))
        pools.keep(spec, "objectstore", os_.nodes, ports)
    # Bare-metal KRaft nodes last: on the management network only (a node's token stream is tens of KB/s, docs/kafka.md)
    for node in kafka_nodes(spec):
        hosts.append(Host(name=node.host, role="kafka", pool=None, management_address=mgmt.take(), groups=(KAFKA,),
                          nics=()))
    return tuple(hosts)


def _server(
    name: str,
    role: Role,
    groups: tuple[str, ...],
    ports: tuple[_Port, ...],
    mgmt: _Allocator,
    stor: _Storage,
    partner: str | None = None,
) -> Host:
    return Host(
        name=name,
        role=role,
        pool=None,
        management_address=mgmt.take(),
        groups=groups,
        nics=_nics(ports, stor),
        failover_partner=partner,
    )


def build_groups(hosts: tuple[Host, ...]) -> dict[str, tuple[str, ...]]:
    groups: dict[str, list[str]] = {}
    for h in hosts:
        for g in h.groups:
            groups.setdefault(g, []).append(h.name)
    return {g: tuple(v) for g, v in sorted(groups.items())}


def _target_storage(
    group: TargetGroup, kind: str, backend: str, fsname: str, idx: int
) -> tuple[str, tuple[str, ...], str, tuple[str, ...], tuple[str, ...], int]:
    """(device, vdevs, protection, drives, mkfs options, md chunk) of the target with global index `idx`.

    Names come from the target's index in the filesystem, never from its slot on a server, so the two
    servers of a failover pair address the same shared LUN by the same name and no two targets share one.
    ldiskfs: one device, or an md array /dev/md/<fsname>-<kind><idx:04x> of drives; zfs: pool/dataset
    <fsname>-<kind><idx:04x>/<kind><idx:04x> built from the drives at the group's protection level. The index is
    written in hexadecimal, as Lustre writes it in the target's name (<fsname>-OST<idx:04x>), so OST000a is on
    /dev/md/<fsname>-ost000a."""
    level = group.protection or default_level(backend, kind, group.devices_per_target) or "none"
    n = group.devices_per_target
    base = default_drive_base(kind, idx)
    drives = (base,) if n == 1 and backend == "ldiskfs" else tuple(f"{base}-{d}" for d in range(n))
    given = group.paths[idx] if group.paths else None
    device = given or default_target_device(backend, fsname, kind, idx)
    if backend == "zfs":
        return device, zfs_vdevs(level, drives), level, drives, (), 0
    if level in ("none", "external"):
        return given or drives[0], (), level, (given or drives[0],), (), 0
    options = ext4_raid_options(level, n, group.chunk_KiB)
    chunk = group.chunk_KiB if options else 0  # raid1 has no chunk
    return device, (), level, drives, options, chunk


def _service(by_name: dict[str, Host], host: Host) -> tuple[tuple[str, ...], ...]:
    own = (host.nids,)
    if host.failover_partner and host.failover_partner in by_name:
        return (*own, by_name[host.failover_partner].nids)
    return own


def build_target_map(
    spec: ClusterSpec, hosts: tuple[Host, ...]
) -> tuple[tuple[LustreTarget, ...], tuple[tuple[str, ...], ...]]:
    """MGT/MDT/OST index → host, device, mount point and service NIDs; and the MGS NIDs."""
    lu = spec.lustre
    fs = lu.fsname
    by_name = {h.name: h for h in hosts}
    out: list[LustreTarget] = []
    mgs_host = next(h for h in hosts if LUSTRE_MGS in h.groups)
    mgs_service = _service(by_name, mgs_host)
    # The MGT is small: a mirrored pair of drives (zfs mirror vdev, or md raid1 on ldiskfs) unless the
    # spec names an existing device (an array LUN or zpool/dataset).
    mgt_drives: tuple[str, ...] = ("/dev/disk/by-id/kiln-mgt-0", "/dev/disk/by-id/kiln-mgt-1")
    mgt_level = lu.mgs.protection or ("mirror" if lu.backend == "zfs" else "raid1")
    mgt_vdevs: tuple[str, ...] = ()
    if lu.mgs.device is not None:
        mgt_device, mgt_drives, mgt_level = lu.mgs.device, (lu.mgs.device,), lu.mgs.protection or "external"
    elif lu.mgs.protection == "none":
        mgt_drives = mgt_drives[:1]
        mgt_device = f"{fs}-mgt/mgt" if lu.backend == "zfs" else mgt_drives[0]
        mgt_vdevs = mgt_drives if lu.backend == "zfs" else ()
    elif lu.backend == "zfs":
        mgt_device, mgt_vdevs = f"{fs}-mgt/mgt", zfs_vdevs(mgt_level, mgt_drives)
    else:
        mgt_device = f"/dev/md/{fs}-mgt"
    out.append(
        LustreTarget(
            name="MGS",
            kind="mgt",
            index=0,
            host=mgs_host.name,
            device=mgt_device,
            mount_point="/mnt/lustre-targets/MGS",
            servicenodes=mgs_service,
            failover_host=mgs_host.failover_partner,
            vdevs=mgt_vdevs,
            protection=mgt_level,
            drives=mgt_drives,
            mkfs_options=(),
            raid_chunk_KiB=0,
            ashift=lu.mds.mdts.ashift if lu.backend == "zfs" else 0,
            attachment=mgt_attachment(spec),
        )
    )
    kinds: tuple[tuple[TargetKind, str, TargetGroup], ...] = (("mdt", "mds", lu.mds.mdts), ("ost", "oss", lu.oss.osts))
    for kind, role, group in kinds:
        # By group, not role: with lustre.mds.colocated_with_oss an OSS host is an MDS too.
        servers = [h for h in hosts if lustre_group(role) in h.groups]
        for m, host in enumerate(servers):
            indexes = [m * group.per_node + t for t in range(group.per_node)]
            for idx in indexes:
                dev, vdevs, level, drives, options, chunk = _target_storage(group, kind, lu.backend, fs, idx)
                name = f"{fs}-{kind.upper()}{idx:04x}"
                out.append(
                    LustreTarget(
                        name=name,
                        kind=kind,
                        index=idx,
                        host=host.name,
                        device=dev,
                        mount_point=f"/mnt/lustre-targets/{name}",
                        servicenodes=_service(by_name, host),
                        failover_host=host.failover_partner,
                        vdevs=vdevs,
                        protection=level,
                        drives=drives,
                        mkfs_options=options,
                        raid_chunk_KiB=chunk,
                        ashift=group.ashift if lu.backend == "zfs" else 0,
                        attachment=group.attachment,
                    )
                )
    return tuple(out), mgs_service


def build_routes(spec: ClusterSpec, hosts: tuple[Host, ...]) -> tuple[LnetRoute, ...]:
    """Every route a client or server may need: for each router NID on a network of one side, a route from
    that network to the router's network on the other side (`lnetctl route add --net <net> --gateway <nid>`).
    A host takes the routes whose gateway it reaches and whose network it is not on (Plan.routes_for)."""
    out: list[LnetRoute] = []
    client_nets = spec.lustre.lnet_names("clients")
    for h in hosts:
        if h.role != "router":
            continue
        nets = {nid.split("@", 1)[1] for nid in h.nids}
        for nid in h.nids:
            via = nid.split("@", 1)[1]
            side: Literal["clients", "servers"] = "clients" if via in client_nets else "servers"
            for remote in sorted(nets - {via}):
                out.append(LnetRoute(side=side, net=remote, via=via, gateway=nid, router=h.name))
    return tuple(out)
