"""Hosts, groups, addresses, LNet NIDs and the Lustre target map."""

from __future__ import annotations

import ipaddress
from collections import Counter
from dataclasses import dataclass

from kiln import knowledge
from kiln.plan.model import Host, LnetNet, LustreTarget, Nic, Role, TargetKind
from kiln.spec.checks import rail_devices
from kiln.spec.models import ClusterSpec, NicGroup, TargetGroup


@dataclass
class _Allocator:
    """Hands out addresses of a subnet in order, skipping the network address and .1 (gateway)."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    next_offset: int = 2

    def take(self) -> str:
        addr = self.network[self.next_offset]
        self.next_offset += 1
        return str(addr)


def lnet_nets(spec: ClusterSpec) -> tuple[LnetNet, ...]:
    names = [n.name for n in spec.lustre.lnet]
    counts = _nics_per_net(spec, names)
    return tuple(
        LnetNet(name=n, lnd="o2ib" if n.startswith("o2ib") else "tcp", multi_rail=counts[n] > 1) for n in names
    )


def _nics_per_net(spec: ClusterSpec, names: list[str]) -> dict[str, int]:
    """Most storage NICs any one host puts on each LNet network (multi-rail when > 1)."""
    groups = [p.storage_nics for p in spec.compute.pools] + [spec.lustre.mds.nics, spec.lustre.oss.nics]
    out = dict.fromkeys(names, 0)
    for g in groups:
        # NIC j of a host goes on network j mod len(names) (as _nics assigns NIDs).
        for n, count in Counter(names[j % len(names)] for j in range(g.count)).items():
            out[n] = max(out[n], count)
    return out


def _interfaces(group: NicGroup, fabric: str, start: int) -> list[str]:
    if group.interfaces:
        return list(group.interfaces)
    if fabric == "infiniband":
        return [f"ib{start + i}" for i in range(group.count)]
    return [f"eth{1 + start + i}" for i in range(group.count)]


def _nics(
    spec: ClusterSpec,
    compute: NicGroup | None,
    storage: NicGroup,
    storage_alloc: _Allocator,
) -> tuple[Nic, ...]:
    kb = knowledge.load()
    fabric = spec.fabric.kind
    rdma = fabric != "tcp"
    out: list[Nic] = []
    n_compute = compute.count if compute is not None else 0
    if compute is not None:
        devs = rail_devices(compute) if rdma else [None] * compute.count
        for iface, dev in zip(_interfaces(compute, fabric, 0), devs, strict=True):
            out.append(Nic("compute", compute.nic, iface, dev, None, None, kb.nics[compute.nic].link_Gbps))
    nets = [n.name for n in spec.lustre.lnet]
    devs = rail_devices(storage, start=n_compute) if rdma else [None] * storage.count
    for j, (iface, dev) in enumerate(zip(_interfaces(storage, fabric, n_compute), devs, strict=True)):
        addr = storage_alloc.take()
        out.append(
            Nic(
                "storage",
                storage.nic,
                iface,
                dev,
                addr,
                f"{addr}@{nets[j % len(nets)]}",
                kb.nics[storage.nic].link_Gbps,
            )
        )
    return tuple(out)


def _width(n: int) -> int:
    return max(2, len(str(n)))


def build_hosts(spec: ClusterSpec) -> tuple[Host, ...]:
    """Every host of the environment, in a stable order: compute pools, MGS, MDS, OSS, object store."""
    mgmt = _Allocator(ipaddress.ip_network(spec.networks.management))
    stor = _Allocator(ipaddress.ip_network(spec.networks.storage))
    hosts: list[Host] = []
    for pool in spec.compute.pools:
        prefix = pool.hostname_prefix or pool.name
        width = max(3, len(str(pool.nodes)))
        pool_groups = ("kiln_compute", f"kiln_pool_{pool.name.replace('-', '_')}", "kiln_lustre_clients")
        for i in range(1, pool.nodes + 1):
            hosts.append(
                Host(
                    name=f"{prefix}{i:0{width}d}",
                    role="compute",
                    pool=pool.name,
                    management_address=mgmt.take(),
                    groups=pool_groups,
                    nics=_nics(spec, pool.compute_rails, pool.storage_nics, stor),
                    gpus=pool.gpu.count,
                    gpu_model=pool.gpu.model,
                    ram_GiB=pool.ram_GiB,
                    cpu_cores=pool.cpu_cores,
                )
            )
    lu = spec.lustre
    pairs = lu.failover == "pairs"
    if lu.mgs.mode == "standalone":
        hosts.append(_server("mgs01", "mgs", ("kiln_lustre_mgs", "kiln_lustre_servers"), spec, lu.mds.nics, mgmt, stor))
    for role, count, nics in (("mds", lu.mds.nodes, lu.mds.nics), ("oss", lu.oss.nodes, lu.oss.nics)):
        w = _width(count)
        for i in range(1, count + 1):
            groups: tuple[str, ...] = (f"kiln_lustre_{role}", "kiln_lustre_servers")
            if role == "mds" and i == 1 and lu.mgs.mode == "combined":
                groups = ("kiln_lustre_mgs", *groups)
            partner = None
            if pairs:
                partner = f"{role}{(i + 1 if i % 2 else i - 1):0{w}d}"
            hosts.append(_server(f"{role}{i:0{w}d}", role, groups, spec, nics, mgmt, stor, partner))  # type: ignore[arg-type]
    os_ = spec.objectstore
    if os_.backend == "seaweedfs" and os_.nics is not None:
        w = _width(os_.nodes)
        for i in range(1, os_.nodes + 1):
            hosts.append(_server(f"s3-{i:0{w}d}", "objectstore", ("kiln_objectstore",), spec, os_.nics, mgmt, stor))
    return tuple(hosts)


def _server(
    name: str,
    role: Role,
    groups: tuple[str, ...],
    spec: ClusterSpec,
    nics: NicGroup,
    mgmt: _Allocator,
    stor: _Allocator,
    partner: str | None = None,
) -> Host:
    return Host(
        name=name,
        role=role,
        pool=None,
        management_address=mgmt.take(),
        groups=groups,
        nics=_nics(spec, None, nics, stor),
        failover_partner=partner,
    )


def build_groups(hosts: tuple[Host, ...]) -> dict[str, tuple[str, ...]]:
    groups: dict[str, list[str]] = {}
    for h in hosts:
        for g in h.groups:
            groups.setdefault(g, []).append(h.name)
    return {g: tuple(v) for g, v in sorted(groups.items())}


def _target_devices(
    group: TargetGroup, kind: str, backend: str, fsname: str, index_of: list[int]
) -> list[tuple[str, tuple[str, ...]]]:
    """(device, vdevs) per target on one server. ldiskfs: a block device; zfs: pool/dataset and the
    drives its pool is built from (devices_per_target of them)."""
    out = []
    for t, idx in enumerate(index_of):
        drives = tuple(f"/dev/disk/by-id/kiln-{kind}{t}-{d}" for d in range(group.devices_per_target))
        if backend == "zfs":
            dev = group.paths[t] if group.paths else f"{fsname}-{kind}{idx}/{kind}{idx}"
            out.append((dev, drives))
        else:
            out.append((group.paths[t] if group.paths else f"/dev/disk/by-id/kiln-{kind}{t}", ()))
    return out


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
    mgs_host = next(h for h in hosts if "kiln_lustre_mgs" in h.groups)
    mgs_service = _service(by_name, mgs_host)
    # The MGT is small; on zfs stacks it is a dataset of its own pool on one mirrored drive pair.
    if lu.backend == "zfs":
        mgt_device = lu.mgs.device or f"{fs}-mgt/mgt"
        mgt_vdevs: tuple[str, ...] = ("/dev/disk/by-id/kiln-mgt0",)
    else:
        mgt_device, mgt_vdevs = lu.mgs.device or "/dev/disk/by-id/kiln-mgt0", ()
    out.append(
        LustreTarget(
            "MGS",
            "mgt",
            0,
            mgs_host.name,
            mgt_device,
            "/mnt/lustre-targets/MGS",
            mgs_service,
            mgs_host.failover_partner,
            mgt_vdevs,
        )
    )
    kinds: tuple[tuple[TargetKind, str, TargetGroup], ...] = (("mdt", "mds", lu.mds.mdts), ("ost", "oss", lu.oss.osts))
    for kind, role, group in kinds:
        servers = [h for h in hosts if h.role == role]
        for m, host in enumerate(servers):
            indexes = [m * group.per_node + t for t in range(group.per_node)]
            devices = _target_devices(group, kind, lu.backend, fs, indexes)
            for idx, (dev, vdevs) in zip(indexes, devices, strict=True):
                name = f"{fs}-{kind.upper()}{idx:04x}"
                out.append(
                    LustreTarget(
                        name,
                        kind,
                        idx,
                        host.name,
                        dev,
                        f"/mnt/lustre-targets/{name}",
                        _service(by_name, host),
                        host.failover_partner,
                        vdevs,
                    )
                )
    return tuple(out), mgs_service

