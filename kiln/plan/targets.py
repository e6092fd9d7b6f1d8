"""Acceptance targets: for every check the suites run, the expected value, warn/fail thresholds and why."""

from __future__ import annotations

from kiln import knowledge
from kiln.plan.groups import COMPUTE, LUSTRE_CLIENTS, OBJECTSTORE, pool_group
from kiln.plan.model import AcceptanceTarget, Scope, Sizing
from kiln.plan.sizing import lnet_factor, objectstore_rates, routed_only, router_link
from kiln.spec import catalog
from kiln.spec.models import ClusterSpec

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
        check, metric, unit, round(expected, 4), round(warn, 4), round(fail, 4), why, scope, True, group, requires,
        env,
    )


def nccl_algorithm(gpu_nvswitch: bool, gpu_pcie_gen: int, inter: bool) -> str:
    """The NCCL_ALGO the all-reduce checks force: Ring across nodes (what the inter-node target models);
    NVLS inside an NVSwitch node of the Hopper generation (PCIe Gen5: H100/H200, NCCL's default there,
    what production gates measure); Ring elsewhere."""
    if not inter and gpu_nvswitch and gpu_pcie_gen >= 5:
        return "NVLS"
    return "Ring"


def build_targets(spec: ClusterSpec, sizing: Sizing) -> tuple[AcceptanceTarget, ...]:
    kb = knowledge.load()
    out: list[AcceptanceTarget] = []
    for check, (req, group, why) in CONFORMANCE.items():
        store_check = check.startswith(("conformance.objectstore", "security.objectstore"))
        if spec.objectstore.backend == "external" and store_check:
            continue
        out.append(AcceptanceTarget(
            check, "mismatches", "count", 0, 0, 0, why, "host", False, group, (req,) if req else (),
        ))
    rdma = spec.fabric.kind != "tcp"
    nic_models, gpu_models = catalog.nics(spec), catalog.gpus(spec)
    pay = kb.factor("rdma_payload")
    ib_gate = kb.factor("ib_write_bw_gate")
    for pool in spec.compute.pools:
        g = pool_group(pool.name)
        if pool.gpu is None or pool.compute_rails is None:
            continue  # a storage-only client pool: no GPU or rail checks (its storage checks are the clients')
        rail = nic_models[pool.compute_rails.nic]
        if rdma and pool.compute_rails.count:
            for op in ("write", "read"):
                out.append(
                    _perf(
                        spec,
                        f"fabric.ib_{op}_bw",
                        "bw_avg",
                        "GB/s",
                        rail.link_GBps * pay,
                        f"one {rail.name} rail ({rail.link_Gbps:g} Gb/s) × rdma_payload {pay:g}, per rail between "
                        f"two nodes (perftest); fails below the production gate {ib_gate:g} × line rate "
                        f"({kb.factors['ib_write_bw_gate'].source})",
                        "pair",
                        g,
                        ("rdma",),
                        gate=rail.link_GBps * ib_gate,
                    )
                )
        gpu = gpu_models[pool.gpu.model]
        intra_algo = nccl_algorithm(gpu.nvswitch, gpu.pcie_gen, inter=False)
        if pool.gpu.count > 1:
            out.append(
                _perf(
                    spec,
                    "fabric.nccl_allreduce_intra",
                    "busbw",
                    "GB/s",
                    gpu.nccl_intra_busbw_GBps,
                    f"{gpu.name}, NCCL_ALGO={intra_algo}: {gpu.source}",
                    "node",
                    g,
                    ("gpu",),
                    env=(("NCCL_ALGO", intra_algo),),
                )
            )
        if rdma and pool.nodes > 1 and pool.compute_rails.count:
            far = kb.factor("fabric_allreduce")
            bw = pool.compute_rails.count * rail.link_GBps * far
            out.append(
                _perf(
                    spec,
                    "fabric.nccl_allreduce_inter",
                    "busbw",
                    "GB/s",
                    bw,
                    f"{pool.compute_rails.count} rails × {rail.link_GBps:g} GB/s line rate × fabric_allreduce {far:g} "
                    "(applied once: it holds the link's payload losses); nccl-tests across all nodes of the pool "
                    "with NCCL_ALGO=Ring",
                    "aggregate",
                    g,
                    ("gpu", "rdma"),
                    env=(("NCCL_ALGO", nccl_algorithm(gpu.nvswitch, gpu.pcie_gen, inter=True)),),
                )
            )
        gates = kb.workload.pcie_h2d_gate_GBps
        h2d_gate = gates.rates.get(gpu.pcie_gen)
        pcie = kb.pcie.rates[gpu.pcie_gen] * kb.factor("pcie_h2d")
        for op in ("h2d", "d2h"):
            out.append(
                _perf(
                    spec,
                    f"gpu.{op}_bw",
                    "bw",
                    "GB/s",
                    pcie,
                    f"PCIe Gen{gpu.pcie_gen} x16 ({kb.pcie.source}) × pcie_h2d"
                    + (f"; fails below the production gate {h2d_gate:g} GB/s ({gates.source})" if h2d_gate else ""),
                    "host",
                    g,
                    ("gpu",),
                    gate=h2d_gate,
                )
            )
        if pool.local_nvme is not None and pool.local_nvme.count:
            dev = kb.nvme[pool.local_nvme.device]
            f = kb.factor("local_nvme_fio")
            for op, rate in (("read", dev.read_GBps), ("write", dev.write_GBps)):
                out.append(
                    _perf(
                        spec,
                        f"storage.fio_local_{op}",
                        "bw",
                        "GB/s",
                        pool.local_nvme.count * rate * f,
                        f"{pool.local_nvme.count} × {dev.name} {op} {rate:g} GB/s × local_nvme_fio {f:g}",
                        "host",
                        g,
                        ("nvme",),
                    )
                )
    storage_nic = catalog.storage_ports(spec, spec.compute.pools[0])[0]
    iperf = storage_nic.link_Gbps * kb.factor("tcp_payload")
    out.append(
        _perf(
            spec,
            "network.iperf3",
            "throughput",
            "Gb/s",
            iperf,
            f"one storage NIC ({storage_nic.name}, {storage_nic.link_Gbps:g} Gb/s) × tcp_payload; iperf3 between host "
            "pairs on the storage network",
            "pair",
            COMPUTE,
        )
    )
    for op, single, agg in (
        ("read", sizing.single_client_read_GBps, sizing.aggregate_read_GBps),
        ("write", sizing.single_client_write_GBps, sizing.aggregate_write_GBps),
    ):
        out.append(
            _perf(
                spec,
                f"storage.fio_lustre_{op}",
                "bw",
                "GB/s",
                single,
                f"one client alone: min(its storage link × client_single {kb.factor('client_single'):g}, its storage "
                f"NICs × LNet factors, the filesystem's {op} supply)",
                "host",
                LUSTRE_CLIENTS,
                ("lustre",),
            )
        )
        bn = sizing.read_bottleneck if op == "read" else sizing.write_bottleneck
        out.append(
            _perf(
                spec,
                f"storage.ior_easy_{op}",
                "bw",
                "GB/s",
                agg,
                f"all clients, file per process: the sizing model's aggregate {op} ({bn} is the bottleneck)",
                "aggregate",
                LUSTRE_CLIENTS,
                ("lustre",),
            )
        )
    f_lnet, names = lnet_factor(spec)
    nic_models = catalog.nics(spec)
    oss_link = spec.lustre.oss.nics.count * nic_models[spec.lustre.oss.nics.nic].link_GBps
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
    out.append(
        _perf(
            spec,
            "storage.lnet_selftest",
            "bw",
            "GB/s",
            pair_link * f_lnet,
            f"one client to one OSS over LNet (lst brw write 1M): {pair_how}",
            "pair",
            LUSTRE_CLIENTS,
            ("lustre",),
        )
    )
    out.append(
        _perf(
            spec,
            "storage.mdtest_create",
            "creates",
            "ops/s",
            sizing.metadata_create_ops,
            f"{spec.lustre.mds.nodes * spec.lustre.mds.mdts.per_node} MDTs × {kb.mdt_rates.source}",
            "aggregate",
            LUSTRE_CLIENTS,
            ("lustre",),
        )
    )
    get, put, how = objectstore_rates(spec)
    group = OBJECTSTORE if spec.objectstore.backend == "seaweedfs" else COMPUTE
    out.append(
        _perf(
            spec,
            "objectstore.s3_get",
            "throughput",
            "GB/s",
            get,
            f"GET, many streams: {how}",
            "aggregate",
            group,
            ("objectstore",),
        )
    )
    out.append(
        _perf(
            spec,
            "objectstore.s3_put",
            "throughput",
            "GB/s",
            put,
            f"PUT, many streams: {how}",
            "aggregate",
            group,
            ("objectstore",),
        )
    )
    return tuple(out)
