"""Derived Lustre, LNet and NCCL tuning: each value from a rule in kiln/knowledge/tuning.yaml."""

from __future__ import annotations

from typing import Any, cast

from kiln import knowledge
from kiln.plan.model import NcclPool, Side, Tunable
from kiln.spec.checks import rail_devices
from kiln.spec.errors import SpecIssue, suggest
from kiln.spec.models import ClusterSpec, ComputePool


def _rules() -> dict[str, dict[str, Any]]:
    t = knowledge.load().tuning
    host = t["host"]
    sysctls = {
        f"host.sysctl.{k}": {**v, "param": k, "side": "host", "apply": "sysctl"} for k, v in host["sysctls"].items()
    }
    others = {
        f"host.{k}": {**v, "param": k, "side": "host", "apply": "host"} for k, v in host.items() if k != "sysctls"
    }
    return {**t["lustre"], **t["lnet"], **{f"nccl.{k}": v for k, v in t["nccl"].items()}, **sysctls, **others}


def known_ids() -> list[str]:
    return sorted(_rules())


def _c(rule: dict[str, Any], key: str) -> Any:
    return rule["constants"][key]


def _tunable(tid: str, value: int | float | str, pool: str | None = None) -> Tunable:
    rule = _rules()[tid]
    param = rule.get("param") or (
        f"{rule['module']}.{rule['option']}" if "option" in rule else tid.removeprefix("nccl.")
    )
    side = rule.get("side") or ("nccl" if tid.startswith("nccl.") else "lnet")
    apply = rule.get("apply") or ("env" if tid.startswith("nccl.") else "module_option")
    return Tunable(
        tid, param, value, cast(Side, side), apply, " ".join(rule["reason"].split()), rule["source"], False, pool
    )


def is_flash(spec: ClusterSpec) -> bool:
    return spec.lustre.oss.osts.device.kind in ("nvme", "ssd")


def brw_size_MiB(spec: ClusterSpec) -> int:
    """The OSTs' brw_size in MiB after overrides (clients size their RPCs from it)."""
    value = spec.overrides.get("server.obdfilter.brw_size")
    if isinstance(value, int):
        return value
    rule = _rules()["server.obdfilter.brw_size"]
    return int(_c(rule, "flash" if is_flash(spec) else "disk"))


def server_tunables(spec: ClusterSpec, client_mod_rpcs: int) -> list[Tunable]:
    r = _rules()
    brw = _c(r["server.obdfilter.brw_size"], "flash" if is_flash(spec) else "disk")
    wt = r["server.obdfilter.writethrough_cache_enable"]
    return [
        _tunable("server.obdfilter.brw_size", brw),
        _tunable("server.obdfilter.read_cache_enable", _c(r["server.obdfilter.read_cache_enable"], "value")),
        _tunable("server.obdfilter.writethrough_cache_enable", _c(wt, "checkpointing")),
        _tunable("server.obdfilter.readcache_max_filesize", _c(r["server.obdfilter.readcache_max_filesize"], "value")),
        _tunable("server.mdt.max_mod_rpcs_per_client", client_mod_rpcs),
    ]


def client_tunables(spec: ClusterSpec, pool: ComputePool, brw_MiB: int) -> list[Tunable]:
    """Client values for one compute pool (they depend on its RAM, CPUs and GPUs)."""
    r = _rules()
    name = pool.name
    ram_MiB = pool.ram_GiB * 1024
    rif = r["client.osc.max_rpcs_in_flight"]
    rpcs = _c(rif, "large_client") if pool.ram_GiB >= _c(rif, "large_client_min_ram_GiB") else _c(rif, "default")
    dm = r["client.osc.max_dirty_mb"]
    dirty = min(_c(dm, "rpc_multiple") * brw_MiB * rpcs, _c(dm, "cap_MiB"), int(ram_MiB * _c(dm, "ram_fraction")))
    ra = r["client.llite.max_read_ahead_mb"]
    ra_total = min(
        int(ram_MiB * _c(ra, "ram_cap_fraction")),
        max(_c(ra, "floor_MiB"), pool.gpu.count * _c(ra, "per_gpu_stream_MiB")),
    )
    ra_file_rule = r["client.llite.max_read_ahead_per_file_mb"]
    ra_file = min(_c(ra_file_rule, "cap_MiB"), int(ra_total * _c(ra_file_rule, "fraction_of_total")))
    lru = r["client.ldlm.lru_size"]
    out = [
        _tunable("client.osc.max_pages_per_rpc", f"{brw_MiB}M", name),
        _tunable("client.osc.max_rpcs_in_flight", rpcs, name),
        _tunable("client.osc.max_dirty_mb", dirty, name),
        _tunable("client.osc.checksums", _c(r["client.osc.checksums"], "value"), name),
        _tunable("client.mount.options", _c(r["client.mount.options"], "value"), name),
        _tunable("client.llite.max_read_ahead_mb", ra_total, name),
        _tunable("client.llite.max_read_ahead_per_file_mb", ra_file, name),
        _tunable("client.llite.statahead_max", _c(r["client.llite.statahead_max"], "dataset_trees"), name),
        _tunable("client.mdc.max_rpcs_in_flight", _c(r["client.mdc.max_rpcs_in_flight"], "value"), name),
        _tunable("client.mdc.max_mod_rpcs_in_flight", _c(r["client.mdc.max_mod_rpcs_in_flight"], "value"), name),
        _tunable("client.ldlm.lru_max_age", _c(r["client.ldlm.lru_max_age"], "value"), name),
    ]
    if pool.ram_GiB > _c(lru, "min_ram_GiB"):
        out.append(_tunable("client.ldlm.lru_size", _c(lru, "per_cpu") * pool.cpu_cores, name))
    return out


def host_tunables() -> list[Tunable]:
    """Kernel and host settings every kiln host gets (sysctls, memlock, THP, CPU governor)."""
    return [_tunable(tid, rule["value"]) for tid, rule in _rules().items() if tid.startswith("host.")]


def is_namespaced_sysctl(tid: str) -> bool:
    return bool(_rules()[tid].get("namespaced", False))


def lnet_tunables(spec: ClusterSpec) -> list[Tunable]:
    r = _rules()
    if spec.fabric.kind == "tcp":
        k = r["lnet.ksocklnd.credits"]
        big = max(p.cpu_cores for p in spec.compute.pools) > _c(k, "large_min_cpus")
        return [_tunable("lnet.ksocklnd.credits", _c(k, "large" if big else "default"))]
    return [
        _tunable(tid, _c(r[tid], "value"))
        for tid in ("lnet.ko2iblnd.peer_credits", "lnet.ko2iblnd.credits", "lnet.ko2iblnd.concurrent_sends")
    ]


def nccl_tunables(spec: ClusterSpec) -> list[Tunable]:
    r = _rules()
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
        q = r["nccl.NCCL_IB_QPS_PER_CONNECTION"]
        qps = _c(q, "multi_level") if total_gpus > _c(q, "multi_level_min_gpus") else _c(q, "single")
        out.append(_tunable("nccl.NCCL_IB_QPS_PER_CONNECTION", qps, name))
        cross = (
            r["nccl.NCCL_CROSS_NIC"]["constants"][spec.fabric.topology.replace("-", "_")]
            if spec.fabric.topology != "fat-tree"
            else _c(r["nccl.NCCL_CROSS_NIC"], "other")
        )
        out.append(_tunable("nccl.NCCL_CROSS_NIC", cross, name))
        out.append(
            _tunable("nccl.NCCL_IB_ADAPTIVE_ROUTING", _c(r["nccl.NCCL_IB_ADAPTIVE_ROUTING"], spec.fabric.kind), name)
        )
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
    rules = _rules()
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
        lim = rules["client.osc.max_rpcs_in_flight"]["constants"]
        if not lim["min"] <= int(osc.value) <= lim["max"]:
            issues.append(
                SpecIssue(
                    "overrides.client.osc.max_rpcs_in_flight",
                    osc.value,
                    "out of Lustre's range",
                    f"use {lim['min']}..{lim['max']}",
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
        dm = rules["client.osc.max_dirty_mb"]["constants"]
        cap = min(dm["cap_MiB"], int(ram * 1024 * dm["ram_fraction"]))
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
    by_pool: dict[str | None, list[Tunable]] = {}
    for t in tunables:  # one pass, not one per pool: planning stays linear in pools
        if t.side == "nccl":
            by_pool.setdefault(t.pool, []).append(t)
    out = []
    for pool in spec.compute.pools:
        env = {t.param: str(t.value) for t in by_pool.get(pool.name, [])}
        hcas = tuple(env.get("NCCL_IB_HCA", "=").lstrip("=").split(",")) if "NCCL_IB_HCA" in env else ()
        out.append(NcclPool(pool.name, dict(sorted(env.items())), hcas))
    return tuple(out)
