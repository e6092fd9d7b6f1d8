"""The sizing model: every layer's read and write limit, the bottleneck, and what follows from it.

All rates in GB/s (10^9 bytes/s). Nominal figures come from the hardware catalog, efficiency factors
from kiln/knowledge/efficiency.yaml; each layer records its formula and the factors it used.
See docs/sizing-model.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kiln import knowledge
from kiln.plan.checkpoint import checkpoint_terms
from kiln.plan.model import Checkpoint, Layer, Sizing
from kiln.plan.protection_cost import WriteCost, write_cost
from kiln.plan.reader import fed_bound, loader_layer
from kiln.spec import catalog
from kiln.spec.checks import lake_network
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, ComputePool, Device, ServerCeiling
from kiln.spec.protection import Share, data_share, default_level


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceFigures:
    read_GBps: float
    write_GBps: float
    capacity_TB: float
    kind: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """A read and a write rate in GB/s and what bounds each: a layer's name, or how a ceiling was found."""

    read_GBps: float
    write_GBps: float
    read_bound: str
    write_bound: str


def device_figures(device: Device) -> DeviceFigures:
    kb = knowledge.load()
    if device.catalog is not None:
        m = kb.nvme[device.catalog]
        return DeviceFigures(
            read_GBps=m.read_GBps, write_GBps=m.write_GBps, capacity_TB=m.capacity_TB, kind=device.kind,
        )
    assert device.read_GBps and device.write_GBps and device.capacity_TB
    return DeviceFigures(
        read_GBps=device.read_GBps, write_GBps=device.write_GBps, capacity_TB=device.capacity_TB, kind=device.kind,
    )


def lnet_factor(spec: ClusterSpec) -> tuple[float, tuple[str, ...]]:
    """Share of a storage NIC's link rate that Lustre bulk I/O reaches, and the factors behind it."""
    kb = knowledge.load()
    if spec.fabric.kind == "tcp":
        return kb.factor("tcp_payload") * kb.factor("lnet_tcp"), ("tcp_payload", "lnet_tcp")
    return kb.factor("rdma_payload") * kb.factor("lnet_o2ib"), ("rdma_payload", "lnet_o2ib")


def read_demand(spec: ClusterSpec) -> tuple[float, float, str]:
    """(sustained GB/s per GPU, single-node GB/s, source) of the workload's read demand."""
    rd = spec.workload.read_demand
    if rd.profile is not None:
        p = knowledge.load().read_profiles[rd.profile]
        return p.GBps_per_gpu, float(p.single_node_GBps), f"profile {p.name}: {p.source}"
    assert rd.GBps_per_gpu is not None
    gpn = max(pool.gpus_per_node for pool in spec.compute.pools)
    return rd.GBps_per_gpu, rd.GBps_per_gpu * gpn, "workload.read_demand.GBps_per_gpu (stack)"


def per_oss(spec: ClusterSpec) -> tuple[float, float]:
    """(read, write) one OSS delivers: the least of its NICs, its server ceiling and its (protected) OSTs."""
    lu = spec.lustre
    f, _ = lnet_factor(spec)
    nic = lu.oss.nics.count * catalog.nics(spec)[lu.oss.nics.nic].link_GBps * f
    dev = device_figures(lu.oss.osts.device)
    n_dev = lu.oss.osts.per_node * lu.oss.osts.devices_per_target
    rf, wf = _ost_factors(spec)
    pr, _ = protection_share(spec)
    ceiling = server_ceiling(spec)
    uplink = uplink_rate(spec)
    up = uplink[0] if uplink is not None else math.inf
    return (
        min(nic, ceiling.read_GBps, up, n_dev * dev.read_GBps * rf * pr),
        min(nic, ceiling.write_GBps, up, n_dev * dev.write_GBps * wf * ost_write_cost(spec).efficiency),
    )


def ost_write_cost(spec: ClusterSpec) -> WriteCost:
    """Data bytes per byte the OST drives write at the OSTs' protection level (kiln/plan/protection_cost.py)."""
    dev = device_figures(spec.lustre.oss.osts.device)
    return write_cost(spec, read_weight=dev.write_GBps / dev.read_GBps)


def uplink_rate(spec: ClusterSpec) -> tuple[float, str] | None:
    """(GB/s, how) one OSS reaches its shared OST drives through (lustre.oss.uplink), None where not described:
    PCIe lanes × the generation's per-lane rate (PCI-SIG, kiln/knowledge/workload.yaml), or links × line rate."""
    up = spec.lustre.oss.uplink
    if up is None:
        return None
    if up.pcie_lanes is not None:
        gen = up.pcie_gen or catalog.nics(spec)[spec.lustre.oss.nics.nic].pcie_gen or 4
        lane = knowledge.load().pcie.rates[gen] / 16
        return up.pcie_lanes * lane, f"{up.pcie_lanes} PCIe Gen{gen} lanes × {lane:.3g} GB/s"
    assert up.links is not None and up.link_Gbps is not None  # kiln.spec.checks: links for san and nvmeof
    return up.links * up.link_Gbps / 8, f"{up.links} links × {up.link_Gbps:g} Gb/s ÷ 8"


def uplink_layers(spec: ClusterSpec) -> tuple[Layer, ...]:
    """`ost_uplinks`: what the OSS reach their shared OST drives through (an enclosure's PCIe lanes, a SAN's or an
    NVMe-oF fabric's links), where lustre.oss.uplink describes it. Nominal rates and no efficiency factor: a bound
    every byte to or from the drives crosses, not a prediction of its own."""
    uplink = uplink_rate(spec)
    if uplink is None:
        return ()
    rate, how = uplink
    oss = spec.lustre.oss
    assert oss.uplink is not None
    total = oss.nodes * rate
    formula = f"{oss.nodes} OSS × {how} ({oss.osts.attachment}; {oss.uplink.source})"
    return (Layer(name="ost_uplinks", kind="supply", read_GBps=total, write_GBps=total, formula=formula),)


def protection_share(spec: ClusterSpec) -> tuple[float, float]:
    """(read, write) share of the OST drives' rate that carries data after the OSTs' data protection
    (a mirror writes every block twice, parity layouts lose the parity share): `ost_protection`."""
    share = ost_protection(spec)
    return share.read, share.write


def published_ceiling(spec: ClusterSpec) -> bool:
    """Whether the stack gives the OSS's published ceiling (lustre.oss.server.read_GBps and write_GBps)."""
    sv = spec.lustre.oss.server
    return sv is not None and sv.read_GBps is not None and sv.write_GBps is not None


#: The factor prefix of each server class (lustre.oss.server.kind): its read and write shares of the NICs' line rate.
SERVER_CLASS_FACTORS = {
    "self-built": "server_self_built",
    "clusterstor-e1000-flash": "server_clusterstor",
    "flash-appliance": "server_appliance",
}


def server_class(spec: ClusterSpec) -> str:
    """The OSS's server class (lustre.oss.server.kind; its default when the stack describes no server)."""
    sv = spec.lustre.oss.server
    return sv.kind if sv is not None else str(ServerCeiling.model_fields["kind"].default)


def server_class_factors(spec: ClusterSpec) -> tuple[str, str]:
    """The read and write factor names of the OSS's server class."""
    prefix = SERVER_CLASS_FACTORS[server_class(spec)]
    return f"{prefix}_read", f"{prefix}_write"


def _class_shares() -> str:
    """Each server class's read/write shares of line rate, as the plan's note shows them."""
    kb = knowledge.load()
    return ", ".join(
        f"{kind} {kb.factor(f'{prefix}_read'):g}/{kb.factor(f'{prefix}_write'):g}"
        for kind, prefix in SERVER_CLASS_FACTORS.items()
    )


def server_ceiling(spec: ClusterSpec) -> Rate:
    """What one OSS delivers at most, read and write; both bounds say how the ceiling was found.

    A published ceiling (lustre.oss.server.read_GBps/write_GBps, shared by servers_per_unit OSS) wins;
    otherwise the ceiling is derived: the lesser of PCIe (the slower of the NICs' lanes and the drives' lanes
    × server_pcie) and the server class's published share of the NICs' line rate (server_<class>_read/_write).
    """
    sv = spec.lustre.oss.server
    if sv is not None and sv.read_GBps is not None and sv.write_GBps is not None:
        k = sv.servers_per_unit
        how = f"published ceiling {sv.read_GBps:g}/{sv.write_GBps:g} GB/s per unit of {k} OSS ({sv.source})"
        return Rate(read_GBps=sv.read_GBps / k, write_GBps=sv.write_GBps / k, read_bound=how, write_bound=how)
    return derived_ceiling(spec)[0]


def derived_ceiling(spec: ClusterSpec) -> tuple[Rate, dict[str, bool]]:
    """The derived server ceiling (server_ceiling without a published one) and, per direction ("read", "write"),
    whether PCIe binds it rather than the server class's share of line rate."""
    kb = knowledge.load()
    oss = spec.lustre.oss
    sv = oss.server
    nic = catalog.nics(spec)[oss.nics.nic]
    gen = sv.pcie_gen if sv is not None and sv.pcie_gen is not None else (nic.pcie_gen or 4)
    lane = kb.pcie.rates[gen] / 16
    drives = oss.osts.per_node * oss.osts.devices_per_target
    nic_lanes, drive_lanes = 16.0 * oss.nics.count, 4.0 * drives
    if sv is not None and sv.pcie_lanes is not None:
        # Given lanes are split between NICs and drives in the default's proportion.
        share = sv.pcie_lanes / (nic_lanes + drive_lanes)
        nic_lanes, drive_lanes = nic_lanes * share, drive_lanes * share
    f = kb.factor("server_pcie")
    pcie = min(nic_lanes, drive_lanes) * lane * f
    pcie_how = (
        f"min(NIC lanes {nic_lanes:g}, drive lanes {drive_lanes:g}) × PCIe Gen{gen} {lane:.3g} GB/s per lane "
        f"× server_pcie {f:g}"
    )
    line = oss.nics.count * nic.link_GBps
    bounds = []
    for name in server_class_factors(spec):
        cls = line * kb.factor(name)
        cls_how = f"{oss.nics.count} NICs × {nic.link_GBps:g} GB/s line rate × {name} {kb.factor(name):g}"
        bounds.append((cls, cls_how, False) if cls < pcie else (pcie, pcie_how, True))
    (read, read_how, read_pcie), (write, write_how, write_pcie) = bounds
    rate = Rate(read_GBps=read, write_GBps=write, read_bound=read_how, write_bound=write_how)
    return rate, {"read": read_pcie, "write": write_pcie}


def server_layer(spec: ClusterSpec) -> Layer:
    """The `oss_servers` layer: read and write GB/s of all OSS together, the formula and the factors.

    With lustre.mds.colocated_with_oss the first mds.nodes OSS hosts run MDTs too and their ceiling is shared
    between MDT and OST traffic. A published ceiling is the appliance's as measured with its MDTs on the same
    controllers (DDN AI400X2: four VMs on two controllers run the OSS and MDS, MLPerf Storage v0.5 system
    description closed/DDN/systems/AI400X2_24x13.9TiB_nvme_8xHDR200.json), so it is not split again, nor is a
    server class's share (measured per server as built, the Cambridge servers with their MDTs). A PCIe-derived
    ceiling is split by the drives behind each kind of target (kit assumption, conservative: MDT drives busy
    at the OST drives' pace): OST traffic gets OST drives ÷ (OST + MDT drives) of it on those hosts."""
    lu = spec.lustre
    published = published_ceiling(spec)
    ceiling, pcie = (server_ceiling(spec), {}) if published else derived_ceiling(spec)
    factors = () if published else ("server_pcie", *server_class_factors(spec))
    bound = ceiling.read_bound
    if ceiling.write_bound != bound:
        bound = f"read {bound}; write {ceiling.write_bound}"
    formula = f"{lu.oss.nodes} OSS × server ceiling: {bound}"
    split = {"read": float(lu.oss.nodes), "write": float(lu.oss.nodes)}
    if lu.mds.colocated_with_oss and published:
        formula += "; MDTs on the same controllers (in the figure)"
    elif lu.mds.colocated_with_oss:
        ost = lu.oss.osts.per_node * lu.oss.osts.devices_per_target
        mdt = lu.mds.mdts.per_node * lu.mds.mdts.devices_per_target
        share = ost / (ost + mdt)
        plain, both = lu.oss.nodes - lu.mds.nodes, lu.mds.nodes
        split = {k: plain + both * share if v else split[k] for k, v in pcie.items()}
        formula = (
            f"({plain} OSS + {both} OSS with MDTs × OST share {ost}/({ost}+{mdt}) drives = {share:.3f} where PCIe "
            f"binds) × server ceiling: {bound}"
        )
    return Layer(
        name="oss_servers", kind="supply", read_GBps=split["read"] * ceiling.read_GBps,
        write_GBps=split["write"] * ceiling.write_GBps, formula=formula, factors=factors,
    )


def small_file_layers(spec: ClusterSpec) -> tuple[Layer, ...]:
    """Request-rate layers for a workload that reads samples as files: MDT opens and OST read IOPS, in GB/s.

    They bound reads only (a checkpoint writes few, large files), so their write figure is infinite. `ost_iops`
    is left out where the drives' bandwidth binds before their IOPS (large samples): it could never bind.
    """
    smp = spec.workload.samples
    if smp is None:
        return ()
    kb = knowledge.load()
    lu = spec.lustre
    md = kb.workload.metadata
    sample_GB = smp.size_KB * 1e3 / 1e9
    out: list[Layer] = []
    if smp.files_per_sample:
        mdts = lu.mds.nodes * lu.mds.mdts.per_node
        opens = md.mdt_open_ops_per_s.by_media()[lu.mds.mdts.device.kind]
        rate = mdts * opens / smp.files_per_sample * sample_GB
        out.append(
            Layer(
                name="metadata",
                kind="supply",
                read_GBps=rate,
                write_GBps=math.inf,
                formula=f"{mdts} MDTs × {opens:g} opens/s ÷ {smp.files_per_sample} files per sample × "
                f"{smp.size_KB:g} KB",
                factors=("mdt_open_ops_per_s",),
            )
        )
    dev = lu.oss.osts.device
    n_dev = lu.oss.nodes * lu.oss.osts.per_node * lu.oss.osts.devices_per_target
    kiops = md.ost_read_kiops_per_device.by_media()[dev.kind]
    per_file_KB = smp.size_KB / max(smp.files_per_sample, 1)
    requests = max(smp.files_per_sample, 1) * math.ceil(per_file_KB * 1e3 / RPC_BYTES)
    pr, _ = protection_share(spec)
    rate = n_dev * kiops * 1e3 * pr / requests * sample_GB
    rf, _ = _ost_factors(spec)
    if rate >= n_dev * device_figures(dev).read_GBps * rf * pr:
        return tuple(out)  # the drives' bandwidth binds before their IOPS: the layer could never bind
    out.append(
        Layer(
            name="ost_iops",
            kind="supply",
            read_GBps=rate,
            write_GBps=math.inf,
            formula=f"{n_dev} drives × {kiops:g}k reads/s ÷ {requests} read RPCs per sample × {smp.size_KB:g} KB",
            factors=("ost_read_kiops_per_device",),
        )
    )
    return tuple(out)


#: Bulk read RPC size the request-rate layer counts in: a file below it is one RPC (ONE_MB_BRW_SIZE,
#: lustre/include/lustre_net.h), larger files one per MiB (conservative when RPCs are larger).
RPC_BYTES = 1 << 20


def _ost_factors(spec: ClusterSpec) -> tuple[float, float]:
    """(read, write) efficiency of the OST backend on the drives' raw rate (protection is its own step)."""
    kb = knowledge.load()
    b = spec.lustre.backend
    return kb.factor(f"ost_{b}_read"), kb.factor(f"ost_{b}_write")


def ost_protection(spec: ClusterSpec) -> Share:
    """Protection step of the OST layer: the share of the drives' raw rate that carries data (a mirror writes
    every block twice, parity layouts lose the parity share). Levels and sources: kiln/knowledge/protection.yaml."""
    osts = spec.lustre.oss.osts
    level = osts.protection or default_level(spec.lustre.backend, "ost", osts.devices_per_target) or "none"
    return data_share(level, osts.devices_per_target)


def objectstore_rates(spec: ClusterSpec) -> tuple[float, float, str]:
    """(GET, PUT) GB/s of the object store and how that was found."""
    os_ = spec.objectstore
    if os_.backend == "external":
        assert os_.throughput_GBps is not None
        return os_.throughput_GBps, os_.throughput_GBps, "objectstore.throughput_GBps (external, as sold)"
    kb = knowledge.load()
    assert os_.nics is not None and os_.disks is not None
    nic = os_.nics.count * catalog.nics(spec)[os_.nics.nic].link_GBps * kb.factor("tcp_payload")
    disk = kb.nvme[os_.disks.device]
    s3 = kb.factor("s3_gateway")
    copies = replica_count(os_.replication)
    get = os_.nodes * min(nic, os_.disks.count * disk.read_GBps) * s3
    put = os_.nodes * min(nic, os_.disks.count * disk.write_GBps) * s3 / copies
    how = "nodes × min(NICs × link × tcp_payload, disks × device rate) × s3_gateway"
    if copies > 1:
        how += f"; PUT ÷ {copies} copies (replication {os_.replication})"
    return get, put, how


def replica_count(code: str) -> int:
    """Copies SeaweedFS keeps for a replication code "xyz": 1 + x + y + z
    (weed/storage/super_block/replica_placement.go, ReplicaPlacement.GetCopyCount)."""
    return 1 + sum(int(c) for c in code)


def shared_port_notes(spec: ClusterSpec) -> list[str]:
    """The contention note of every pool whose rail ports also carry storage (compute.pools[].shared_storage_rails).

    Assumption (docs/sizing-model.md, "One port for rails and storage"): the storage layers count a shared port
    once, at its full line rate, as data loading sees it when no collective is in flight; the NCCL target counts
    it as a rail at its full rate too, as all_reduce_perf sees it with no storage traffic. Both cannot hold at once:
    while they overlap, storage reads and NCCL traffic on that port add up to at most its line rate."""
    out = []
    for p in spec.compute.pools:
        if p.shared_storage_rails and p.compute_rails is not None:
            link = catalog.nics(spec)[p.compute_rails.nic].link_Gbps
            out.append(
                f"pool {p.name}: rail port(s) {', '.join(p.shared_storage_rails)} also carry storage; the client "
                f"layers count each once at {link:g} Gb/s and so does the NCCL inter-node target, each measured "
                "alone: while data loading and collectives overlap they share that line rate, so expect less of "
                "both (no split is modelled)"
            )
    return out


def routed_only(spec: ClusterSpec) -> bool:
    """Whether every client-to-server path crosses an LNet router (routers, and no network both sides share)."""
    lu = spec.lustre
    return bool(lu.routers) and not any(n.hosts == "all" for n in lu.lnet)


def router_link(spec: ClusterSpec) -> tuple[float, str]:
    """(GB/s, how) the LNet routers' links carry: Σ groups × routers × the narrower side's link."""
    nic_models = catalog.nics(spec)
    total, parts = 0.0, []
    for rg in spec.lustre.routers:
        c = rg.client_nics.count * nic_models[rg.client_nics.nic].link_GBps
        s = rg.server_nics.count * nic_models[rg.server_nics.nic].link_GBps
        total += rg.count * min(c, s)
        parts.append(f"{rg.count} × min({c:g}, {s:g}) GB/s ({rg.name}: {rg.client_net}→{rg.server_net})")
    return total, " + ".join(parts)


def router_layers(spec: ClusterSpec) -> tuple[Layer, ...]:
    """`lnet_routers`: what the LNet routers forward between the client and the server networks, when every
    client-to-server path crosses a router (no network of lustre.lnet is shared by clients and servers)."""
    if not routed_only(spec):
        return ()
    f_lnet, lnet_names = lnet_factor(spec)
    f_rtr = knowledge.load().factor("lnet_router")
    total, how = router_link(spec)
    rate = total * f_lnet * f_rtr
    formula = f"Σ routers × narrower side's link: {how} × {f_lnet:.3f} × lnet_router {f_rtr:g}"
    return (Layer(
        name="lnet_routers", kind="supply", read_GBps=rate, write_GBps=rate, formula=formula,
        factors=(*lnet_names, "lnet_router"),
    ),)


def gpu_count(spec: ClusterSpec) -> int:
    return sum(p.nodes * p.gpus_per_node for p in spec.compute.pools)


def client_link_GBps(spec: ClusterSpec) -> float:
    """Σ client nodes × their storage ports' link rate. Each port that carries storage counts once, a rail port
    shared with storage included (catalog.storage_ports)."""
    return sum(p.nodes * sum(m.link_GBps for m in catalog.storage_ports(spec, p)) for p in spec.compute.pools)


def bytes_per_param(spec: ClusterSpec) -> float:
    return spec.workload.checkpoint.bytes_per_param or knowledge.load().bytes_per_param.value


def checkpoint_bytes(spec: ClusterSpec) -> int:
    return int(spec.workload.model_params_B * 1e9 * bytes_per_param(spec))


def checkpoint_budget_s(spec: ClusterSpec) -> float:
    ck = spec.workload.checkpoint
    return ck.interval_min * 60 * ck.budget_fraction


def required_write_GBps(spec: ClusterSpec) -> float:
    """The write rate a checkpoint needs to be saved within its budget."""
    return checkpoint_bytes(spec) / checkpoint_budget_s(spec) / 1e9


def demand_layer(spec: ClusterSpec) -> Layer:
    """`gpu_demand`: what the GPUs read, and the checkpoint's write rate within its budget."""
    gpus = gpu_count(spec)
    per_gpu, _, _ = read_demand(spec)
    return Layer(
        name="gpu_demand",
        kind="demand",
        read_GBps=gpus * per_gpu,
        write_GBps=required_write_GBps(spec),
        formula=f"{gpus} GPUs × {per_gpu:g} GB/s read; write = checkpoint bytes ÷ budget "
        f"({checkpoint_budget_s(spec):g} s)",
    )


def client_layers(spec: ClusterSpec) -> tuple[Layer, ...]:
    """`client_nics`, `client_hosts` and `fabric`: what the clients' storage ports carry and send."""
    kb = knowledge.load()
    f_lnet, lnet_names = lnet_factor(spec)
    payload_name = "tcp_payload" if spec.fabric.kind == "tcp" else "rdma_payload"
    link = client_link_GBps(spec)
    f_stream = kb.factor("client_stream")
    fabric = link * kb.factor(payload_name) / spec.fabric.oversubscription
    return (
        Layer(
            name="client_nics", kind="supply", read_GBps=link * f_lnet, write_GBps=link * f_lnet,
            formula=f"Σ nodes × storage NICs × link ({link:g} GB/s) × {f_lnet:.3f}", factors=lnet_names,
        ),
        Layer(
            name="client_hosts", kind="supply", read_GBps=link * f_stream, write_GBps=link * f_stream,
            formula=f"Σ nodes × one host's streaming ceiling: storage link ({link:g} GB/s) × client_stream "
            f"{f_stream:g}",
            factors=("client_stream",),
        ),
        Layer(
            name="fabric", kind="supply", read_GBps=fabric, write_GBps=fabric,
            formula=f"client link {link:g} GB/s × {payload_name} ÷ oversubscription "
            f"{spec.fabric.oversubscription:g}",
            factors=(payload_name,),
        ),
    )


def ost_layers(spec: ClusterSpec) -> tuple[Layer, ...]:
    """`ost_devices` (the drives × the backend's efficiency) and `protection` (the share that carries data)."""
    lu = spec.lustre
    dev = device_figures(lu.oss.osts.device)
    n_dev = lu.oss.nodes * lu.oss.osts.per_node * lu.oss.osts.devices_per_target
    rf, wf = _ost_factors(spec)
    pr, _ = protection_share(spec)
    prot, cost = ost_protection(spec), ost_write_cost(spec)
    b = lu.backend
    dev_r, dev_w = n_dev * dev.read_GBps * rf, n_dev * dev.write_GBps * wf
    return (
        Layer(
            name="ost_devices", kind="supply", read_GBps=dev_r, write_GBps=dev_w,
            formula=f"{n_dev} devices × ({dev.read_GBps:g} read, {dev.write_GBps:g} write) GB/s × ost_{b} factors",
            factors=(f"ost_{b}_read", f"ost_{b}_write"),
        ),
        Layer(
            name="protection", kind="supply", read_GBps=dev_r * pr, write_GBps=dev_w * cost.efficiency,
            formula=f"ost_devices × the OSTs' {prot.formula.split(':')[0]}: read {pr:.3f} (data share); write "
            f"{cost.efficiency:.3f} ({cost.formula})",
            factors=(f"protection:{prot.formula.split(':')[0]}",),
        ),
    )


def server_layers(spec: ClusterSpec) -> tuple[Layer, ...]:
    """The OSS side: `oss_nics`, `oss_servers` and the OST layers."""
    lu = spec.lustre
    f_lnet, lnet_names = lnet_factor(spec)
    oss_link = lu.oss.nodes * lu.oss.nics.count * catalog.nics(spec)[lu.oss.nics.nic].link_GBps
    nics = Layer(
        name="oss_nics", kind="supply", read_GBps=oss_link * f_lnet, write_GBps=oss_link * f_lnet,
        formula=f"{lu.oss.nodes} OSS × {lu.oss.nics.count} NICs × link ({oss_link:g} GB/s) × {f_lnet:.3f}",
        factors=lnet_names,
    )
    return (nics, server_layer(spec), *ost_layers(spec))


def build_layers(spec: ClusterSpec) -> tuple[Layer, ...]:
    """The demand and every supply layer of the storage path, clients to drives."""
    return (
        demand_layer(spec),
        *client_layers(spec),
        *router_layers(spec),
        *server_layers(spec),
        *uplink_layers(spec),
        *small_file_layers(spec),
        *loader_layer(spec, node_ceiling_factor(spec)),
    )


def node_ceiling_factor(spec: ClusterSpec) -> float:
    """Share of a client node's storage link that a streaming reader on it reaches: the lesser of the LNet and
    client_stream factors (node_limit_GBps per GB/s of link)."""
    f_lnet, _ = lnet_factor(spec)
    return min(f_lnet, knowledge.load().factor("client_stream"))


def supply_rate(layers: tuple[Layer, ...]) -> Rate:
    """What the storage path supplies: the slowest supply layer for read and for write (the bottlenecks)."""
    supply = [layer for layer in layers if layer.kind == "supply"]
    rb = min(supply, key=lambda x: x.read_GBps)
    wb = min(supply, key=lambda x: x.write_GBps)
    return Rate(read_GBps=rb.read_GBps, write_GBps=wb.write_GBps, read_bound=rb.name, write_bound=wb.name)


def node_limit_GBps(spec: ClusterSpec) -> float:
    """What one client node reaches at most: its storage ports × the lesser of the LNet and single-client
    factors, for the slowest pool."""
    f = node_ceiling_factor(spec)
    return min(sum(m.link_GBps for m in catalog.storage_ports(spec, p)) * f for p in spec.compute.pools)


def build_checkpoint(spec: ClusterSpec, supply: Rate) -> Checkpoint:
    """One checkpoint's save as its terms (kiln/plan/checkpoint.py) and its restore, against the budget."""
    from kiln.plan.capacity import checkpoint_files  # late: capacity imports this module

    ck = spec.workload.checkpoint
    nbytes, bpp, budget_s = checkpoint_bytes(spec), bytes_per_param(spec), checkpoint_budget_s(spec)
    save_s = nbytes / (supply.write_GBps * 1e9)
    mdts = spec.lustre.mds.nodes * spec.lustre.mds.mdts.per_node
    creates = mdts * knowledge.load().mdt_rates.by_media()[spec.lustre.mds.mdts.device.kind]
    terms = checkpoint_terms(
        spec, nbytes=nbytes, gpus=gpu_count(spec), files=checkpoint_files(spec), create_ops=creates,
        write_GBps=supply.write_GBps, write_bound=supply.write_bound,
    )
    total = sum(t.seconds for t in terms)
    why = (
        f"{spec.workload.model_params_B:g}e9 params × {bpp:g} B/param = {nbytes / 1e9:.1f} GB; save ≥ {total:.1f} s "
        f"({' + '.join(f'{t.name} {t.seconds:.2g} s' for t in terms)}; serialisation not modelled: a lower bound) "
        f"against a budget of {budget_s:.1f} s ({ck.budget_fraction:.1%} of {ck.interval_min:g} min)"
    )
    return Checkpoint(
        bytes=nbytes,
        bytes_per_param=bpp,
        save_s=save_s,
        restore_s=nbytes / (supply.read_GBps * 1e9),
        budget_s=budget_s,
        required_write_GBps=required_write_GBps(spec),
        meets_budget=total <= budget_s,
        why=why,
        terms=terms,
        save_total_s=total,
        lower_bound=True,
    )


def checkpoint_issues(spec: ClusterSpec) -> list[SpecIssue]:
    """An error where no Lustre fleet could meet the checkpoint budget: the clients cannot send that fast."""
    link = client_link_GBps(spec)
    client_max = link * node_ceiling_factor(spec)
    required = required_write_GBps(spec)
    if required <= client_max:
        return []
    ck = spec.workload.checkpoint
    min_frac = checkpoint_bytes(spec) / (client_max * 1e9) / (ck.interval_min * 60)
    return [
        SpecIssue(
            "workload.checkpoint.budget_fraction",
            ck.budget_fraction,
            f"no layer can meet this budget: it needs {required:.1f} GB/s of checkpoint writes but the GPU "
            f"nodes' Lustre clients can only send {client_max:.1f} GB/s, however large the Lustre fleet",
            f"raise budget_fraction to at least {math.ceil(min_frac * 1000) / 1000:.3f}, "
            "lengthen interval_min, or add storage NICs",
        )
    ]


def mover_host_GBps(spec: ClusterSpec, pool: ComputePool) -> tuple[float, str]:
    """(GB/s, how) one mover host of `pool` moves to or from the lake: the ports of the network the lake is
    reached over (objectstore.network) × tcp_payload."""
    tcp = knowledge.load().factor("tcp_payload")
    if lake_network(spec) == "management":
        link = (spec.networks.management_link_Gbps or 0) / 8
        return link * tcp, f"management port {link * 8:g} Gb/s × tcp_payload {tcp:g}"
    link = sum(m.link_GBps for m in catalog.storage_ports(spec, pool))
    return link * tcp, f"storage ports {link * 8:g} Gb/s × tcp_payload {tcp:g}"


def mover_pools(spec: ClusterSpec) -> tuple[list[ComputePool], int]:
    """(pools whose nodes move data to and from the lake, how many hosts move): dataflow.movers, else the first
    pool's nodes."""
    df = spec.dataflow
    names = (df.movers.pools if df is not None else None) or [spec.compute.pools[0].name]
    pools = [p for p in spec.compute.pools if p.name in names]
    hosts = sum(p.nodes for p in pools)
    if df is not None and df.movers.max_hosts is not None:
        hosts = min(hosts, df.movers.max_hosts)
    return pools, hosts


def lake_path_GBps(spec: ClusterSpec) -> tuple[float, str]:
    """(GB/s, how) the path from the lake to the mover hosts carries: hosts × one host's ports on the network the
    lake is reached over (an external lake over Ethernet is bounded by the management ports, not the fabric)."""
    pools, hosts = mover_pools(spec)
    per_host, how = mover_host_GBps(spec, pools[0])
    return hosts * per_host, f"{hosts} mover hosts × {how} ({lake_network(spec)} network)"


def stage_in(spec: ClusterSpec, supply: Rate) -> tuple[float, str]:
    """(GB/s, bottleneck) of staging the dataset from the object store into Lustre: the slowest of the lake's
    GET, the network path to the movers and Lustre's write."""
    get, _, _ = objectstore_rates(spec)
    path, _ = lake_path_GBps(spec)
    candidates = {"objectstore": get, f"lake_path ({lake_network(spec)} network)": path}
    candidates[supply.write_bound] = supply.write_GBps
    bound = min(candidates, key=lambda k: candidates[k])
    return candidates[bound], bound


def recommended_oss(spec: ClusterSpec, *, demand_read: float, required_write: float) -> int:
    """OSS nodes for the planning headroom on read demand and checkpoint writes (whole failover pairs)."""
    one_read, one_write = per_oss(spec)
    headroom = knowledge.load().factor("planning_headroom")
    need = max(demand_read * headroom / one_read, required_write * headroom / one_write, 1.0)
    rec = math.ceil(need - 1e-9)
    if spec.lustre.failover == "pairs":
        rec += rec % 2
    return rec


def _model_notes(spec: ClusterSpec) -> list[str]:
    """What the model assumes where the stack gives no figure, and the hosts that share a ceiling."""
    lu = spec.lustre
    out = []
    if lu.mds.colocated_with_oss:
        out.append(
            f"MDS and OSS share hosts: the MDTs run on {lu.mds.nodes} of the {lu.oss.nodes} OSS hosts, whose "
            "server ceiling MDT and OST traffic share (oss_servers; docs/sizing-model.md, MDS and OSS on shared hosts)"
        )
    if spec.workload.samples is None:
        out.append(
            "request rate not modelled: large sequential reads are assumed; give workload.samples (size_KB, "
            "files_per_sample) to add the metadata, OST IOPS and data-loader layers"
        )
    return out


def sizing_notes(
    spec: ClusterSpec, *, supply: Rate, demand_read: float, recommended: int, single_read: float, meets_budget: bool
) -> tuple[str, ...]:
    """The report's notes on the sizing: the figures that matter and the assumptions behind them."""
    lu = spec.lustre
    os_get, os_put, os_how = objectstore_rates(spec)
    headroom = knowledge.load().factor("planning_headroom")
    notes = [
        f"read: storage supplies {supply.read_GBps:.1f} GB/s ({supply.read_bound}) against a demand of "
        f"{demand_read:.1f} GB/s "
        + (f"({supply.read_GBps / demand_read:.2f}×)" if demand_read else "(no GPUs: storage-only clients)"),
        f"object store: GET {os_get:.1f} GB/s, PUT {os_put:.1f} GB/s ({os_how})",
        f"planner recommends ≥ {recommended} OSS nodes for {headroom:g}× headroom on read demand and checkpoint "
        f"writes; the stack has {lu.oss.nodes}",
    ]
    sv = lu.oss.server
    if sv is None or sv.read_GBps is None:
        notes.append(
            f"server ceiling derived, class {server_class(spec)} "
            "(lustre.oss.server.kind): the lesser of PCIe × server_pcie (a kit assumption) and the class's measured "
            f"share of the OSS NICs' line rate ({_class_shares()}; docs/sizing-model.md, Servers by class). For an "
            "appliance, give lustre.oss.server.read_GBps/write_GBps (and servers_per_unit) with the vendor's published "
            "figure"
        )
    loader = "the client_loader layer" if spec.workload.samples else "modelled once workload.samples is given"
    notes.append(
        f"single client {single_read:.1f} GB/s read is what a parallel streaming reader (fio/IOR, "
        f"many threads) reaches; a data-loader pipeline is {loader}. MLPerf Storage v0.5 on one DGX H100 read 17 GB/s, "
        "0.22 of that host's streaming figure: the demand of its simulated accelerators, which the host met, not a "
        "ceiling "
        "(docs/sizing-model.md, Small files and the reader pipeline)"
    )
    notes += shared_port_notes(spec) + _model_notes(spec)
    if not meets_budget:
        notes.append(f"checkpoint misses its budget: add OSS/OSTs (recommended {recommended} OSS) or relax the budget")
    return tuple(notes)


def build_sizing(spec: ClusterSpec) -> tuple[Sizing, list[SpecIssue]]:
    """Every layer's limit, the bottlenecks and what follows from them: per-client rates, the checkpoint,
    stage-in and the recommended OSS count. Issues: a checkpoint budget no layer can meet."""
    lu = spec.lustre
    gpus, nodes = gpu_count(spec), sum(p.nodes for p in spec.compute.pools)
    per_gpu, single_node_demand, demand_src = read_demand(spec)
    demand_read = gpus * per_gpu
    layers = build_layers(spec)
    supply = supply_rate(layers)
    node_limit = node_limit_GBps(spec)
    checkpoint = build_checkpoint(spec, supply)
    stage_GBps, stage_bottleneck = stage_in(spec, supply)
    rec = recommended_oss(spec, demand_read=demand_read, required_write=checkpoint.required_write_GBps)
    mdt_rate = knowledge.load().mdt_rates.by_media()[lu.mds.mdts.device.kind]
    sizing = Sizing(
        layers=layers,
        read_bottleneck=supply.read_bound,
        write_bottleneck=supply.write_bound,
        aggregate_read_GBps=supply.read_GBps,
        aggregate_write_GBps=supply.write_GBps,
        demand_read_GBps=demand_read,
        per_client_read_GBps=min(node_limit, supply.read_GBps / nodes),
        per_client_write_GBps=min(node_limit, supply.write_GBps / nodes),
        single_client_read_GBps=min(node_limit, supply.read_GBps),
        single_client_write_GBps=min(node_limit, supply.write_GBps),
        gpus_total=gpus,
        gpus_fed=math.floor(supply.read_GBps / per_gpu + 1e-9) if per_gpu > 0 else gpus,
        gpus_fed_bound=fed_bound(supply.read_bound),
        read_per_gpu_GBps=per_gpu,
        single_node_demand_read_GBps=single_node_demand,
        read_demand_source=demand_src,
        metadata_create_ops=lu.mds.nodes * lu.mds.mdts.per_node * mdt_rate,
        checkpoint=checkpoint,
        stage_in_s=spec.workload.dataset_TB * 1e12 / (stage_GBps * 1e9),
        stage_in_GBps=stage_GBps,
        stage_in_bottleneck=stage_bottleneck,
        objectstore_GBps=objectstore_rates(spec)[0],
        recommended_oss_nodes=rec,
        headroom_read=supply.read_GBps / demand_read if demand_read else math.inf,
        notes=sizing_notes(
            spec, supply=supply, demand_read=demand_read, recommended=rec,
            single_read=min(node_limit, supply.read_GBps), meets_budget=checkpoint.meets_budget,
        ),
    )
    return sizing, checkpoint_issues(spec)
