"""The Lustre parameter registry: every planned value is a name the stack's version knows, inside its range."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest

from kiln import knowledge
from kiln.knowledge import lustre_params
from kiln.plan import build_plan
from kiln.spec import load_stack, validate
from kiln.spec.models import Lustre
from kiln.yamlio import load_inventory
from tests.unit.refusals import Refusal, refusal, refused

STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in Path("stacks").glob("Pulumi.*.yaml"))
REG = lustre_params.load()
VERSIONS = REG.versions.supported


def plan_of(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


def with_version(stack: Any, name: str, version: str, **lustre: Any) -> dict[str, Any]:
    data: dict[str, Any] = stack(name)
    data["lustre"]["version"] = version
    data["lustre"].update(lustre)
    return data


def test_spec_versions_are_the_registry_versions() -> None:
    field = Lustre.model_fields["version"]
    assert set(typing.get_args(field.annotation)) == set(VERSIONS)
    assert field.default == REG.versions.default
    assert set(REG.versions.tags) == set(VERSIONS)


def test_every_registry_param_has_a_rule_and_every_variant_a_source() -> None:
    rules = knowledge.load().tuning
    ids = set(rules.lustre) | set(rules.lnet)
    assert set(REG.params) <= ids
    for pid, param in REG.params.items():
        for v in param.variants:
            assert set(v.versions) <= set(VERSIONS), pid
            assert v.source.file.startswith(("lustre/", "lnet/")) and v.source.function, pid


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", STACKS)
@pytest.mark.parametrize("backend", ["ldiskfs", "zfs"])
def test_every_planned_param_is_known_and_in_range(stack: Any, name: str, version: str, backend: str) -> None:
    data = with_version(stack, name, version, backend=backend)
    plan = plan_of(data)
    ram = {p["name"]: p["ram_GiB"] * 1024 for p in data["compute"]["pools"]}
    lustre_side = [t for t in plan.tunables if t.side in ("client", "mds", "oss", "mgs", "lnet")]
    assert lustre_side
    for t in lustre_side:
        assert t.id in REG.params, f"{t.id} is not in lustre_params.yaml"
        variant = REG.variant(t.id, version, backend)
        assert variant is not None and variant.name.format(fsname=data["lustre"]["fsname"]) == t.param, (
            t.id,
            version,
            backend,
        )
        assert lustre_params.check(REG, t.id, variant, t.value, ram.get(t.pool or "")) == "", (t.id, t.value)
    for lay in plan.layouts:
        for c in lay.components:
            assert c.dom or c.stripe_count == -1 or 1 <= c.stripe_count <= 2000


# Values outside what the stack's Lustre version accepts: each refused with the range and the source that enforces it.
REFUSALS = [
    refusal("max_dirty_mb 2048", "prod-h100", {"overrides": {"client.osc.max_dirty_mb": 2048}},
            "overrides.client.osc.max_dirty_mb", value=2048, first=True, plan=True,
            problem=("0..2048 (upper bound excluded)", "max_dirty_mb_store")),
    refusal("a parameter the backend lacks", "prod-h100",
            {"lustre.version": "2.16", "lustre.backend": "zfs", "overrides": {"server.ost.read_cache_enable": 0}},
            "overrides.server.ost.read_cache_enable", first=True, plan=True,
            problem_is="this tunable does not apply to this stack"),
    refusal("statahead_max 1024 on 2.15", "prod-h100",
            {"lustre.version": "2.15", "overrides": {"client.llite.statahead_max": 1024}},
            "overrides.client.llite.statahead_max", first=True, plan=True, problem="0..512"),
    refusal("ko2iblnd peer_credits above 255", "prod-h100", {"overrides": {
        "lnet.ko2iblnd.peer_credits": 256, "lnet.ko2iblnd.credits": 2048, "lnet.ko2iblnd.concurrent_sends": 256}},
            "overrides.lnet.ko2iblnd.peer_credits", first=True, plan=True, problem="kiblnd_tunables_setup"),
    refusal("concurrent_sends outside the clamp", "prod-h100", {"overrides": {"lnet.ko2iblnd.concurrent_sends": 128}},
            "overrides.lnet.ko2iblnd.concurrent_sends", first=True, plan=True),
    refusal("brw_size above 64", "prod-h100", {"overrides": {"server.obdfilter.brw_size": 128}},
            "overrides.server.obdfilter.brw_size", plan=True, problem="1..64"),
    refusal("jobid_var longer than the kernel takes", "prod-h100",
            {"overrides": {"client.jobid_var": "A_VERY_LONG_VARIABLE_NAME"}},
            "overrides.client.jobid_var", first=True, plan=True, problem="1..20 characters"),
    refusal("RoCE needs a rail subnet", "dev", {"fabric.kind": "roce"}, "networks.roce_rails", first=True),
]


@pytest.mark.parametrize("row", REFUSALS)
def test_refused_with_range_and_source(row: Refusal) -> None:
    refused(row)


def test_statahead_max_1024_is_planned_on_2_16(stack: Any) -> None:
    data = with_version(stack, "prod-h100", "2.16")
    data["overrides"] = {"client.llite.statahead_max": 1024}
    assert plan_of(data).tunable("client.llite.statahead_max").value == 1024


def test_max_dirty_mb_override_below_the_cap_is_planned(stack: Any) -> None:
    data = stack("prod-h100")
    data["overrides"] = {"client.osc.max_dirty_mb": 1024}
    t = plan_of(data).tunable("client.osc.max_dirty_mb")
    assert t.value == 1024 and t.overridden and t.param == "osc.*.max_dirty_mb"


def test_kernel_max_dirty_follows_client_adjust_max_dirty() -> None:
    from kiln.plan.tuning import kernel_max_dirty_MiB

    assert kernel_max_dirty_MiB(2048, 16, 32) == 2000  # default above RPC × RIF
    assert kernel_max_dirty_MiB(2048, 64, 64) == 4096  # raised to RPC × RIF
    assert kernel_max_dirty_MiB(2, 16, 32) == 256  # capped at RAM / 8


@pytest.mark.parametrize(
    ("version", "backend", "expected"),
    [
        (
            "2.15",
            "ldiskfs",
            {
                "osd-ldiskfs.*OST*.read_cache_enable",
                "osd-ldiskfs.*OST*.writethrough_cache_enable",
                "osd-ldiskfs.*OST*.readcache_max_filesize",
            },
        ),
        (
            "2.16",
            "ldiskfs",
            {
                "osd-ldiskfs.*OST*.read_cache_enable",
                "osd-ldiskfs.*OST*.writethrough_cache_enable",
                "osd-ldiskfs.*OST*.readcache_max_filesize",
            },
        ),
        ("2.16", "zfs", {"osd-zfs.*OST*.readcache_max_filesize"}),
    ],
)
def test_oss_cache_params_use_osd_names(stack: Any, version: str, backend: str, expected: set[str]) -> None:
    plan = plan_of(with_version(stack, "prod-h100", version, backend=backend))
    cache = {t.param for t in plan.tunables if t.id.startswith("server.ost.")}
    assert cache == expected
    assert not any(t.param.startswith("obdfilter.") and "cache" in t.param for t in plan.tunables)


def test_read_cache_reason_does_not_claim_shards_are_cached(prod_plan: Any) -> None:
    reason = prod_plan.tunable("server.ost.read_cache_enable").reason
    assert "bypass" in reason and "Shards re-read every epoch" not in reason


@pytest.mark.parametrize(
    ("version", "param", "apply"),
    [
        ("2.15", "mdt.max_mod_rpcs_per_client", "module_param"),
        ("2.16", "mdt.*.max_mod_rpcs_in_flight", "set_param_persistent"),
    ],
)
def test_mdt_mod_rpcs_name_by_version(stack: Any, version: str, param: str, apply: str) -> None:
    t = plan_of(with_version(stack, "prod-h100", version)).tunable("server.mdt.max_mod_rpcs")
    assert (t.param, t.apply, t.side) == (param, apply, "mds")


def test_lnet_health_planned_for_multi_rail_only(prod_plan: Any, stack: Any) -> None:
    ids = {t.id: t for t in prod_plan.tunables}
    assert ids["lnet.lnet.lnet_transaction_timeout"].param == "lnet.lnet_transaction_timeout"
    assert int(ids["lnet.lnet.lnet_transaction_timeout"].value) > int(ids["lnet.lnet.lnet_retry_count"].value)
    lab = build_plan(load_stack("lab"))
    assert lab.lnet[0].multi_rail or all(not t.id.startswith("lnet.lnet.") for t in lab.tunables)


def test_lru_size_left_dynamic_and_lru_max_age_reason(prod_plan: Any) -> None:
    assert all(t.id != "client.ldlm.lru_size" for t in prod_plan.tunables)
    reason = prod_plan.tunable("client.ldlm.lru_max_age").reason
    assert "shortens the 3900 s default" in reason and "equals the default" in reason


def test_nccl_ib_tc_on_roce(stack: Any) -> None:
    data = stack("prod-h100")
    data["fabric"]["kind"] = "roce"
    data["networks"]["roce_rails"] = "10.30.0.0/16"
    plan = plan_of(data)
    env = plan.nccl[0].env
    assert env["NCCL_IB_TC"] == "106"  # DSCP 26 << 2 | ECT(0), the same byte as RDMA-CM's ToS
    data["fabric"]["roce_dscp"] = 24
    assert plan_of(data).nccl[0].env["NCCL_IB_TC"] == str(24 << 2 | 2)
    assert "NCCL_IB_TC" not in build_plan(load_stack("prod-h100")).nccl[0].env


def test_layout_stripe_count_cap_is_2000_on_ldiskfs(stack: Any) -> None:
    # ea_inode is on for ldiskfs MDTs by default since 2.13, so 160 (LOV_MAX_STRIPE_COUNT_OLD) no longer caps.
    data = stack("prod-h100")
    data["lustre"]["backend"] = "ldiskfs"
    data["lustre"]["directories"] = [{"path": "/ckpt", "purpose": "checkpoints"}]
    data.pop("dataflow", None)  # its links name the stack's own directories
    data["workload"]["checkpoint"]["sharded"] = False
    lay = plan_of(data).layouts[0]
    assert lay.kind == "overstripe" and lay.components[0].stripe_count == 1024


def test_layout_limits_refuse_bad_stripe_size(stack: Any) -> None:
    from kiln.plan.layouts import layout_issues
    from kiln.plan.model import Layout, LayoutComponent

    spec = validate(stack("lab"), "test")
    bad = Layout(
        path="/x", mount_path="/lustre/x", purpose="scratch", kind="plain",
        components=(LayoutComponent(extent_end="EOF", stripe_count=1, stripe_size="96K"),), setstripe="-c 1 -S 96K",
        reason="test",
    )
    issues = layout_issues(spec, (bad,))
    assert issues and issues[0].path == "lustre.directories[0].stripe_size" and "64 KiB" in issues[0].problem
    huge = Layout(
        path="/x", mount_path="/lustre/x", purpose="scratch", kind="plain",
        components=(LayoutComponent(extent_end="EOF", stripe_count=2001, stripe_size="4G"),), setstripe="",
        reason="test",
    )
    assert {i.path.rsplit(".", 1)[1] for i in layout_issues(spec, (huge,))} == {"stripe_size", "stripe_count"}


@pytest.fixture(scope="module")
def prod_plan() -> Any:
    return build_plan(load_stack("prod-h100"))


def roce_stack(stack: Any) -> dict[str, Any]:
    data: dict[str, Any] = stack("dev")
    data["fabric"]["kind"] = "roce"
    data["networks"]["roce_rails"] = "10.30.0.0/16"
    return data


def test_roce_rails_get_addresses_and_the_inventory_applies_them(stack: Any) -> None:

    from kiln.render.inventory import render_inventory

    data = roce_stack(stack)
    spec = validate(data, "test")
    plan = build_plan(spec, "test")
    gpu = plan.hosts[0]
    rails = [n for n in gpu.nics if n.role == "compute"]
    assert rails and all(n.address and n.address.startswith("10.30.") for n in rails)
    files = render_inventory(plan)
    hv = load_inventory(files[f"host_vars/{gpu.name}.yml"])
    by = {i["name"]: i for i in hv["rdma_roce_interfaces"]}
    assert by[rails[0].interface]["address"] == f"{rails[0].address}/16"
    storage = next(n for n in gpu.nics if n.role == "storage")
    assert by[storage.interface]["address"].startswith(storage.address + "/")
    assert len(by) == len([n for n in gpu.nics if n.device])
    all_vars = load_inventory(files["group_vars/all/kiln.yml"])
    assert all_vars["rdma_roce_tos"] == 106 and all_vars["rdma_roce_dscp"] == 26
    assert plan.nccl[0].env["NCCL_IB_TC"] == str(all_vars["rdma_roce_tos"])


def test_quotas_and_jobstats_are_planned_on_the_mgs(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["scheduler"] = "slurm"
    data["lustre"]["quotas"] = {"enforce": "up"}
    plan = plan_of(data)
    fs = data["lustre"]["fsname"]
    mdt, ost, job = (
        plan.tunable(i) for i in ("server.quota.enforce_mdt", "server.quota.enforce_ost", "client.jobid_var")
    )
    assert (mdt.param, mdt.value, mdt.apply) == (f"osd-*.{fs}-MDT*.quota_slave.enabled", "up", "set_param_persistent")
    assert (ost.param, ost.value) == (f"osd-*.{fs}-OST*.quota_slave.enabled", "up")
    assert (job.param, job.value, job.apply) == ("jobid_var", "SLURM_JOB_ID", "set_param_persistent")


def test_mkfs_arguments_checked_against_mkfs_lustre(stack: Any) -> None:
    from dataclasses import replace

    from kiln.plan.mkfs import mkfs_issues

    spec = validate(stack("lab"), "test")
    plan = build_plan(spec, "test")
    assert mkfs_issues(spec, plan.lustre_targets, plan.mgs_nids) == []
    ost = next(t for t in plan.lustre_targets if t.kind == "ost")
    too_far = replace(ost, index=65535)
    bad_geometry = replace(ost, mkfs_options=("--mkfsoptions=-E stride=32,stripe_width=100",))
    issues = mkfs_issues(spec, (too_far, bad_geometry, bad_geometry), plan.mgs_nids)
    assert [i.path for i in issues] == ["lustre.oss.osts.per_node", "lustre.oss.osts.chunk_KiB"]  # one per problem
    assert "above 65534" in issues[0].problem and "mkfs_lustre.c parse_opts" in issues[0].problem
    assert "not a multiple of stride" in issues[1].problem


def test_every_stack_plans_mkfs_arguments_mkfs_lustre_takes() -> None:
    from kiln.lustre.lustre_target import mkfs_option_problems, mkfs_param_problems

    for name in STACKS:
        plan = build_plan(load_stack(name))
        for t in plan.lustre_targets:
            assert 0 <= t.index <= REG.mkfs_limits["index_max"].value
            assert mkfs_option_problems(list(t.mkfs_options)) == [], (name, t.name)
            mgsnode = [list(g) for g in plan.mgs_nids] if t.kind != "mgt" else []
            assert mkfs_param_problems(mgsnode, [list(g) for g in t.servicenodes]) == [], (name, t.name)


def test_draid_targets_plan_words_zpool_takes_and_an_ashift(stack: Any) -> None:
    from kiln.lustre.lustre_target import draid_problems, zfs_vdev_paths

    data = stack("dev")
    data["lustre"]["backend"] = "zfs"
    data["lustre"]["oss"]["osts"] = {"per_node": 2, "devices_per_target": 8, "protection": "draid2",
                                    "device": {"catalog": "samsung-pm1743-15t"}}
    data["lustre"]["mds"]["mdts"] = {"per_node": 1, "devices_per_target": 2, "device": {"catalog": "micron-7450pro-7t"}}
    plan = plan_of(data)
    osts = [t for t in plan.lustre_targets if t.kind == "ost"]
    assert osts and all(t.vdevs[0].startswith("draid2:") and t.ashift == 12 for t in osts)
    for t in osts:
        assert draid_problems(list(t.vdevs)) == [] and len(zfs_vdev_paths(list(t.vdevs))) == 8
