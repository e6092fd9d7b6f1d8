"""Derived Lustre, LNet and NCCL tuning: each value from a rule in kiln/knowledge/tuning.yaml."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from kiln import knowledge
from kiln.knowledge import lustre_params
from kiln.plan.model import NcclPool, Side, Tunable
from kiln.plan.topology import lnet_nets
from kiln.spec.checks import rail_devices
from kiln.spec.errors import SpecIssue, suggest
from kiln.spec.models import ClusterSpec, ComputePool


@dataclass(frozen=True, slots=True, kw_only=True)
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
    reg = lustre_params.load()
    out: dict[str, _Rule] = {}
    # Lustre and LNet parameters are named, sided and range-checked by the registry (lustre_params.yaml),
    # per Lustre version; tuning.yaml holds the constants their values derive from.
    for tid, r in [*t.lustre.items(), *t.lnet.items()]:
        out[tid] = _Rule(
            param=tid, side=reg.params[tid].side, apply="registry", reason=r.reason, source=r.source, rule=r,
        )
    for name, r in t.nccl.items():
        out[f"nccl.{name}"] = _Rule(param=name, side="nccl", apply="env", reason=r.reason, source=r.source, rule=r)
    for name, sc in t.host.sysctls.items():
        out[f"host.sysctl.{name}"] = _Rule(
            param=name, side="host", apply="sysctl", reason=sc.reason, source=sc.source, value=sc.value,
            namespaced=sc.namespaced,
        )
    for name, h in t.host.others().items():
        out[f"host.{name}"] = _Rule(
            param=name, side="host", apply="host", reason=h.reason, source=h.source, value=h.value,
        )
    return out


def _c(rule: _Rule, key: str) -> Any:
    """Constant `key` of a derived rule (tuning.yaml `constants`)."""
    assert rule.rule is not None, f"{rule.param} is a host setting, not a derived rule"
    return rule.rule.constant(key)


def _tunable(spec: ClusterSpec | None, tid: str, value: int | float | str, pool: str | None = None) -> Tunable | None:
    """The tunable `tid` with `value`; Lustre and LNet ones are named by the registry for the stack's version and
    backend (None where that version or backend has no such parameter)."""
    rule = _rules()[tid]
    reason, source = " ".join(rule.reason.split()), rule.source
    reg = lustre_params.load()
    if tid in reg.params:
        assert spec is not None, tid
        variant = reg.variant(tid, spec.lustre.version, spec.lustre.backend)
        if variant is None:
            return None
        source = f"{source.rstrip('.')}; accepted range: {reg.cite(variant, spec.lustre.version)}"
        apply = reg.apply_of(tid, variant)
        name = variant.name.format(fsname=spec.lustre.fsname)
        return Tunable(
            id=tid, param=name, value=value, side=reg.params[tid].side, apply=apply, reason=reason, source=source,
            overridden=False, pool=pool,
        )
    return Tunable(
        id=tid, param=rule.param, value=value, side=rule.side, apply=rule.apply, reason=reason, source=source,
        overridden=False, pool=pool,
    )


def _present(items: list[Tunable | None]) -> list[Tunable]:
    return [t for t in items if t is not None]


def is_flash(spec: ClusterSpec) -> bool:
    return spec.lustre.oss.osts.device.kind in ("nvme", "ssd")


def brw_size_MiB(spec: ClusterSpec) -> int:
    """The OSTs' brw_size in MiB after overrides (clients size their RPCs from it)."""
    value = spec.overrides.get("server.obdfilter.brw_size")
    if isinstance(value, int):
        return value
    return int(_c(_rules()["server.obdfilter.brw_size"], "flash" if is_flash(spec) else "disk"))


def server_tunables(spec: ClusterSpec, client_mod_rpcs: int) -> list[Tunable]:
    r = _rules()
    brw = _c(r["server.obdfilter.brw_size"], "flash" if is_flash(spec) else "disk")
    wt = r["server.ost.writethrough_cache_enable"]
    return _present(
        [
            _tunable(spec, "server.obdfilter.brw_size", brw),
            _tunable(spec, "server.ost.read_cache_enable", _c(r["server.ost.read_cache_enable"], "value")),
            _tunable(spec, "server.ost.writethrough_cache_enable", _c(wt, "checkpointing")),
            _tunable(spec, "server.ost.readcache_max_filesize", _c(r["server.ost.readcache_max_filesize"], "value")),
            _tunable(spec, "server.mdt.max_mod_rpcs", client_mod_rpcs),
            _tunable(spec, "server.quota.enforce_mdt", spec.lustre.quotas.enforce),
            _tunable(spec, "server.quota.enforce_mdt_dom", spec.lustre.quotas.enforce),
            _tunable(spec, "server.quota.enforce_ost", spec.lustre.quotas.enforce),
            _tunable(spec, "client.jobid_var", _c(r["client.jobid_var"], spec.lustre.scheduler)),
        ]
    )


def kernel_max_dirty_MiB(ram_GiB: int, rpc_MiB: int, rpcs: int) -> int:
    """The osc max_dirty_mb the kernel arrives at by itself (client_adjust_max_dirty, lustre/include/obd.h):
    OSC_MAX_DIRTY_DEFAULT raised to RPC size × RPCs in flight, capped at RAM/8."""
    default = int(_c(_rules()["client.osc.max_dirty_mb"], "kernel_default_MiB"))
    return min(max(default, rpc_MiB * rpcs), ram_GiB * 1024 // 8)


def client_tunables(spec: ClusterSpec, pool: ComputePool, brw_MiB: int) -> list[Tunable]:
    """Client values for one compute pool (they depend on its RAM, CPUs and GPUs)."""
    r = _rules()
    name = pool.name
    ram_MiB = pool.ram_GiB * 1024
    rif = r["client.osc.max_rpcs_in_flight"]
    rpcs = _c(rif, "large_client") if pool.ram_GiB >= _c(rif, "large_client_min_ram_GiB") else _c(rif, "default")
    ra = r["client.llite.max_read_ahead_mb"]
    ra_total = min(
        int(ram_MiB * _c(ra, "ram_cap_fraction")),
        max(_c(ra, "floor_MiB"), pool.gpus_per_node * _c(ra, "per_gpu_stream_MiB")),
    )
    ra_file_rule = r["client.llite.max_read_ahead_per_file_mb"]
    ra_file = min(_c(ra_file_rule, "cap_MiB"), int(ra_total * _c(ra_file_rule, "fraction_of_total")))
    out = [
        _tunable(spec, "client.osc.max_pages_per_rpc", f"{brw_MiB}M", name),
        _tunable(spec, "client.osc.max_rpcs_in_flight", rpcs, name),
        _tunable(spec, "client.osc.checksums", _c(r["client.osc.checksums"], "value"), name),
        _tunable(spec, "client.mount.options", _c(r["client.mount.options"], "value"), name),
        _tunable(spec, "client.llite.max_read_ahead_mb", ra_total, name),
        _tunable(spec, "client.llite.max_read_ahead_per_file_mb", ra_file, name),
        _tunable(spec, "client.llite.statahead_max", _c(r["client.llite.statahead_max"], "dataset_trees"), name),
        _tunable(spec, "client.mdc.max_rpcs_in_flight", _c(r["client.mdc.max_rpcs_in_flight"], "value"), name),
        _tunable(spec, "client.mdc.max_mod_rpcs_in_flight", _c(r["client.mdc.max_mod_rpcs_in_flight"], "value"), name),
        _tunable(spec, "client.ldlm.lru_max_age", _c(r["client.ldlm.lru_max_age"], "value"), name),
    ]
    # Left to the kernel unless the stack overrides them (see their reasons in tuning.yaml).
    if "client.osc.max_dirty_mb" in spec.overrides:
        out.append(_tunable(spec, "client.osc.max_dirty_mb", kernel_max_dirty_MiB(pool.ram_GiB, brw_MiB, rpcs), name))
    if "client.ldlm.lru_size" in spec.overrides:
        out.append(_tunable(spec, "client.ldlm.lru_size", _c(r["client.ldlm.lru_size"], "dynamic"), name))
    return _present(out)


def host_tunables() -> list[Tunable]:
    """Kernel and host settings every kiln host gets (sysctls, memlock, THP, CPU governor)."""
    host = [(tid, r.value) for tid, r in _rules().items() if r.side == "host" and r.value is not None]
    return _present([_tunable(None, tid, value) for tid, value in host])


def is_namespaced_sysctl(tid: str) -> bool:
    return _rules()[tid].namespaced


def lnet_tunables(spec: ClusterSpec) -> list[Tunable]:
    r = _rules()
    if spec.fabric.kind == "tcp":
        k = r["lnet.ksocklnd.credits"]
        big = max(p.cpu_cores for p in spec.compute.pools) > _c(k, "large_min_cpus")
        out = [_tunable(spec, "lnet.ksocklnd.credits", _c(k, "large" if big else "default"))]
    else:
        out = [
            _tunable(spec, tid, _c(r[tid], "value"))
            for tid in ("lnet.ko2iblnd.peer_credits", "lnet.ko2iblnd.credits", "lnet.ko2iblnd.concurrent_sends")
        ]
    if any(n.multi_rail for n in lnet_nets(spec)):
        out += [
            _tunable(spec, tid, _c(r[tid], "multi_rail"))
            for tid in ("lnet.lnet.lnet_health_sensitivity", "lnet.lnet.lnet_retry_count")
        ]
        # The release's own default (LU-15288 raised it on 2.16): tuning.yaml keys it by lustre.version.
        timeout = "lnet.lnet.lnet_transaction_timeout"
        out.append(_tunable(spec, timeout, _c(r[timeout], spec.lustre.version)))
    if spec.lustre.routers:
        out += [
            _tunable(spec, tid, _c(r[tid], "routed"))
            for tid in (
                "lnet.lnet.check_routers_before_use",
                "lnet.lnet.alive_router_check_interval",
                "lnet.lnet.router_ping_timeout",
            )
        ]
    return _present(out)


def roce_traffic_class(spec: ClusterSpec) -> int:
    """The IP traffic-class byte of RoCE traffic: the DSCP in its upper six bits, ECT(0) in the ECN bits."""
    return (spec.fabric.roce_dscp << 2) | int(_c(_rules()["nccl.NCCL_IB_TC"], "ecn_bits"))


def nccl_tunables(spec: ClusterSpec) -> list[Tunable]:
    r = _rules()
    total_gpus = sum(p.nodes * p.gpus_per_node for p in spec.compute.pools)
    out: list[Tunable | None] = []
    for pool in spec.compute.pools:
        name = pool.name
        hcas = pool.nccl_hcas or (rail_devices(pool.compute_rails) if pool.compute_rails is not None else [])
        out.append(_tunable(spec, "nccl.NCCL_SOCKET_IFNAME", f"={pool.socket_interface}", name))
        if spec.fabric.kind == "tcp" or not hcas:
            out.append(_tunable(spec, "nccl.NCCL_IB_DISABLE", 1, name))
            continue
        out.append(_tunable(spec, "nccl.NCCL_IB_HCA", "=" + ",".join(hcas), name))
        if spec.fabric.kind == "roce":
            out.append(_tunable(spec, "nccl.NCCL_IB_GID_INDEX", spec.fabric.roce_gid_index, name))
            out.append(_tunable(spec, "nccl.NCCL_IB_TC", roce_traffic_class(spec), name))
        q = r["nccl.NCCL_IB_QPS_PER_CONNECTION"]
        qps = _c(q, "multi_level") if total_gpus > _c(q, "multi_level_min_gpus") else _c(q, "single")
        out.append(_tunable(spec, "nccl.NCCL_IB_QPS_PER_CONNECTION", qps, name))
        cross = (
            _c(r["nccl.NCCL_CROSS_NIC"], spec.fabric.topology.replace("-", "_"))
            if spec.fabric.topology != "fat-tree"
            else _c(r["nccl.NCCL_CROSS_NIC"], "other")
        )
        out.append(_tunable(spec, "nccl.NCCL_CROSS_NIC", cross, name))
        out.append(
            _tunable(
                spec, "nccl.NCCL_IB_ADAPTIVE_ROUTING", _c(r["nccl.NCCL_IB_ADAPTIVE_ROUTING"], spec.fabric.kind), name
            )
        )
        if pool.topology_file:
            out.append(_tunable(spec, "nccl.NCCL_TOPO_FILE", pool.topology_file, name))
    return _present(out)


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
                    id=t.id,
                    param=t.param,
                    value=new,
                    side=t.side,
                    apply=t.apply,
                    reason=f"overridden by the stack (derived: {t.value}); {t.reason}",
                    source=t.source,
                    overridden=True,
                    pool=t.pool,
                )
            )
        else:
            out.append(t)
    return out, issues


def _path(t: Tunable) -> str:
    return f"overrides.{t.id}" if t.overridden else f"tunables.{t.id}"


def out_of_range(spec: ClusterSpec, tunables: list[Tunable]) -> list[SpecIssue]:
    """Every Lustre/LNet value checked against the range the stack's Lustre version accepts (registry)."""
    reg = lustre_params.load()
    ram = {p.name: p.ram_GiB * 1024 for p in spec.compute.pools}
    issues: list[SpecIssue] = []
    for t in tunables:
        if t.id not in reg.params:
            continue
        variant = reg.variant(t.id, spec.lustre.version, spec.lustre.backend)
        if variant is None:
            issues.append(
                SpecIssue(
                    _path(t),
                    t.value,
                    f"Lustre {spec.lustre.version} ({spec.lustre.backend}) has no {t.param}",
                    "remove the override or change lustre.version",
                )
            )
            continue
        problem = lustre_params.check(reg, t.id, variant, t.value, ram.get(t.pool or ""))
        if problem:
            issues.append(
                SpecIssue(
                    _path(t),
                    t.value,
                    f"{t.param} on Lustre {spec.lustre.version}: {problem} ({reg.cite(variant, spec.lustre.version)})",
                    f"use a value in {variant.range_text()}",
                )
            )
    return issues


def _int(t: Tunable) -> int:
    n = lustre_params.to_number(t.value, "size_MiB")
    return int(n) if n is not None else 0


def invariants(tunables: list[Tunable], ram_by_pool: dict[str, int]) -> list[SpecIssue]:
    """Rules between tunables that an override could break (ranges of single values: out_of_range)."""
    issues: list[SpecIssue] = []
    by: dict[tuple[str, str | None], Tunable] = {(t.id, t.pool): t for t in tunables}

    def rule(t: Tunable, ok: bool, problem: str, fix: str) -> None:
        if not ok:
            issues.append(SpecIssue(_path(t), t.value, problem, fix))

    brw = by[("server.obdfilter.brw_size", None)]
    mdt_mod = by[("server.mdt.max_mod_rpcs", None)]
    for pool in ram_by_pool:
        mod = by[("client.mdc.max_mod_rpcs_in_flight", pool)]
        rif = by[("client.mdc.max_rpcs_in_flight", pool)]
        rule(
            mod,
            _int(mod) < _int(rif),
            f"must be below mdc max_rpcs_in_flight ({rif.value})",
            f"use at most {_int(rif) - 1}",
        )
        rule(
            mdt_mod,
            _int(mod) <= _int(mdt_mod),
            f"below the clients' mdc max_mod_rpcs_in_flight ({mod.value}); their setting would fail",
            f"raise it to at least {mod.value}, or lower the client value",
        )
        rpc = by[("client.osc.max_pages_per_rpc", pool)]
        rule(
            rpc,
            _mib(rpc.value) is not None and _int(rpc) <= _int(brw),
            f"larger than the OSTs' brw_size ({brw.value} MiB) or not a size like 16M",
            f"use at most {brw.value}M, or raise server.obdfilter.brw_size",
        )
        ra = by[("client.llite.max_read_ahead_mb", pool)]
        raf = by[("client.llite.max_read_ahead_per_file_mb", pool)]
        rule(raf, _int(raf) <= _int(ra), f"above max_read_ahead_mb ({ra.value})", f"use at most {ra.value}")
    pc, cr, cs = (by.get((f"lnet.ko2iblnd.{k}", None)) for k in ("peer_credits", "credits", "concurrent_sends"))
    if pc and cr and cs:
        rule(
            cr,
            _int(cr) >= _int(pc),
            f"below ko2iblnd peer_credits ({pc.value}); the LND cuts peer_credits down",
            f"use at least {pc.value}",
        )
        rule(
            cs,
            _int(pc) // 2 <= _int(cs) <= _int(pc) * 2,
            f"outside peer_credits/2..peer_credits×2 ({_int(pc) // 2}..{_int(pc) * 2}); the LND clamps it",
            f"use {_int(pc) // 2}..{_int(pc) * 2}",
        )
    retry, timeout = by.get(("lnet.lnet.lnet_retry_count", None)), by.get(("lnet.lnet.lnet_transaction_timeout", None))
    if retry and timeout:
        rule(
            timeout,
            _int(timeout) > _int(retry),
            f"must exceed lnet_retry_count ({retry.value})",
            f"use at least {_int(retry) + 1}",
        )
    return issues


def _mib(value: int | float | str) -> int | None:
    text = str(value).strip().upper()
    if text.endswith("M") and text[:-1].isdigit():
        return int(text[:-1])
    return None


def nccl_pools(tunables: Sequence[Tunable], spec: ClusterSpec) -> tuple[NcclPool, ...]:
    by_pool: dict[str | None, list[Tunable]] = {}
    for t in tunables:  # one pass, not one per pool: planning stays linear in pools
        if t.side == "nccl":
            by_pool.setdefault(t.pool, []).append(t)
    out = []
    for pool in spec.compute.pools:
        env = {t.param: str(t.value) for t in by_pool.get(pool.name, [])}
        hcas = tuple(env.get("NCCL_IB_HCA", "=").lstrip("=").split(",")) if "NCCL_IB_HCA" in env else ()
        out.append(NcclPool(pool=pool.name, env=dict(sorted(env.items())), hcas=hcas))
    return tuple(out)


def build_tunables(spec: ClusterSpec) -> tuple[tuple[Tunable, ...], list[SpecIssue]]:
    """Every host, server, client, LNet and NCCL tunable with the stack's overrides applied; issues: unknown or
    misapplied overrides, then (only without those) values out of range, then broken rules between tunables."""
    clients: list[Tunable] = []
    client_mod = 0
    brw = brw_size_MiB(spec)
    for pool in spec.compute.pools:
        pool_tunables = client_tunables(spec, pool, brw_MiB=brw)
        client_mod = max(
            client_mod, *(int(t.value) for t in pool_tunables if t.id == "client.mdc.max_mod_rpcs_in_flight")
        )
        clients.extend(pool_tunables)
    derived = host_tunables() + server_tunables(spec, client_mod) + clients + lnet_tunables(spec) + nccl_tunables(spec)
    tunables, issues = apply_overrides(spec, derived)
    if not issues:
        issues += out_of_range(spec, tunables)
    if not issues:
        issues += invariants(tunables, {p.name: p.ram_GiB for p in spec.compute.pools})
    return tuple(tunables), issues
