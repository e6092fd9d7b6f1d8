"""Acceptance targets: for every check the suites run, the expected value, warn/fail thresholds and why."""

from __future__ import annotations

from kiln import knowledge
from kiln.plan.model import Scope, Sizing, Target
from kiln.plan.sizing import lnet_factor, objectstore_rates
from kiln.spec.models import ClusterSpec

# Conformance checks compare state with the plan; their metric is the number of mismatches.
CONFORMANCE = {
    "conformance.lnet": ("lustre", "kiln_lustre_clients", "LNet networks and NIDs on every host match the plan"),
    "conformance.lustre_tunables": (
        "lustre",
        "kiln_lustre_clients",
        "every planned Lustre tunable reads back with its value",
    ),
    "conformance.lustre_mounts": (
        "lustre",
        "kiln_lustre_clients",
        "the filesystem is mounted with the planned options",
    ),
    "conformance.lustre_layouts": ("lustre", "kiln_lustre_clients", "directory layouts (lfs getstripe) match the plan"),
    "conformance.nccl_conf": ("", "kiln_compute", "/etc/nccl.conf holds the plan's NCCL environment"),
    "conformance.rdma_ports": ("rdma", "kiln_compute", "every RDMA port is ACTIVE at the NIC's rate"),
    "conformance.gpus": ("gpu", "kiln_compute", "the planned GPUs are present with persistence mode on"),
    "conformance.objectstore_services": (
        "objectstore",
        "kiln_objectstore",
        "SeaweedFS master, volume, filer and S3 run",
    ),
    "conformance.objectstore_buckets": ("objectstore", "kiln_objectstore", "the plan's buckets exist"),
    "conformance.sysctls": ("", "all", "the kit's sysctls read back with their planned values"),
    "security.objectstore_exposure": (
        "objectstore",
        "kiln_compute",
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
) -> Target:
    a = spec.acceptance
    return Target(
        check,
        metric,
        unit,
        round(expected, 4),
        round(expected * a.warn_fraction, 4),
        round(expected * a.fail_fraction, 4),
        why,
        scope,
        True,
        group,
        requires,
    )


def build_targets(spec: ClusterSpec, sizing: Sizing) -> tuple[Target, ...]:
    kb = knowledge.load()
    out: list[Target] = []
    for check, (req, group, why) in CONFORMANCE.items():
        store_check = check.startswith(("conformance.objectstore", "security.objectstore"))
        if spec.objectstore.backend == "external" and store_check:
            continue
        out.append(Target(check, "mismatches", "count", 0, 0, 0, why, "host", False, group, (req,) if req else ()))
    rdma = spec.fabric.kind != "tcp"
    pay = kb.factor("rdma_payload")
    for pool in spec.compute.pools:
        g = f"kiln_pool_{pool.name.replace('-', '_')}"
        rail = kb.nics[pool.compute_rails.nic]
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
                        "two nodes (perftest)",
                        "pair",
                        g,
                        ("rdma",),
                    )
                )
        gpu = kb.gpus[pool.gpu.model]
        if pool.gpu.count > 1:
            out.append(
                _perf(
                    spec,
                    "fabric.nccl_allreduce_intra",
                    "busbw",
                    "GB/s",
                    gpu.nccl_intra_busbw_GBps,
                    f"{gpu.name}: {gpu.source}",
                    "node",
                    g,
                    ("gpu",),
                )
            )
        if rdma and pool.nodes > 1 and pool.compute_rails.count:
            bw = pool.compute_rails.count * rail.link_GBps * pay * kb.factor("fabric_allreduce")
            out.append(
                _perf(
                    spec,
                    "fabric.nccl_allreduce_inter",
                    "busbw",
                    "GB/s",
                    bw,
                    f"{pool.compute_rails.count} rails × {rail.link_GBps:g} GB/s × rdma_payload × fabric_allreduce; "
                    "nccl-tests across all nodes of the pool",
                    "aggregate",
                    g,
                    ("gpu", "rdma"),
                )
            )
        pcie = kb.pcie.rates[gpu.pcie_gen] * kb.factor("pcie_h2d")
        for op in ("h2d", "d2h"):
            out.append(
                _perf(
                    spec,
                    f"gpu.{op}_bw",
                    "bw",
                    "GB/s",
                    pcie,
                    f"PCIe Gen{gpu.pcie_gen} x16 ({kb.pcie.source}) × pcie_h2d",
                    "host",
                    g,
                    ("gpu",),
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
    storage_nic = kb.nics[spec.compute.pools[0].storage_nics.nic]
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
            "kiln_compute",
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
                f"one client alone: min(its storage NICs, the filesystem's {op} supply)",
                "host",
                "kiln_lustre_clients",
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
                "kiln_lustre_clients",
                ("lustre",),
            )
        )
    f_lnet, names = lnet_factor(spec)
    oss_link = spec.lustre.oss.nics.count * kb.nics[spec.lustre.oss.nics.nic].link_GBps
    client_link = min(p.storage_nics.count * kb.nics[p.storage_nics.nic].link_GBps for p in spec.compute.pools)
    out.append(
        _perf(
            spec,
            "storage.lnet_selftest",
            "bw",
            "GB/s",
            min(client_link, oss_link) * f_lnet,
            f"one client to one OSS over LNet (lst brw write 1M): min(client {client_link:g}, OSS {oss_link:g} "
            f"GB/s of storage links) × {' × '.join(names)}",
            "pair",
            "kiln_lustre_clients",
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
            "kiln_lustre_clients",
            ("lustre",),
        )
    )
    get, put, how = objectstore_rates(spec)
    group = "kiln_objectstore" if spec.objectstore.backend == "seaweedfs" else "kiln_compute"
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
