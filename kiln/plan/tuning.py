"""Derived Lustre, LNet and NCCL tuning: each value from a rule in kiln/knowledge/tuning.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from kiln import knowledge
from kiln.plan.model import NcclPool, Side, Tunable
from kiln.spec.checks import rail_devices
from kiln.spec.errors import SpecIssue, suggest
from kiln.spec.models import ClusterSpec, ComputePool


@dataclass(frozen=True, slots=True)
class _Rule:
    """One tunable id of tuning.yaml with where and how it is applied resolved."""

    param: str
    side: Side
    apply: str
    reason: str
    source: str
    rule: knowledge.Rule | None = None  # Lustre, LNet and NCCL rules: the constants they derive from
    value: int | str | None = None  # host settings: the value itself
    namespaced: bool = False


@cache
def _rules() -> dict[str, _Rule]:
    t = knowledge.load().tuning
    out: dict[str, _Rule] = {}
    for tid, r in t.lustre.items():
        assert r.param and r.side and r.apply, f"tuning.yaml lustre.{tid} needs param, side and apply"
        out[tid] = _Rule(r.param, r.side, r.apply, r.reason, r.source, rule=r)
    for tid, r in t.lnet.items():
        out[tid] = _Rule(f"{r.module}.{r.option}", "lnet", "module_option", r.reason, r.source, rule=r)
    for name, r in t.nccl.items():
        out[f"nccl.{name}"] = _Rule(name, "nccl", "env", r.reason, r.source, rule=r)
    for name, sc in t.host.sysctls.items():
        out[f"host.sysctl.{name}"] = _Rule(name, "host", "sysctl", sc.reason, sc.source, value=sc.value,
                                           namespaced=sc.namespaced)
    for name, h in t.host.others().items():
        out[f"host.{name}"] = _Rule(name, "host", "host", h.reason, h.source, value=h.value)
    return out


def _r(tid: str) -> knowledge.Rule:
    rule = _rules()[tid].rule
    assert rule is not None, f"{tid} is a host setting, not a derived rule"
    return rule


def _tunable(tid: str, value: int | float | str, pool: str | None = None) -> Tunable:
    r = _rules()[tid]
    return Tunable(tid, r.param, value, r.side, r.apply, " ".join(r.reason.split()), r.source, False, pool)


def is_flash(spec: ClusterSpec) -> bool:
    return spec.lustre.oss.osts.device.kind in ("nvme", "ssd")


def brw_size_MiB(spec: ClusterSpec) -> int:
    """The OSTs' brw_size in MiB after overrides (clients size their RPCs from it)."""
    value = spec.overrides.get("server.obdfilter.brw_size")
    if isinstance(value, int):
        return value
    return _r("server.obdfilter.brw_size").integer("flash" if is_flash(spec) else "disk")


def server_tunables(spec: ClusterSpec, client_mod_rpcs: int) -> list[Tunable]:
    brw = _r("server.obdfilter.brw_size").integer("flash" if is_flash(spec) else "disk")
    wt = _r("server.obdfilter.writethrough_cache_enable")
    return [
        _tunable("server.obdfilter.brw_size", brw),
        _tunable("server.obdfilter.read_cache_enable", _r("server.obdfilter.read_cache_enable").constant("value")),
        _tunable("server.obdfilter.writethrough_cache_enable", wt.constant("checkpointing")),
        _tunable(
            "server.obdfilter.readcache_max_filesize", _r("server.obdfilter.readcache_max_filesize").constant("value")
        ),
        _tunable("server.mdt.max_mod_rpcs_per_client", client_mod_rpcs),
    ]


def client_tunables(spec: ClusterSpec, pool: ComputePool, brw_MiB: int) -> list[Tunable]:
    """Client values for one compute pool (they depend on its RAM, CPUs and GPUs)."""
    name = pool.name
    ram_MiB = pool.ram_GiB * 1024
    rif = _r("client.osc.max_rpcs_in_flight")
    big = pool.ram_GiB >= rif.number("large_client_min_ram_GiB")
    rpcs = rif.integer("large_client") if big else rif.integer("default")
    dm = _r("client.osc.max_dirty_mb")
    dirty = min(
        dm.integer("rpc_multiple") * brw_MiB * rpcs, dm.integer("cap_MiB"), int(ram_MiB * dm.number("ram_fraction"))
    )
    ra = _r("client.llite.max_read_ahead_mb")
    ra_total = min(
        int(ram_MiB * ra.number("ram_cap_fraction")),
        max(ra.integer("floor_MiB"), pool.gpu.count * ra.integer("per_gpu_stream_MiB")),
    )
    ra_file_rule = _r("client.llite.max_read_ahead_per_file_mb")
    ra_file = min(ra_file_rule.integer("cap_MiB"), int(ra_total * ra_file_rule.number("fraction_of_total")))
    lru = _r("client.ldlm.lru_size")

    def const(tid: str, key: str = "value") -> int | float | str:
        return _r(tid).constant(key)

    out = [
        _tunable("client.osc.max_pages_per_rpc", f"{brw_MiB}M", name),
        _tunable("client.osc.max_rpcs_in_flight", rpcs, name),
        _tunable("client.osc.max_dirty_mb", dirty, name),
        _tunable("client.osc.checksums", const("client.osc.checksums"), name),
        _tunable("client.mount.options", const("client.mount.options"), name),
        _tunable("client.llite.max_read_ahead_mb", ra_total, name),
        _tunable("client.llite.max_read_ahead_per_file_mb", ra_file, name),
        _tunable("client.llite.statahead_max", const("client.llite.statahead_max", "dataset_trees"), name),
        _tunable("client.mdc.max_rpcs_in_flight", const("client.mdc.max_rpcs_in_flight"), name),
        _tunable("client.mdc.max_mod_rpcs_in_flight", const("client.mdc.max_mod_rpcs_in_flight"), name),
        _tunable("client.ldlm.lru_max_age", const("client.ldlm.lru_max_age"), name),
    ]
    if pool.ram_GiB > lru.number("min_ram_GiB"):
        out.append(_tunable("client.ldlm.lru_size", lru.integer("per_cpu") * pool.cpu_cores, name))
    return out


def host_tunables() -> list[Tunable]:
    """Kernel and host settings every kiln host gets (sysctls, memlock, THP, CPU governor)."""
    return [_tunable(tid, r.value) for tid, r in _rules().items() if r.side == "host" and r.value is not None]


def is_namespaced_sysctl(tid: str) -> bool:
    return _rules()[tid].namespaced


def lnet_tunables(spec: ClusterSpec) -> list[Tunable]:
    if spec.fabric.kind == "tcp":
        k = _r("lnet.ksocklnd.credits")
        big = max(p.cpu_cores for p in spec.compute.pools) > k.number("large_min_cpus")
        return [_tunable("lnet.ksocklnd.credits", k.integer("large" if big else "default"))]
    return [
        _tunable(tid, _r(tid).constant("value"))
        for tid in ("lnet.ko2iblnd.peer_credits", "lnet.ko2iblnd.credits", "lnet.ko2iblnd.concurrent_sends")
    ]


def nccl_tunables(spec: ClusterSpec) -> list[Tunable]:
    total_gpus = sum(p.nodes * p.gpu.count for p in spec.compute.pools)
    out: list[Tunable] = []
    for pool in spec.compute.pools:
        name = pool.name
        hcas = pool.nccl_hcas or rail_devices(pool.compute_rails)
        out.append(_tunable("nccl.NCCL_SOCKET_IFNAME", f"={pool.management_interface}", name))
        if spec.fabric.kind == "tcp" or not hcas:
            out.append(_tunable("nccl.NCCL_IB_DISABLE", 1, name))
            continue
        out.append(_tunable("nccl.NCCL_IB_HCA", "=" + ",".join(hcas), name))
        if spec.fabric.kind == "roce":
            out.append(_tunable("nccl.NCCL_IB_GID_INDEX", spec.fabric.roce_gid_index, name))
        q = _r("nccl.NCCL_IB_QPS_PER_CONNECTION")
        qps = q.integer("multi_level") if total_gpus > q.number("multi_level_min_gpus") else q.integer("single")
        out.append(_tunable("nccl.NCCL_IB_QPS_PER_CONNECTION", qps, name))
        cross_key = spec.fabric.topology.replace("-", "_") if spec.fabric.topology != "fat-tree" else "other"
        out.append(_tunable("nccl.NCCL_CROSS_NIC", _r("nccl.NCCL_CROSS_NIC").integer(cross_key), name))
        adaptive = _r("nccl.NCCL_IB_ADAPTIVE_ROUTING").integer(spec.fabric.kind)
        out.append(_tunable("nccl.NCCL_IB_ADAPTIVE_ROUTING", adaptive, name))
        if pool.topology_file:
            out.append(_tunable("nccl.NCCL_TOPO_FILE", pool.topology_file, name))
    return out


def apply_overrides(spec: ClusterSpec, tunables: list[Tunable]) -> tuple[list[Tunable], list[SpecIssue]]:
    """Replace derived values by the stack's overrides; unknown ids and bad types are spec problems."""
    issues: list[SpecIssue] = []
    known = set(_rules())
    present = {t.id for t in tunables}
    for key, value in spec.overrides.items():
        if key not in known:
            issues.append(SpecIssue(f"overrides.{key}", value, "unknown tuning id", suggest(key, known)))
        elif key not in present:
            issues.append(
                SpecIssue(
                    f"overrides.{key}",
                    value,
                    "this tunable does not apply to this stack",
                    "remove the override (see docs/tuning.md for when it applies)",
                )
            )
    out: list[Tunable] = []
    for t in tunables:
        if t.id in spec.overrides:
            new = spec.overrides[t.id]
            if isinstance(t.value, int) and not isinstance(new, int):
                issues.append(
                    SpecIssue(
                        f"overrides.{t.id}", new, f"{t.param} takes an integer", f"write a whole number like {t.value}"
                    )
                )
                out.append(t)
                continue
            out.append(
                Tunable(
                    t.id,
                    t.param,
                    new,
                    t.side,
                    t.apply,
                    f"overridden by the stack (derived: {t.value}); {t.reason}",
                    t.source,
                    True,
                    t.pool,
                )
            )
        else:
            out.append(t)
    return out, issues


def invariants(tunables: list[Tunable], ram_by_pool: dict[str, int]) -> list[SpecIssue]:
    """Rules between tunables that an override could break."""
    issues: list[SpecIssue] = []
    by: dict[tuple[str, str | None], Tunable] = {(t.id, t.pool): t for t in tunables}
    brw = by[("server.obdfilter.brw_size", None)]
    per_client = by[("server.mdt.max_mod_rpcs_per_client", None)]
    for pool, ram in ram_by_pool.items():
        mod = by[("client.mdc.max_mod_rpcs_in_flight", pool)]
        rif = by[("client.mdc.max_rpcs_in_flight", pool)]
        if int(mod.value) >= int(rif.value):
            issues.append(
                SpecIssue(
                    "overrides.client.mdc.max_mod_rpcs_in_flight",
                    mod.value,
                    f"must be below mdc max_rpcs_in_flight ({rif.value})",
                    f"use at most {int(rif.value) - 1}",
                )
            )
        if int(mod.value) > int(per_client.value):
            issues.append(
                SpecIssue(
                    "overrides.server.mdt.max_mod_rpcs_per_client",
                    per_client.value,
                    f"below the clients' mdc max_mod_rpcs_in_flight ({mod.value}); their setting would fail",
                    f"raise it to at least {mod.value}, or lower the client value",
                )
            )
        osc = by[("client.osc.max_rpcs_in_flight", pool)]
        lim = _r("client.osc.max_rpcs_in_flight")
        lo, hi = lim.integer("min"), lim.integer("max")
        if not lo <= int(osc.value) <= hi:
            issues.append(
                SpecIssue(
                    "overrides.client.osc.max_rpcs_in_flight",
                    osc.value,
                    "out of Lustre's range",
                    f"use {lo}..{hi}",
                )
            )
        rpc = by[("client.osc.max_pages_per_rpc", pool)]
        rpc_mib = _mib(rpc.value)
        if rpc_mib is None or rpc_mib > int(brw.value):
            issues.append(
                SpecIssue(
                    "overrides.client.osc.max_pages_per_rpc",
                    rpc.value,
                    f"larger than the OSTs' brw_size ({brw.value} MiB) or not a size like 16M",
                    f"use at most {brw.value}M, or raise server.obdfilter.brw_size",
                )
            )
        dirty = by[("client.osc.max_dirty_mb", pool)]
        dm = _r("client.osc.max_dirty_mb")
        cap = min(dm.integer("cap_MiB"), int(ram * 1024 * dm.number("ram_fraction")))
        if int(dirty.value) > cap:
            issues.append(
                SpecIssue(
                    "overrides.client.osc.max_dirty_mb",
                    dirty.value,
                    "above the lesser of 2048 MiB and a quarter of RAM",
                    f"use at most {cap}",
                )
            )
        ra = by[("client.llite.max_read_ahead_mb", pool)]
        raf = by[("client.llite.max_read_ahead_per_file_mb", pool)]
        if int(raf.value) > int(ra.value):
            issues.append(
                SpecIssue(
                    "overrides.client.llite.max_read_ahead_per_file_mb",
                    raf.value,
                    f"above max_read_ahead_mb ({ra.value})",
                    f"use at most {ra.value}",
                )
            )
    return issues


def _mib(value: int | float | str) -> int | None:
    text = str(value).strip().upper()
    if text.endswith("M") and text[:-1].isdigit():
        return int(text[:-1])
    return None


def nccl_pools(tunables: list[Tunable], spec: ClusterSpec) -> tuple[NcclPool, ...]:
    out = []
    for pool in spec.compute.pools:
        env = {t.param: str(t.value) for t in tunables if t.side == "nccl" and t.pool == pool.name}
        hcas = tuple(env.get("NCCL_IB_HCA", "=").lstrip("=").split(",")) if "NCCL_IB_HCA" in env else ()
        out.append(NcclPool(pool.name, dict(sorted(env.items())), hcas))
    return tuple(out)
