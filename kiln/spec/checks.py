"""Cross-field rules of a spec. Each problem names the path, the value and the fix."""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterator

from kiln import knowledge
from kiln.knowledge import NicModel
from kiln.spec import catalog
from kiln.spec.addressing import (
    IPNetwork,
    address_families,
    lnet_subnets,
    ports_per_net,
    reserved,
    storage_slices,
)
from kiln.spec.checks_dataflow import check_dataflow
from kiln.spec.errors import SpecIssue, suggest
from kiln.spec.models import ClusterSpec, ComputePool, Device, NicGroup
from kiln.spec.naming import host_families, kafka_families, pool_prefix
from kiln.spec.protection import default_drive_base, default_level, default_target_device, level_problem
from kiln.spec.types import dns_name

FABRIC_NIC_SUPPORT = {"infiniband": "infiniband", "roce": "roce"}


def check(spec: ClusterSpec) -> list[SpecIssue]:
    """Every cross-field problem in the spec (empty list: consistent)."""
    return [
        *(_catalog(spec)),
        *(_rdma_stack(spec)),
        *(_gpu_kernel_modules(spec)),
        *(_compute(spec)),
        *(_lustre(spec)),
        *(_routers(spec)),
        *(_server(spec)),
        *(_objectstore(spec)),
        *(_workload(spec)),
        *(_networks(spec)),
        *(_host_names(spec)),
        *(_duplicates(spec)),
        *(check_dataflow(spec)),
    ]


def rail_devices(group: NicGroup, start: int = 0) -> list[str]:
    """RDMA device names of a NIC group (explicit, or mlx5_<n> from `start`)."""
    return list(group.devices) if group.devices else [f"mlx5_{start + i}" for i in range(group.count)]


def _nic(path: str, group: NicGroup, fabric: str, models: dict[str, NicModel]) -> Iterator[SpecIssue]:
    if group.nic not in models:
        yield SpecIssue(
            f"{path}.nic", group.nic, "unknown NIC model (not in the catalog nor in hardware.nics)",
            suggest(group.nic, models),
        )
        return
    model = models[group.nic]
    needed = FABRIC_NIC_SUPPORT.get(fabric)
    if needed and needed not in model.fabrics:
        yield SpecIssue(
            f"{path}.nic",
            group.nic,
            f"this NIC does not support the {fabric} fabric",
            f"pick a NIC that supports {fabric} or change fabric.kind",
        )
    for field in ("devices", "interfaces"):
        names = getattr(group, field)
        if names is not None:
            # Interfaces also name Kubernetes objects (kiln-storage-<interface>), so compare those forms too.
            what = "device" if field == "devices" else "interface (or Kubernetes name kiln-storage-<interface>)"
            forms = list(names) if field == "devices" else [dns_name(n) for n in names]
            yield from _first_seen(f"{path}.{field}[{{i}}]", forms, what)
        if names is not None and len(names) != group.count:
            yield SpecIssue(
                f"{path}.{field}",
                names,
                f"{len(names)} names for {group.count} NICs",
                f"list exactly {group.count} names, or drop `{field}` to use the defaults",
            )


def _device(path: str, device: Device) -> Iterator[SpecIssue]:
    kb = knowledge.load()
    if device.catalog is not None:
        if device.catalog not in kb.nvme:
            yield SpecIssue(f"{path}.catalog", device.catalog, "unknown device model", suggest(device.catalog, kb.nvme))
        return
    absent = [f for f in ("read_GBps", "write_GBps", "capacity_TB") if getattr(device, f) is None]
    if absent:
        yield SpecIssue(
            path,
            device.model_dump(exclude_none=True),
            "a device needs a catalog name or all of its figures",
            f"set `catalog:` or add {', '.join(absent)}",
        )


def _inline(spec: ClusterSpec) -> Iterator[SpecIssue]:
    kb = knowledge.load()
    for kind, mine, theirs in (("nics", spec.hardware.nics, kb.nics), ("gpus", spec.hardware.gpus, kb.gpus)):
        for name in mine:
            if name in theirs:
                yield SpecIssue(
                    f"hardware.{kind}.{name}", name, "shadows a catalog entry of the same name",
                    f"use the catalog's {name} (drop this entry), or give yours another name",
                )


def _catalog(spec: ClusterSpec) -> Iterator[SpecIssue]:
    kb = knowledge.load()
    fabric = spec.fabric.kind
    nic_models, gpu_models = catalog.nics(spec), catalog.gpus(spec)
    yield from _inline(spec)
    for i, pool in enumerate(spec.compute.pools):
        p = f"compute.pools[{i}]"
        if pool.gpu is not None and pool.gpu.model not in gpu_models:
            yield SpecIssue(
                f"{p}.gpu.model", pool.gpu.model, "unknown GPU model (not in the catalog nor in hardware.gpus)",
                suggest(pool.gpu.model, gpu_models),
            )
        if pool.compute_rails is not None:
            yield from _nic(f"{p}.compute_rails", pool.compute_rails, fabric, nic_models)
        yield from _nic(f"{p}.storage_nics", pool.storage_nics, fabric, nic_models)
        if pool.local_nvme is not None and pool.local_nvme.device not in kb.nvme:
            yield SpecIssue(
                f"{p}.local_nvme.device",
                pool.local_nvme.device,
                "unknown NVMe model",
                suggest(pool.local_nvme.device, kb.nvme),
            )
    yield from _nic("lustre.mds.nics", spec.lustre.mds.nics, fabric, nic_models)
    yield from _nic("lustre.oss.nics", spec.lustre.oss.nics, fabric, nic_models)
    for i, rg in enumerate(spec.lustre.routers):
        yield from _nic(f"lustre.routers[{i}].client_nics", rg.client_nics, fabric, nic_models)
        yield from _nic(f"lustre.routers[{i}].server_nics", rg.server_nics, fabric, nic_models)
    yield from _device("lustre.mds.mdts.device", spec.lustre.mds.mdts.device)
    yield from _device("lustre.oss.osts.device", spec.lustre.oss.osts.device)
    os_ = spec.objectstore
    if os_.nics is not None:
        yield from _nic("objectstore.nics", os_.nics, fabric, nic_models)
    if os_.disks is not None and os_.disks.device not in kb.nvme:
        yield SpecIssue(
            "objectstore.disks.device", os_.disks.device, "unknown NVMe model", suggest(os_.disks.device, kb.nvme)
        )


def _rdma_stack(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """DOCA-OFED only where there is RDMA to drive."""
    if spec.fabric.kind == "tcp" and spec.fabric.rdma_stack == "doca":
        yield SpecIssue(
            "fabric.rdma_stack", "doca", "DOCA-OFED drives RDMA NICs and a tcp fabric uses none",
            "leave fabric.rdma_stack at inbox (or set fabric.kind: infiniband or roce)",
        )


#: The first driver branch with open kernel modules: R515, May 2022 (NVIDIA Technical Blog, "NVIDIA Transitions
#: Fully Towards Open-Source GPU Kernel Modules", 2024-07-17).
FIRST_OPEN_BRANCH = 515


def _gpu_kernel_modules(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """Open modules need a branch that has them; a GPU that runs only the open modules refuses the proprietary."""
    v = spec.versions
    if v.gpu_kernel_modules == "open" and v.gpu_driver < FIRST_OPEN_BRANCH:
        yield SpecIssue("versions.gpu_kernel_modules", "open",
                        f"driver branch {v.gpu_driver} has no open kernel modules (the first is {FIRST_OPEN_BRANCH})",
                        f"pin versions.gpu_driver {FIRST_OPEN_BRANCH} or newer, or set gpu_kernel_modules: "
                        "proprietary")
    if v.gpu_kernel_modules != "proprietary":
        return
    gpus = catalog.gpus(spec)
    for i, pool in enumerate(spec.compute.pools):
        model = pool.gpu.model if pool.gpu is not None else None
        if model in gpus and gpus[model].open_modules_only:
            yield SpecIssue("versions.gpu_kernel_modules", "proprietary",
                            f"compute.pools[{i}] runs {model}, which runs only the open kernel modules "
                            f"(kiln/knowledge/hardware.yaml)", "set versions.gpu_kernel_modules: open")


def _compute(spec: ClusterSpec) -> Iterator[SpecIssue]:
    seen: dict[str, int] = {}
    for i, pool in enumerate(spec.compute.pools):
        p = f"compute.pools[{i}]"
        prefix = pool_prefix(pool)
        if prefix in seen:
            yield SpecIssue(
                f"{p}.hostname_prefix",
                prefix,
                f"same host name prefix as compute.pools[{seen[prefix]}]",
                "give each pool its own hostname_prefix",
            )
        seen.setdefault(prefix, i)
        if pool.compute_rails is not None and pool.compute_rails.count == 0 and spec.fabric.kind != "tcp":
            yield SpecIssue(f"{p}.compute_rails.count", 0, "an RDMA fabric needs compute rails", "set count ≥ 1")
        if pool.storage_nics.count == 0 and not pool.shared_storage_rails:
            yield SpecIssue(
                f"{p}.storage_nics.count", 0, "clients need a storage NIC for Lustre",
                "set count ≥ 1, or name the rail ports that carry storage in shared_storage_rails",
            )
        rails = rail_devices(pool.compute_rails) if pool.compute_rails is not None else []
        yield from _shared_rails(p, pool, rails, spec.fabric.kind)
        if pool.nccl_hcas is not None:
            for j, hca in enumerate(pool.nccl_hcas):
                if hca not in rails:
                    yield SpecIssue(
                        f"{p}.nccl_hcas[{j}]",
                        hca,
                        "not a compute-rail device of this node",
                        f"use devices of compute_rails ({', '.join(rails) or 'none'}) or drop nccl_hcas",
                    )
        if pool.compute_rails is not None:
            yield from _one_role(p, pool.compute_rails, pool.storage_nics)


def _one_role(p: str, rails: NicGroup, storage: NicGroup) -> Iterator[SpecIssue]:
    """A port is a compute rail or a storage NIC, never both under one name (shared_storage_rails says when a rail
    also carries storage): the RDMA device and the interface name alike."""
    for field in ("devices", "interfaces"):
        both = set(getattr(rails, field) or ()) & set(getattr(storage, field) or ())
        if both:
            yield SpecIssue(
                f"{p}.storage_nics.{field}",
                sorted(both),
                f"the same {field[:-1]} is listed as compute rail and storage NIC",
                "give each NIC one role (name the storage ports as the host shows them; a rail that also carries "
                "storage goes in shared_storage_rails)",
            )


def _shared_rails(p: str, pool: ComputePool, rails: list[str], fabric: str) -> Iterator[SpecIssue]:
    """A port shared by rails and storage must be a rail of this host, on an RDMA fabric, and one NCCL uses."""
    shared = pool.shared_storage_rails
    if not shared:
        return
    if fabric == "tcp":
        yield SpecIssue(
            f"{p}.shared_storage_rails", list(shared), "a shared port runs LNet o2ib on the rail's HCA: RDMA only",
            "drop shared_storage_rails and give storage_nics (fabric.kind tcp), or use an RDMA fabric",
        )
        return
    yield from _first_seen(f"{p}.shared_storage_rails[{{i}}]", list(shared), "shared rail device")
    for j, dev in enumerate(shared):
        if dev not in rails:
            yield SpecIssue(
                f"{p}.shared_storage_rails[{j}]", dev, "not a compute-rail device of this host",
                f"name a device of compute_rails ({', '.join(rails) or 'none'}), or list the port under storage_nics",
            )
        elif pool.nccl_hcas is not None and dev not in pool.nccl_hcas:
            yield SpecIssue(
                f"{p}.nccl_hcas", list(pool.nccl_hcas), f"leaves out {dev}, a rail port shared with storage",
                f"add {dev} to nccl_hcas (NCCL and LNet use the same port), or drop it from shared_storage_rails",
            )
    if pool.storage_nics.devices:
        both = sorted(set(shared) & set(pool.storage_nics.devices))
        if both:
            yield SpecIssue(
                f"{p}.storage_nics.devices", both, "a shared rail port is also listed as a storage NIC",
                "list it once: in shared_storage_rails (one port for both) or in storage_nics (its own port)",
            )


def _colocated(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """MDS on OSS hosts: the MDTs need that many OSS hosts, and the hosts have one set of NICs."""
    lu = spec.lustre
    if not lu.mds.colocated_with_oss:
        return
    if lu.mds.nodes > lu.oss.nodes:
        yield SpecIssue(
            "lustre.mds.nodes", lu.mds.nodes,
            f"colocated_with_oss puts the MDTs on the first mds.nodes OSS hosts, but there are {lu.oss.nodes}",
            f"set lustre.mds.nodes ≤ {lu.oss.nodes} (raise mdts.per_node for more MDTs), or colocated_with_oss: false",
        )
    if lu.mds.nics != lu.oss.nics:
        yield SpecIssue(
            "lustre.mds.nics", lu.mds.nics.model_dump(exclude_none=True),
            "MDS and OSS share hosts, so they share NICs, but lustre.mds.nics differs from lustre.oss.nics",
            "copy lustre.oss.nics into lustre.mds.nics",
        )
    # Failover: OSS 2k-1 and 2k pair up and _failover_pairs asks for an even MDS count, so the MDS hosts are whole
    # pairs and every MDT's partner is an MDS host too.


def _lustre(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """Lustre: failover pairs, servers and their targets, HA, LNet networks, OST pools and directories."""
    yield from _failover_pairs(spec)
    yield from _shared_storage(spec)
    yield from _uplink(spec)
    yield from _colocated(spec)
    yield from _server_parts(spec)
    yield from _targets(spec)
    yield from _ha(spec)
    yield from _lnet(spec)
    yield from _ost_pools(spec)
    yield from _directories(spec)


def _failover_pairs(spec: ClusterSpec) -> Iterator[SpecIssue]:
    lu = spec.lustre
    if lu.failover != "pairs":
        return
    if "oss" in lu.ha.tiers and lu.oss.nodes % 2:
        yield SpecIssue(
            "lustre.oss.nodes",
            lu.oss.nodes,
            "failover pairs need an even number of OSS nodes",
            f"set lustre.oss.nodes to {lu.oss.nodes + 1} (or {lu.oss.nodes - 1}), leave oss out of lustre.ha.tiers, "
            "or lustre.failover: none",
        )
    if "mds" in lu.ha.tiers and lu.mds.nodes % 2:
        yield SpecIssue(
            "lustre.mds.nodes",
            lu.mds.nodes,
            "failover pairs need an even number of MDS nodes",
            f"set lustre.mds.nodes to {lu.mds.nodes + 1}, leave mds out of lustre.ha.tiers (MGS and MDTs without "
            "failover), or lustre.failover: none",
        )


def mgt_attachment(spec: ClusterSpec) -> str:
    """How the MGT's drives reach its server: lustre.mgs.attachment, by default the MDTs'."""
    return spec.lustre.mgs.attachment or spec.lustre.mds.mdts.attachment


def _shared_storage(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """Failover pairs need drives both servers of a pair reach: a target on drives inside one server cannot move.
    Only the tiers that pair up (lustre.ha.tiers) are asked: an MDS left out of the pairs keeps internal drives."""
    lu = spec.lustre
    if lu.failover != "pairs":
        return
    kinds: list[tuple[str, str, str]] = []
    if "oss" in lu.ha.tiers:
        kinds.append(("lustre.oss.osts.attachment", lu.oss.osts.attachment, "OSTs'"))
    if "mds" in lu.ha.tiers:
        kinds.append(("lustre.mds.mdts.attachment", lu.mds.mdts.attachment, "MDTs'"))
        if lu.mgs.mode == "combined":  # a standalone MGS has no partner
            kinds.append(("lustre.mgs.attachment", mgt_attachment(spec), "MGT's"))
    for path, attachment, whose in kinds:
        if attachment == "internal":
            yield SpecIssue(
                path, attachment,
                f"failover pairs need the {whose} drives reachable from both servers of a pair; drives inside one "
                "server cannot fail over, so the partner could never mount them",
                "describe shared storage (shared-enclosure: dual-ported drives cabled to both servers; san; "
                "nvmeof), or set lustre.failover: none",
            )


def _uplink(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """An uplink describes shared OST drives, with the figures of its kind."""
    oss = spec.lustre.oss
    up = oss.uplink
    if up is None:
        return
    kind = oss.osts.attachment
    given = up.model_dump(exclude_none=True, exclude={"source"})
    if kind == "internal":
        yield SpecIssue("lustre.oss.uplink", given, "internal OST drives have no enclosure uplink",
                        "drop lustre.oss.uplink (lustre.oss.server.pcie_lanes describes a server's own drive lanes), "
                        "or set lustre.oss.osts.attachment to the shared kind")
    elif kind == "shared-enclosure" and (up.pcie_lanes is None or up.links is not None):
        yield SpecIssue("lustre.oss.uplink", given, "a shared enclosure is reached over PCIe lanes",
                        "give pcie_lanes (and pcie_gen where it differs from the NICs'), not links")
    elif kind in ("san", "nvmeof") and (up.links is None or up.link_Gbps is None or up.pcie_lanes is not None):
        yield SpecIssue("lustre.oss.uplink", given, f"{kind} storage is reached over links",
                        "give links and link_Gbps, not pcie_lanes")


def _server_parts(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """Lustre servers have storage NICs; zfs targets have vdevs."""
    lu = spec.lustre
    for role in ("mds", "oss"):
        count = getattr(lu, role).nics.count
        if count < 1:
            yield SpecIssue(
                f"lustre.{role}.nics.count", count, "Lustre servers need a storage NIC for LNet", "set count ≥ 1"
            )
    if lu.backend == "zfs" and lu.oss.osts.devices_per_target < 1:
        yield SpecIssue(
            "lustre.oss.osts.devices_per_target", lu.oss.osts.devices_per_target, "zfs needs vdevs", "set ≥ 1"
        )
    for key, group in (("mds.nics", lu.mds.nics), ("oss.nics", lu.oss.nics)):
        if group.count < 1:
            yield SpecIssue(f"lustre.{key}.count", group.count, "a Lustre server needs a storage NIC", "set count ≥ 1")


def _lnet(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """LNet networks match the fabric and are listed once."""
    lu = spec.lustre
    kinds = {n.name.rstrip("0123456789") for n in lu.lnet}
    if spec.fabric.kind == "tcp" and "o2ib" in kinds:
        yield SpecIssue(
            "lustre.lnet", [n.name for n in lu.lnet], "o2ib needs an RDMA fabric", "use tcp0 on a tcp fabric"
        )
    if spec.fabric.kind != "tcp" and kinds == {"tcp"}:
        yield SpecIssue(
            "lustre.lnet",
            [n.name for n in lu.lnet],
            "an RDMA fabric with only TCP LNet wastes RDMA",
            "use o2ib0 (or set fabric.kind: tcp)",
        )
    names = [n.name for n in lu.lnet]
    if len(set(names)) != len(names):
        yield SpecIssue("lustre.lnet", names, "duplicate LNet network", "list each network once")


def _ost_pools(spec: ClusterSpec) -> Iterator[SpecIssue]:
    lu = spec.lustre
    total_osts = lu.oss.nodes * lu.oss.osts.per_node
    for i, pool in enumerate(lu.pools):
        for j, idx in enumerate(pool.osts):
            if idx >= total_osts:
                yield SpecIssue(
                    f"lustre.pools[{i}].osts[{j}]",
                    idx,
                    f"no such OST (the spec has {total_osts}: 0..{total_osts - 1})",
                    f"use OST indexes below {total_osts}",
                )


def _directories(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """Each directory once, in an OST pool that exists, striped over no more OSTs than it can use."""
    lu = spec.lustre
    total_osts = lu.oss.nodes * lu.oss.osts.per_node
    pools = {p.name: p for p in lu.pools}
    seen: set[str] = set()
    for i, d in enumerate(lu.directories):
        p = f"lustre.directories[{i}]"
        if d.path in seen:
            yield SpecIssue(f"{p}.path", d.path, "directory listed twice", "list each directory once")
        seen.add(d.path)
        width = len(pools[d.pool].osts) if d.pool in pools else total_osts
        if d.pool is not None and d.pool not in pools:
            yield SpecIssue(
                f"{p}.pool",
                d.pool,
                "no such OST pool",
                suggest(d.pool, pools) if pools else "define it in lustre.pools",
            )
        if d.stripe_count is not None and d.stripe_count > width:
            yield SpecIssue(
                f"{p}.stripe_count",
                d.stripe_count,
                f"larger than the {width} OSTs it can stripe over",
                f"use at most {width}, or -1 for all OSTs (overstriping is derived by the plan when it pays)",
            )
        if d.stripe_count == 0:
            yield SpecIssue(f"{p}.stripe_count", 0, "a stripe count of 0 means 'default'", "drop it, or use ≥ 1 or -1")


def _routers(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """LNet routers: each joins a client-side and a server-side network of lustre.lnet, and every pair of
    client-only and server-only networks has a router group (else clients could not reach the servers)."""
    lu = spec.lustre
    kinds = {n.name: n.hosts for n in lu.lnet}
    client_only = [n for n, h in kinds.items() if h == "clients"]
    server_only = [n for n, h in kinds.items() if h == "servers"]
    yield from _first_seen("lustre.routers[{i}].name", [rg.name for rg in lu.routers], "router group name")
    for i, rg in enumerate(lu.routers):
        p = f"lustre.routers[{i}]"
        for key, net, side in (("client_net", rg.client_net, "clients"), ("server_net", rg.server_net, "servers")):
            if net not in kinds:
                yield SpecIssue(
                    f"{p}.{key}", net, "not a network of lustre.lnet",
                    f"add {{name: {net}, hosts: {side}}} to lustre.lnet or name one of {sorted(kinds)}",
                )
            elif kinds[net] != side:
                other = "servers" if side == "clients" else "clients"
                yield SpecIssue(
                    f"{p}.{key}", net,
                    f"lustre.lnet gives {net} hosts: {kinds[net]}, so the {other} are already on it and a route "
                    "to it would point at a network they reach directly",
                    f"set hosts: {side} on {net} in lustre.lnet, or route between a clients and a servers network",
                )
        if rg.client_net == rg.server_net:
            yield SpecIssue(
                f"{p}.server_net", rg.server_net, "a router joins two different networks (client_net is the same)",
                "name the storage-side network, e.g. o2ib1",
            )
        for key, group in (("client_nics", rg.client_nics), ("server_nics", rg.server_nics)):
            if group.count < 1:
                yield SpecIssue(f"{p}.{key}.count", group.count, "a router needs a NIC on each side", "set count ≥ 1")
    if (client_only or server_only) and not (client_only and server_only):
        have, lack = ("clients", "servers") if client_only else ("servers", "clients")
        yield SpecIssue(
            "lustre.lnet", [n.name for n in lu.lnet],
            f"networks {client_only or server_only} are for {have} only but no network is for {lack} only, so "
            "no router could join the two sides",
            f"give the other side its own network (hosts: {lack}) or set hosts: all",
        )
    joined = {(rg.client_net, rg.server_net) for rg in lu.routers}
    for c in client_only:
        for s in server_only:
            if (c, s) not in joined:
                yield SpecIssue(
                    "lustre.routers", [f"{rg.client_net}->{rg.server_net}" for rg in lu.routers],
                    f"clients on {c} cannot reach servers on {s}: no router group joins them",
                    f"add a router group with client_net: {c} and server_net: {s}",
                )
    if lu.routers and not (client_only and server_only):
        yield SpecIssue(
            "lustre.routers", [rg.name for rg in lu.routers],
            "every network of lustre.lnet is shared by clients and servers (hosts: all), so there is nothing to route",
            "mark the client-side network hosts: clients and the server-side one hosts: servers, or drop routers",
        )


def _objectstore(spec: ClusterSpec) -> Iterator[SpecIssue]:
    os_ = spec.objectstore
    if os_.backend == "external":
        if not os_.endpoint:
            yield SpecIssue(
                "objectstore.endpoint", None, "an external object store needs its endpoint", "set endpoint: https://…"
            )
        if os_.throughput_GBps is None:
            yield SpecIssue(
                "objectstore.throughput_GBps",
                None,
                "the sizing model needs the external store's throughput",
                "set throughput_GBps to the figure you are sold",
            )
    else:
        if os_.endpoint:
            yield SpecIssue(
                "objectstore.endpoint",
                os_.endpoint,
                "seaweedfs is deployed by kiln; it has no external endpoint",
                "drop endpoint, or set backend: external",
            )
        if os_.nodes < 1:
            yield SpecIssue("objectstore.nodes", os_.nodes, "seaweedfs needs at least one node", "set nodes ≥ 1")
        for field in ("nics", "disks"):
            group = getattr(os_, field)
            if group is not None and group.count < 1:
                yield SpecIssue(
                    f"objectstore.{field}.count", group.count, f"seaweedfs nodes need {field}", "set count ≥ 1"
                )
        for field in ("nics", "disks"):
            if getattr(os_, field) is None:
                yield SpecIssue(
                    f"objectstore.{field}", None, f"seaweedfs nodes need `{field}`", f"add objectstore.{field}"
                )
    names = [b.name for b in os_.buckets]
    if len(set(names)) != len(names):
        yield SpecIssue("objectstore.buckets", names, "duplicate bucket", "list each bucket once")
    if lake_network(spec) == "management" and spec.networks.management_link_Gbps is None:
        yield SpecIssue(
            "networks.management_link_Gbps", None,
            f"the lake is reached over the management network (objectstore.network, default for an {os_.backend} "
            "store), whose line rate bounds the stage-in, and the spec does not give it",
            "set networks.management_link_Gbps to one compute node's management port (e.g. 100), or "
            "objectstore.network: storage if the lake is on the storage fabric",
        )


def lake_network(spec: ClusterSpec) -> str:
    """The network movers reach the object store over: objectstore.network, else storage for kiln's SeaweedFS
    (on the storage subnet) and management for an external store (outside the fabric)."""
    os_ = spec.objectstore
    return os_.network or ("storage" if os_.backend == "seaweedfs" else "management")


def _workload(spec: ClusterSpec) -> Iterator[SpecIssue]:
    kb = knowledge.load()
    rd = spec.workload.read_demand
    if (rd.profile is None) == (rd.GBps_per_gpu is None):
        yield SpecIssue(
            "workload.read_demand",
            rd.model_dump(exclude_none=True),
            "give exactly one of profile and GBps_per_gpu",
            f"e.g. profile: llm-text ({', '.join(sorted(kb.read_profiles))}) or GBps_per_gpu: 1.0",
        )
    elif rd.profile is not None and rd.profile not in kb.read_profiles:
        yield SpecIssue(
            "workload.read_demand.profile", rd.profile, "unknown read profile", suggest(rd.profile, kb.read_profiles)
        )


def _server(spec: ClusterSpec) -> Iterator[SpecIssue]:
    sv = spec.lustre.oss.server
    if sv is None:
        return
    p = "lustre.oss.server"
    if (sv.read_GBps is None) != (sv.write_GBps is None):
        yield SpecIssue(
            p,
            sv.model_dump(exclude_none=True),
            "a published ceiling needs both read_GBps and write_GBps",
            "give both figures as the vendor publishes them, or neither (the ceiling is then derived from PCIe)",
        )
    if sv.read_GBps is not None and not sv.source:
        yield SpecIssue(
            f"{p}.source", None, "a published ceiling needs its source", "name the document, table or URL it is from"
        )
    if spec.lustre.oss.nodes % sv.servers_per_unit:
        yield SpecIssue(
            f"{p}.servers_per_unit",
            sv.servers_per_unit,
            f"lustre.oss.nodes ({spec.lustre.oss.nodes}) is not a whole number of units",
            f"make lustre.oss.nodes a multiple of {sv.servers_per_unit}",
        )


def _count_hosts(spec: ClusterSpec) -> int:
    """Management addresses the planner hands out: every family's hosts or its reserve (colocated MDTs add no
    hosts). A SeaweedFS object store without storage NICs is counted too, though the planner gives it no host."""
    families = address_families(spec)
    os_ = spec.objectstore
    if os_.backend == "seaweedfs" and os_.nics is None:
        families.append(("objectstore", os_.nodes))
    kafka = sum(f.count for f in kafka_families(spec))  # bare-metal KRaft nodes: management addresses only
    return sum(reserved(spec, name, hosts) for name, hosts in families) + kafka


def _reserves(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """A reserve names one host family and keeps at least the hosts it has."""
    families = address_families(spec)
    hosts = dict(families)
    named = Counter(name for name, _ in families)
    for name, keep in spec.networks.reserve.items():
        path = f"networks.reserve.{name}"
        if name not in hosts:
            yield SpecIssue(path, keep, "is not a host family of this spec", suggest(name, list(hosts)))
        elif named[name] > 1:
            yield SpecIssue(path, keep, f"{name} names both a compute pool and another host family",
                            "rename the compute pool")
        elif keep < hosts[name]:
            yield SpecIssue(path, keep, f"keeps fewer addresses than the family's {hosts[name]} hosts",
                            f"reserve at least {hosts[name]} (a reserve is room to grow into)")


def _storage_subnets(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """Every subnet storage addresses come from holds the addresses of the networks on it: a network's own
    `subnet` (path lustre.lnet[i].subnet), else networks.storage or, routed, its slice of it."""
    need = ports_per_net(spec)
    lu = spec.lustre
    sliced = lu.routed and len(lu.lnet) > 1
    by_cidr: dict[str, tuple[str, list[str]]] = {}
    for i, (name, cidr) in enumerate(lnet_subnets(spec).items()):
        path = f"lustre.lnet[{i}].subnet" if lu.lnet[i].subnet else "networks.storage"
        by_cidr.setdefault(cidr, (path, []))[1].append(name)
    for cidr, (path, names) in by_cidr.items():
        bits = (len(lu.lnet) - 1).bit_length() if sliced and path == "networks.storage" else 0
        what = f" (the slice of {', '.join(names)})" if bits else ""
        yield from _room(path, ipaddress.ip_network(cidr), sum(need[n] for n in names), bits, what)


def _room(path: str, net: IPNetwork, need: int, bits: int = 0, what: str = "") -> Iterator[SpecIssue]:
    """`net` has `need` addresses to hand out (.1 is left for the gateway); `bits`: `net` is a slice of the subnet at
    `path`, 2**bits times smaller."""
    room = net.num_addresses - 3
    if need > room:
        yield SpecIssue(
            path, str(net), f"{need} addresses needed{what}, {max(room, 0)} available",
            f"use a larger subnet (at least /{_prefix_for(need + 3) - bits})",
        )


def _lnet_subnets(spec: ClusterSpec, others: list[tuple[str, IPNetwork]]) -> Iterator[SpecIssue]:
    """A routed filesystem's networks each have a subnet of their own, disjoint from each other and the others."""
    lu = spec.lustre
    storage = ipaddress.ip_network(spec.networks.storage)
    if lu.routed and any(n.subnet is None for n in lu.lnet) and not storage_slices(storage, len(lu.lnet)):
        yield SpecIssue(
            "networks.storage", str(storage),
            f"too small to give each of the {len(lu.lnet)} LNet networks of a routed filesystem a subnet of its own",
            "use a larger networks.storage, or give each network of lustre.lnet its subnet",
        )
        return
    subnets = lnet_subnets(spec)
    nets = [(i, ipaddress.ip_network(subnets[n.name])) for i, n in enumerate(lu.lnet)]
    for i, net in nets:
        path = f"lustre.lnet[{i}].subnet"
        clash = next((j for j, other in nets[:i] if other.overlaps(net) and (lu.routed or other != net)), None)
        if clash is not None:
            yield SpecIssue(
                path, str(net), f"overlaps the subnet of lustre.lnet[{clash}] ({nets[clash][1]})",
                "give each LNet network of a routed filesystem a disjoint subnet (the fabrics are separate IP "
                "networks)" if lu.routed else "give the networks the same subnet or disjoint ones",
            )
        for other_path, other in others:
            if lu.lnet[i].subnet is not None and other.overlaps(net):
                yield SpecIssue(path, str(net), f"overlaps {other_path} ({other})", "use disjoint subnets")


def _networks(spec: ClusterSpec) -> Iterator[SpecIssue]:
    mgmt = ipaddress.ip_network(spec.networks.management)
    stor = ipaddress.ip_network(spec.networks.storage)
    if mgmt.overlaps(stor):
        yield SpecIssue(
            "networks.storage", str(stor), f"overlaps the management network {mgmt}", "use disjoint subnets"
        )
    others = [("networks.management", mgmt)]
    if spec.networks.roce_rails is not None:
        others.append(("networks.roce_rails", ipaddress.ip_network(spec.networks.roce_rails)))
    lnet_issues = list(_lnet_subnets(spec, others))
    yield from lnet_issues
    yield from _reserves(spec)
    yield from _room("networks.management", mgmt, _count_hosts(spec))
    if not lnet_issues:
        yield from _storage_subnets(spec)
    rails = sum(reserved(spec, p.name, p.nodes) * p.rails_per_node for p in spec.compute.pools)
    if spec.fabric.kind == "roce" and rails and spec.networks.roce_rails is None:
        yield SpecIssue(
            "networks.roce_rails",
            None,
            f"a RoCE fabric with {rails} compute-rail NICs needs IPv4 addresses on them (RoCEv2 GID, NCCL)",
            "add networks.roce_rails: a subnet disjoint from the others, e.g. 10.30.0.0/16",
        )
    if spec.networks.roce_rails is not None:
        roce = ipaddress.ip_network(spec.networks.roce_rails)
        for other in (mgmt, stor):
            if roce.overlaps(other):
                yield SpecIssue("networks.roce_rails", str(roce), f"overlaps {other}", "use disjoint subnets")
        yield from _room("networks.roce_rails", roce, rails)


def _prefix_for(n: int) -> int:
    bits = max(1, (n - 1).bit_length())
    return 32 - bits


#: Fence agents that reach the node through shared storage, not a BMC address.
STORAGE_FENCE_AGENTS = frozenset({"fence_sbd", "fence_scsi", "fence_mpath"})


def _targets(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """Target paths (one per target, none shared) and each group's protection level."""
    lu = spec.lustre
    seen: dict[str, str] = {}
    if lu.mgs.device is not None:
        seen[lu.mgs.device] = "lustre.mgs.device"
    for key, nodes, group in (("mds.mdts", lu.mds.nodes, lu.mds.mdts), ("oss.osts", lu.oss.nodes, lu.oss.osts)):
        total = nodes * group.per_node
        if group.paths is not None:
            if len(group.paths) != total:
                yield SpecIssue(
                    f"lustre.{key}.paths",
                    group.paths,
                    f"{len(group.paths)} paths for {total} targets ({nodes} nodes × {group.per_node}); "
                    "paths name every target of the filesystem, in index order",
                    f"list {total} paths, or drop `paths` for the defaults",
                )
            for i, path in enumerate(group.paths):
                if path in seen:
                    yield SpecIssue(
                        f"lustre.{key}.paths[{i}]",
                        path,
                        f"two targets on one device (also {seen[path]}): formatting one destroys the other",
                        "give every target its own device",
                    )
                seen.setdefault(path, f"lustre.{key}.paths[{i}]")
        kind = key.rsplit(".", 1)[1][:-1]
        level = group.protection or default_level(lu.backend, kind, group.devices_per_target)
        if level is None:
            yield SpecIssue(
                f"lustre.{key}.protection",
                None,
                "one drive per target has no redundancy kiln can build, and no level is named",
                "set devices_per_target ≥ 2, or protection: external (an array LUN) or none (no redundancy)"
                if lu.backend == "ldiskfs"
                else "set devices_per_target ≥ 2, or protection: none (no redundancy)",
            )
            continue
        problem = level_problem(level, lu.backend, group.devices_per_target)
        if problem:
            yield SpecIssue(f"lustre.{key}.protection", level, *problem)
    if lu.mgs.device is not None and lu.mds.mdts.paths is None:
        yield from _mgt_on_default_mdt(spec, lu.mgs.device)
    mgt = lu.mgs.protection
    if lu.mgs.device is None and mgt is not None:
        problem = level_problem(mgt, lu.backend, 1 if mgt == "none" else 2)
        if problem is None and mgt not in ("mirror", "raid1", "none"):
            problem = (f"the MGT is a pair of drives; {mgt} needs more", "use mirror (zfs) or raid1 (ldiskfs)")
        if problem:
            yield SpecIssue("lustre.mgs.protection", mgt, *problem)


def _mgt_on_default_mdt(spec: ClusterSpec, device: str) -> Iterator[SpecIssue]:
    """The MGT must not be formatted over a default MDT: one of its drives, its md array (ldiskfs) or its pool
    (zfs): formatting one destroys the other."""
    lu = spec.lustre
    for idx in range(lu.mds.nodes * lu.mds.mdts.per_node):
        drive = default_drive_base("mdt", idx)
        assembled = default_target_device(lu.backend, lu.fsname, "mdt", idx)
        pool = assembled.split("/")[0] if lu.backend == "zfs" else assembled
        if device in (drive, assembled, pool) or device.startswith((drive + "-", pool + "/")):
            yield SpecIssue(
                "lustre.mgs.device",
                device,
                f"the MGT would be formatted on MDT{idx:04x}'s default device ({assembled}, drives {drive}-*)",
                "give the MGT a device of its own (or drop lustre.mgs.device for the default mirrored pair)",
            )


def _ha(spec: ClusterSpec) -> Iterator[SpecIssue]:
    lu = spec.lustre
    fencing = lu.ha.fencing
    if lu.failover == "pairs" and fencing is None:
        yield SpecIssue(
            "lustre.ha.fencing",
            None,
            "failover pairs without fencing: a hung server could keep a target mounted while its partner mounts it",
            "name the fence agent, e.g. lustre.ha.fencing: {agent: fence_ipmilan, address: '{host}-bmc', "
            "username: admin}; or agent: none-lab for a lab without BMCs",
        )
    needs_address = fencing is not None and fencing.agent not in ("none-lab", *STORAGE_FENCE_AGENTS)
    if fencing is not None and needs_address and (fencing.address is None or "{host}" not in fencing.address):
        yield SpecIssue(
            "lustre.ha.fencing.address",
            fencing.address,
            f"{fencing.agent} needs each server's BMC address",
            "write it with {host} for the server name, e.g. '{host}-bmc.mgmt'",
        )
def _first_seen(path: str, values: list[str], what: str) -> Iterator[SpecIssue]:
    """One issue per value that repeats an earlier one in `values` (path holds '{i}')."""
    first: dict[str, int] = {}
    for i, value in enumerate(values):
        if value in first:
            yield SpecIssue(
                path.format(i=i), value, f"same {what} as {path.format(i=first[value])}", f"give each its own {what}"
            )
        first.setdefault(value, i)


def _duplicates(spec: ClusterSpec) -> Iterator[SpecIssue]:
    lu = spec.lustre
    yield from _first_seen("compute.pools[{i}].name", [p.name for p in spec.compute.pools], "pool name")
    yield from _first_seen("lustre.pools[{i}].name", [p.name for p in lu.pools], "OST pool name")
    for i, pool in enumerate(lu.pools):
        yield from _first_seen(f"lustre.pools[{i}].osts[{{i}}]", [str(x) for x in pool.osts], "OST index")
    # Directory paths are canonical already ('//', '/.' and trailing '/' removed); their Kubernetes names must
    # differ too (PersistentVolumes and claims are named after them).
    yield from _first_seen(
        "lustre.directories[{i}].path",
        [dns_name(d.path) for d in lu.directories],
        "Kubernetes name (lustre-<path in lower case, other characters as '-'>)",
    )


def _host_names(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """Generated host names (<prefix><zero-padded number>, kiln.spec.naming) must not collide across pools and
    servers: e.g. a pool prefixed `oss` with 100 nodes and 100 OSS servers would both name a host oss100."""
    families = [(f.path, f.prefix, f.width, f.count) for f in host_families(spec)]
    for a, (path_a, pa, wa, na) in enumerate(families):
        for b, (path_b, pb, wb, nb) in enumerate(families):
            if a == b or (pa == pb and a > b) or not pb.startswith(pa):
                continue
            if pa == pb and path_a.startswith("compute") and path_b.startswith("compute"):
                continue  # reported by _compute as a shared prefix
            name = _collision(pa=pa, wa=wa, na=na, pb=pb, wb=wb, nb=nb)
            if name is not None:
                # Name a prefix the user chose: a router group's first (routers come last), then a pool's.
                path = next(
                    (x for pre in ("lustre.routers", "compute") for x in (path_a, path_b) if x.startswith(pre)),
                    path_b,
                )
                yield SpecIssue(
                    path,
                    pa if path == path_a else pb,
                    f"host {name} would be generated by both {path_a.rsplit('.', 1)[0]} "
                    f"and {path_b.rsplit('.', 1)[0]}",
                    "choose a hostname_prefix that is not another prefix followed by digits (e.g. not mds, oss, s3-)",
                )


def _collision(pa: str, wa: int, na: int, pb: str, wb: int, nb: int) -> str | None:
    """A name both pa+f'{i:0{wa}d}' (1 ≤ i ≤ na) and pb+f'{j:0{wb}d}' (1 ≤ j ≤ nb) produce, where pb starts with pa.

    Every number is written with exactly its family's width, so pb's extra characters must be digits that lead
    pa's number: i = int(extra) · 10^wb + j. The two ranges are compared, not enumerated."""
    extra = pb[len(pa) :]
    if (extra and not extra.isdigit()) or len(extra) + wb != wa:
        return None
    base = int(extra or 0) * 10**wb
    low, high = max(base + 1, 1), min(base + nb, na)
    return f"{pa}{low:0{wa}d}" if low <= high else None
