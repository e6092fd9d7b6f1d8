"""Acceptance targets: for every check the suites run, the expected value, warn/fail thresholds and why."""

from __future__ import annotations

from kiln import knowledge
from kiln.knowledge import GpuModel
from kiln.plan.groups import COMPUTE, LUSTRE_CLIENTS, OBJECTSTORE, pool_group
from kiln.plan.model import AcceptanceTarget, Scope, Sizing
from kiln.plan.sizing import lnet_factor, objectstore_rates, replica_count, routed_only, router_link
from kiln.spec import catalog
from kiln.spec.models import ClusterSpec, ComputePool

# Conformance checks compare state with the plan; their metric is the number of mismatches.
CONFORMANCE = {
    "conformance.lnet": ("lustre", LUSTRE_CLIENTS, "LNet networks and NIDs on every host match the plan"),
    "conformance.lustre_tunables": (
        "lustre",
        LUSTRE_CLIENTS,
        "every planned Lustre tunable reads back with its value",
    ),
    "conformance.lustre_mounts": (
        "lustre",
        LUSTRE_CLIENTS,
        "the filesystem is mounted with the planned options",
    ),
    "conformance.lustre_layouts": ("lustre", LUSTRE_CLIENTS, "directory layouts (lfs getstripe) match the plan"),
    "conformance.lustre_quotas": (
        "lustre",
        LUSTRE_CLIENTS,
        "the default user, group and project quotas (lfs quota -U/-G/-P) match the plan",
    ),
    "conformance.nccl_conf": ("", COMPUTE, "/etc/nccl.conf holds the plan's NCCL environment"),
    "conformance.rdma_ports": ("rdma", COMPUTE, "every RDMA port is ACTIVE at the NIC's rate"),
    "conformance.gpus": ("gpu", COMPUTE, "the planned GPUs are present with persistence mode on"),
    "conformance.objectstore_services": (
        "objectstore",
        OBJECTSTORE,
        "SeaweedFS master, volume, filer and S3 run",
    ),
    "conformance.objectstore_buckets": ("objectstore", OBJECTSTORE, "the plan's buckets exist"),
    "conformance.sysctls": ("", "all", "the kit's sysctls read back with their planned values"),
    "security.objectstore_exposure": (
        "objectstore",
        COMPUTE,
        "a compute host reaches the S3 gateway and not the SeaweedFS master, volume or filer ports",
    ),
}


def _perf(
    spec: ClusterSpec,
    *,
    check: str,
    metric: str,
    unit: str,
    expected: float,
    why: str,
    scope: Scope,
    group: str,
    requires: tuple[str, ...] = (),
    gate: float | None = None,
    env: tuple[tuple[str, str], ...] = (),
) -> AcceptanceTarget:
    """A higher-is-better target. With a production `gate` (the figure a health check fails a node below),
    the target fails below the gate, warns below expected × warn_fraction (never below the gate), and
    expects at least the gate."""
    a = spec.acceptance
    fail = expected * a.fail_fraction
    if gate is not None:
        expected = max(expected, gate)
        fail = gate
    warn = max(expected * a.warn_fraction, fail)
    return AcceptanceTarget(
        check=check, metric=metric, unit=unit, expected=round(expected, 4), warn=round(warn, 4), fail=round(fail, 4),
        why=why, scope=scope, higher_is_better=True, group=group, requires=requires, env=env,
    )


def nccl_algorithm(gpu_nvswitch: bool, gpu_pcie_gen: int, inter: bool) -> str:
    """The NCCL_ALGO the all-reduce checks force: Ring across nodes (what the inter-node target models);
    NVLS inside an NVSwitch node with a PCIe Gen5 host link (H100/H200, B200: NCCL's default there, what
    production gates measure); Ring elsewhere."""
    if not inter and gpu_nvswitch and gpu_pcie_gen >= 5:
        return "NVLS"
    return "Ring"


def conformance_targets(spec: ClusterSpec) -> list[AcceptanceTarget]:
    """One per conformance check, none for the object store's where kiln does not deploy it (external)."""
    out = []
    for check, (req, group, why) in CONFORMANCE.items():
        store_check = check.startswith(("conformance.objectstore", "security.objectstore"))
        if spec.objectstore.backend == "external" and store_check:
            continue
        out.append(AcceptanceTarget(
            check=check, metric="mismatches", unit="count", expected=0, warn=0, fail=0, why=why, scope="host",
            higher_is_better=False, group=group, requires=(req,) if req else (),
        ))
    return out


def fabric_targets(spec: ClusterSpec, pool: ComputePool, group: str) -> list[AcceptanceTarget]:
    """A GPU pool's RDMA bandwidth per rail (perftest) and its NCCL all-reduce inside a node and across nodes."""
    kb = knowledge.load()
    assert pool.gpu is not None and pool.compute_rails is not None
    rail = catalog.nics(spec)[pool.compute_rails.nic]
    gpu = catalog.gpus(spec)[pool.gpu.model]
    rdma = spec.fabric.kind != "tcp"
    out = []
    if rdma and pool.compute_rails.count:
        pay, ib_gate = kb.factor("rdma_payload"), kb.factor("ib_write_bw_gate")
        out += [
            _perf(
                spec, check=f"fabric.ib_{op}_bw", metric="bw_avg", unit="GB/s", expected=rail.link_GBps * pay,
                why=f"one {rail.name} rail ({rail.link_Gbps:g} Gb/s) × rdma_payload {pay:g}, per rail between "
                f"two nodes (perftest); fails below the production gate {ib_gate:g} × line rate "
                f"({kb.factors['ib_write_bw_gate'].source})",
                scope="pair", group=group, requires=("rdma",), gate=rail.link_GBps * ib_gate,
            )
            for op in ("write", "read")
        ]
    out += _intra_target(spec, pool, group, gpu)
    if rdma and pool.nodes > 1 and pool.compute_rails.count:
        far = kb.factor("fabric_allreduce")
        out.append(_perf(
            spec, check="fabric.nccl_allreduce_inter", metric="busbw", unit="GB/s",
            expected=pool.compute_rails.count * rail.link_GBps * far,
            why=f"{pool.compute_rails.count} rails × {rail.link_GBps:g} GB/s line rate × fabric_allreduce {far:g} "
            "(applied once: it holds the link's payload losses); nccl-tests across all nodes of the pool "
            "with NCCL_ALGO=Ring",
            scope="aggregate", group=group, requires=("gpu", "rdma"),
            env=(("NCCL_ALGO", nccl_algorithm(gpu.nvswitch, gpu.pcie_gen, inter=True)),),
        ))
    return out


def _pcie_copy(gpu: GpuModel) -> tuple[float, str] | None:
    """(GB/s, how) a copy over the GPU's PCIe x16 link reaches: the link's rate per direction × pcie_h2d; None
    where the kit has no rate for its generation."""
    kb = knowledge.load()
    if gpu.pcie_gen not in kb.pcie.rates:
        return None
    rate = kb.pcie.rates[gpu.pcie_gen] * kb.factor("pcie_h2d")
    return rate, f"PCIe Gen{gpu.pcie_gen} x16 ({kb.pcie.source}) × pcie_h2d"


def _intra_target(spec: ClusterSpec, pool: ComputePool, group: str, gpu: GpuModel) -> list[AcceptanceTarget]:
    """all_reduce_perf inside one node of a pool of several GPUs: the GPU's own measured busbw, or, for a GPU without
    NVLink (its ring crosses each GPU's PCIe link), that link × pcie_h2d; failing below the GPU's own production
    gate where one is published."""
    assert pool.gpu is not None
    if pool.gpu.count < 2:
        return []
    algo = nccl_algorithm(gpu.nvswitch, gpu.pcie_gen, inter=False)
    expected: float  # a catalog figure kept as written (460 stays 460 in the plan JSON)
    if gpu.nccl_intra_busbw_GBps is not None:
        expected, how = gpu.nccl_intra_busbw_GBps, f"{gpu.nccl_intra_busbw_GBps:g} GB/s"
    elif link := _pcie_copy(gpu):
        expected, how = link[0], f"derived, no NVLink: the ring crosses each GPU's {link[1]}"
    else:
        return []
    gate = gpu.nccl_intra_gate_GBps
    return [_perf(
        spec, check="fabric.nccl_allreduce_intra", metric="busbw", unit="GB/s", expected=expected,
        why=f"{gpu.name}, NCCL_ALGO={algo}: {how}"
        + (f", fails below the production gate {gate:g} GB/s" if gate else "") + f" ({gpu.figures_source})",
        scope="node", group=group, requires=("gpu",), env=(("NCCL_ALGO", algo),), gate=gate,
    )]


def gpu_targets(spec: ClusterSpec, pool: ComputePool, group: str) -> list[AcceptanceTarget]:
    """A GPU pool's host-to-device and device-to-host copy bandwidth: the GPU's published measurement, or its PCIe
    link × pcie_h2d; failing below the GPU's own production gate where one is published."""
    assert pool.gpu is not None
    gpu = catalog.gpus(spec)[pool.gpu.model]
    if gpu.h2d_GBps is not None:
        expected, how = float(gpu.h2d_GBps), f"{gpu.name} measured {gpu.h2d_GBps:g} GB/s"
    elif link := _pcie_copy(gpu):
        expected, how = link
    else:
        return []
    gate = gpu.h2d_gate_GBps
    why = how + (f"; fails below the production gate {gate:g} GB/s" if gate else "") + f" ({gpu.figures_source})"
    return [
        _perf(
            spec, check=f"gpu.{op}_bw", metric="bw", unit="GB/s", expected=expected, why=why,
            scope="host", group=group, requires=("gpu",), gate=gate,
        )
        for op in ("h2d", "d2h")
    ]


def local_nvme_targets(spec: ClusterSpec, pool: ComputePool, group: str) -> list[AcceptanceTarget]:
    """fio on a pool's local NVMe drives, read and write, where it has them."""
    if pool.local_nvme is None or not pool.local_nvme.count:
        return []
    kb = knowledge.load()
    dev = kb.nvme[pool.local_nvme.device]
    f = kb.factor("local_nvme_fio")
    return [
        _perf(
            spec, check=f"storage.fio_local_{op}", metric="bw", unit="GB/s",
            expected=pool.local_nvme.count * rate * f,
            why=f"{pool.local_nvme.count} × {dev.name} {op} {rate:g} GB/s × local_nvme_fio {f:g}",
            scope="host", group=group, requires=("nvme",),
        )
        for op, rate in (("read", dev.read_GBps), ("write", dev.write_GBps))
    ]


def pool_targets(spec: ClusterSpec) -> list[AcceptanceTarget]:
    """The fabric, GPU and local-drive targets of every GPU pool (a storage-only client pool has none: its
    storage checks are the clients')."""
    out = []
    for pool in spec.compute.pools:
        if pool.gpu is None or pool.compute_rails is None:
            continue
        group = pool_group(pool.name)
        out += fabric_targets(spec, pool, group) + gpu_targets(spec, pool, group)
        out += local_nvme_targets(spec, pool, group)
    return out


def network_targets(spec: ClusterSpec) -> list[AcceptanceTarget]:
    """iperf3 between host pairs on the storage network."""
    storage_nic = catalog.storage_ports(spec, spec.compute.pools[0])[0]
    return [_perf(
        spec, check="network.iperf3", metric="throughput", unit="Gb/s",
        expected=storage_nic.link_Gbps * knowledge.load().factor("tcp_payload"),
        why=f"one storage NIC ({storage_nic.name}, {storage_nic.link_Gbps:g} Gb/s) × tcp_payload; iperf3 between host "
        "pairs on the storage network",
        scope="pair", group=COMPUTE,
    )]


def lustre_bandwidth_targets(spec: ClusterSpec, sizing: Sizing) -> list[AcceptanceTarget]:
    """fio from one client and IOR from all, read and write, at the sizing model's figures."""
    f_stream = knowledge.load().factor("client_stream")
    out = []
    for op, single, agg in (
        ("read", sizing.single_client_read_GBps, sizing.aggregate_read_GBps),
        ("write", sizing.single_client_write_GBps, sizing.aggregate_write_GBps),
    ):
        bn = sizing.read_bottleneck if op == "read" else sizing.write_bottleneck
        out += [
            _perf(
                spec, check=f"storage.fio_lustre_{op}", metric="bw", unit="GB/s", expected=single,
                why=f"one client alone, a streaming reader: min(its storage link × client_stream {f_stream:g}, its "
                f"storage NICs × LNet factors, the filesystem's {op} supply); fio runs enough processes for it "
                "(reader.stream_process_GBps)",
                scope="host", group=LUSTRE_CLIENTS, requires=("lustre",),
            ),
            _perf(
                spec, check=f"storage.ior_easy_{op}", metric="bw", unit="GB/s", expected=agg,
                why=f"all clients, file per process: the sizing model's aggregate {op} ({bn} is the bottleneck)",
                scope="aggregate", group=LUSTRE_CLIENTS, requires=("lustre",),
            ),
        ]
    return out


def lnet_selftest_target(spec: ClusterSpec) -> AcceptanceTarget:
    """One client to one OSS over LNet: the narrower storage link of the pair (and the routers' where the path
    crosses them) × the LNet factors."""
    kb = knowledge.load()
    f_lnet, names = lnet_factor(spec)
    oss_link = spec.lustre.oss.nics.count * catalog.nics(spec)[spec.lustre.oss.nics.nic].link_GBps
    client_link = min(sum(m.link_GBps for m in catalog.storage_ports(spec, p)) for p in spec.compute.pools)
    pair_link = min(client_link, oss_link)
    pair_how = f"min(client {client_link:g}, OSS {oss_link:g} GB/s of storage links) × {' × '.join(names)}"
    if routed_only(spec):
        # The pair's traffic crosses the routers (LNet spreads it over every live gateway).
        rtr_link, _ = router_link(spec)
        pair_link = min(pair_link, rtr_link) * kb.factor("lnet_router")
        pair_how = (
            f"min(client {client_link:g}, OSS {oss_link:g}, routers {rtr_link:g} GB/s of links) × "
            f"{' × '.join(names)} × lnet_router (the path crosses an LNet router)"
        )
    return _perf(
        spec, check="storage.lnet_selftest", metric="bw", unit="GB/s", expected=pair_link * f_lnet,
        why=f"one client to one OSS over LNet (lst brw write 1M): {pair_how}",
        scope="pair", group=LUSTRE_CLIENTS, requires=("lustre",),
    )


def lustre_targets(spec: ClusterSpec, sizing: Sizing) -> list[AcceptanceTarget]:
    """The Lustre storage targets: bandwidth, LNet self-test and metadata creates."""
    mdt_source = knowledge.load().mdt_rates.source
    mdtest = _perf(
        spec, check="storage.mdtest_create", metric="creates", unit="ops/s", expected=sizing.metadata_create_ops,
        why=f"{spec.lustre.mds.nodes * spec.lustre.mds.mdts.per_node} MDTs × {mdt_source}",
        scope="aggregate", group=LUSTRE_CLIENTS, requires=("lustre",),
    )
    return [*lustre_bandwidth_targets(spec, sizing), lnet_selftest_target(spec), mdtest]


def objectstore_targets(spec: ClusterSpec) -> list[AcceptanceTarget]:
    """S3 GET and PUT with many streams, at the object store's planned rates; a SeaweedFS store kiln deploys also
    restarts its volume servers in turn under load without a failed request, where it keeps two copies or more and
    has a server more than copies (with one copy a restart makes the server's volumes unreadable: no target)."""
    get, put, how = objectstore_rates(spec)
    group = OBJECTSTORE if spec.objectstore.backend == "seaweedfs" else COMPUTE
    out = [
        _perf(
            spec, check=f"objectstore.s3_{op}", metric="throughput", unit="GB/s", expected=rate,
            why=f"{op.upper()}, many streams: {how}", scope="aggregate", group=group, requires=("objectstore",),
        )
        for op, rate in (("get", get), ("put", put))
    ]
    copies = replica_count(spec.objectstore.replication)
    if spec.objectstore.backend == "seaweedfs" and copies >= 2 and spec.objectstore.nodes > copies:
        out.append(AcceptanceTarget(
            check="objectstore.rolling_restart", metric="failed requests", unit="count", expected=0, warn=0, fail=0,
            why=f"each volume server restarted in turn under S3 load, the next once the master lists it again and "
            f"every volume has its {copies} copies (replication {spec.objectstore.replication}): no client request "
            "fails (docs/runbooks/rolling-upgrade.md)",
            scope="aggregate", higher_is_better=False, group=group, requires=("objectstore",),
        ))
    return out


def build_targets(spec: ClusterSpec, sizing: Sizing) -> tuple[AcceptanceTarget, ...]:
    """The acceptance targets of conformance, the fabric, GPUs, network, Lustre and the object store (the
    monitoring and dataflow targets come from their own sections)."""
    return (
        *conformance_targets(spec),
        *pool_targets(spec),
        *network_targets(spec),
        *lustre_targets(spec, sizing),
        *objectstore_targets(spec),
    )
