"""The plan: topology, target map, tunables, layouts, NCCL, sizing, targets."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from kiln.plan import build_plan, serialize
from kiln.plan.serialize import plan_to_dict
from kiln.spec import SpecError, load_stack, validate
from tests.unit.refusals import Refusal, refusal, refused


def plan_of(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


@pytest.fixture(scope="module")
def prod() -> Any:
    return build_plan(load_stack("prod-h100"))


@pytest.fixture(scope="module")
def lab() -> Any:
    return build_plan(load_stack("lab"))


def test_hosts_and_groups(prod: Any) -> None:
    assert len(prod.groups["kiln_compute"]) == 128
    assert prod.groups["kiln_lustre_oss"] == ("oss01", "oss02", "oss03", "oss04")
    assert prod.groups["kiln_lustre_mgs"] == ("mds01",)
    names = [h.name for h in prod.hosts]
    assert len(set(names)) == len(names)
    addrs = [h.management_address for h in prod.hosts]
    assert len(set(addrs)) == len(addrs)


def test_nids_multi_rail(prod: Any) -> None:
    gpu = prod.host("gpu001")
    assert len(gpu.nids) == 2 and all(n.endswith("@o2ib0") for n in gpu.nids)
    assert prod.lnet[0].multi_rail
    storage = [n for n in gpu.nics if n.role == "storage"]
    assert [n.device for n in storage] == ["mlx5_1", "mlx5_7"]  # as the stack names a DGX H100's storage ports
    assert [n.interface for n in storage] == ["ibp41s0f0", "ibp170s0f0"]


def test_target_map_failover(prod: Any) -> None:
    osts = [t for t in prod.lustre_targets if t.kind == "ost"]
    assert len(osts) == 4 * 8
    assert [t.index for t in osts] == list(range(32))
    ost = next(t for t in osts if t.name == "prod-OST000a")
    assert ost.host == "oss02" and ost.failover_host == "oss01"
    assert ost.servicenodes == (prod.host("oss02").nids, prod.host("oss01").nids)
    assert prod.mgs_nids == (prod.host("mds01").nids, prod.host("mds02").nids)


def test_mdc_and_mds_setting_agree(prod: Any) -> None:
    client = prod.tunable("client.mdc.max_mod_rpcs_in_flight")
    mds = prod.tunable("server.mdt.max_mod_rpcs")
    assert int(client.value) <= int(mds.value)
    assert int(client.value) < int(prod.tunable("client.mdc.max_rpcs_in_flight").value)


def test_max_dirty_mb_left_to_the_kernel(prod: Any, lab: Any) -> None:
    # The kernel refuses max_dirty_mb >= 2048 (lproc_osc.c max_dirty_mb_store) and sizes it itself; 2048 was planned.
    for plan in (prod, lab):
        assert all(t.id != "client.osc.max_dirty_mb" for t in plan.tunables)


def test_every_tunable_has_reason_and_source(prod: Any) -> None:
    for t in prod.tunables:
        assert t.reason and t.source, t.id


def test_override_replaces_and_is_marked(stack: Any) -> None:
    data = stack("prod-h100")
    data["overrides"] = {"client.osc.max_rpcs_in_flight": 16}
    t = plan_of(data).tunable("client.osc.max_rpcs_in_flight")
    assert t.value == 16 and t.overridden


# Contradictions only the planner sees: each is the first issue reported, at the field to change.
REFUSALS = [
    refusal("override breaking an invariant", "prod-h100", {"overrides": {"server.mdt.max_mod_rpcs": 8}},
            "overrides.server.mdt.max_mod_rpcs", first=True, plan=True),
    refusal("unknown override, with a suggestion", "lab", {"overrides": {"client.osc.max_rpc_in_flight": 16}},
            "overrides.client.osc.max_rpc_in_flight", first=True, plan=True, fix="client.osc.max_rpcs_in_flight"),
    refusal("checkpoint budget no layer can meet", "dev", {
        "workload.model_params_B": 5000, "workload.checkpoint": {"interval_min": 10, "budget_fraction": 0.001}},
            "workload.checkpoint.budget_fraction", first=True, plan=True, fix="at least"),
    refusal("object-store capacity", "prod-h100", {"objectstore.capacity_TB": 5000}, "objectstore.capacity_TB",
            first=True, plan=True),
]


@pytest.mark.parametrize("row", REFUSALS)
def test_refused_by_the_planner(row: Refusal) -> None:
    refused(row)


def test_layouts(prod: Any) -> None:
    by = {lay.path: lay for lay in prod.layouts}
    assert by["/datasets"].kind == "pfl" and by["/datasets"].components[-1].stripe_count == 32
    assert by["/home"].kind == "dom" and by["/home"].setstripe.startswith("-E 1M -L mdt")
    assert by["/checkpoints"].kind == "pfl"


def test_default_directory_striping_follows_mdts_and_purpose(prod: Any, lab: Any, stack: Any) -> None:
    by = {lay.path: lay for lay in prod.layouts}  # 4 MDS x 1 MDT
    assert by["/checkpoints"].dirstripe is not None
    assert by["/checkpoints"].dirstripe.args() == ["-D", "-c", "4", "-i", "-1", "-X", "3"]  # file-per-rank steps
    assert by["/home"].dirstripe is not None
    assert by["/home"].dirstripe.args() == ["-D", "-c", "1", "-i", "-1", "-X", "-1"]  # balanced trees
    assert by["/datasets"].dirstripe is None and by["/scratch"].dirstripe is None
    assert all(lay.dirstripe is None and "One MDT" in lay.dirstripe_reason for lay in lab.layouts)
    data = stack("prod-h100")
    data["workload"]["checkpoint"]["sharded"] = False  # one file per checkpoint: nothing to spread
    assert next(x for x in plan_of(data).layouts if x.path == "/checkpoints").dirstripe is None


def test_default_directory_stripe_override(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["directories"][0]["mdt_count"] = -1
    data["lustre"]["directories"][1]["mdt_count"] = 0
    plan = plan_of(data)
    first, second = plan.layouts[0].dirstripe, plan.layouts[1].dirstripe
    assert first is not None and first.mdt_count == 4 and second is None
    data["lustre"]["directories"][0]["mdt_count"] = 5
    with pytest.raises(SpecError) as exc:
        plan_of(data)
    issue = next(i for i in exc.value.issues if i.path == "lustre.directories[0].mdt_count")
    assert issue.value == 5 and "4 MDT(s)" in issue.problem and "lfs_setdirstripe" in issue.problem


def test_single_file_checkpoint_overstripes(stack: Any) -> None:
    data = stack("prod-h100")
    data["workload"]["checkpoint"]["sharded"] = False
    lay = next(x for x in plan_of(data).layouts if x.path == "/checkpoints")
    assert lay.kind == "overstripe" and "-C" in lay.setstripe


def test_nccl_env(prod: Any, lab: Any, stack: Any) -> None:
    env = prod.nccl[0].env
    assert env["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_{i}" for i in (0, 3, 4, 5, 6, 9, 10, 11))  # DGX H100 rails
    assert env["NCCL_IB_QPS_PER_CONNECTION"] == "4"  # 1024 GPUs: multi-level fabric
    assert env["NCCL_CROSS_NIC"] == "0"  # rail-optimised
    assert "NCCL_IB_GID_INDEX" not in env
    assert lab.nccl[0].env["NCCL_IB_DISABLE"] == "1"
    data = stack("dev")
    data["fabric"]["kind"] = "roce"
    data["fabric"]["topology"] = "single-switch"
    data["networks"]["roce_rails"] = "10.30.0.0/16"
    env = plan_of(data).nccl[0].env
    assert env["NCCL_IB_GID_INDEX"] == "3" and env["NCCL_CROSS_NIC"] == "1"
    assert env["NCCL_IB_QPS_PER_CONNECTION"] == "1" and env["NCCL_IB_ADAPTIVE_ROUTING"] == "0"


def test_sizing_names_bottleneck(prod: Any) -> None:
    s = prod.sizing
    supply = [la for la in s.layers if la.kind == "supply"]
    assert s.aggregate_read_GBps == min(la.read_GBps for la in supply)
    assert s.read_bottleneck == min(supply, key=lambda la: la.read_GBps).name
    assert s.gpus_fed == math.floor(s.aggregate_read_GBps / s.read_per_gpu_GBps)


def test_prod_is_sized_to_feed_its_gpus_and_checkpoint(prod: Any) -> None:
    s = prod.sizing
    assert s.gpus_fed >= s.gpus_total
    assert s.checkpoint.meets_budget
    assert s.checkpoint.bytes == 70e9 * 14
    assert len(prod.groups["kiln_lustre_oss"]) >= s.recommended_oss_nodes


def test_missed_budget_is_a_warning_not_an_error(stack: Any) -> None:
    data = stack("dev")
    data["workload"]["model_params_B"] = 250
    data["workload"]["checkpoint"] = {"interval_min": 30, "budget_fraction": 0.02}
    plan = plan_of(data)
    assert not plan.sizing.checkpoint.meets_budget
    [w] = [w for w in plan.warnings if "over its budget" in w.problem]
    assert w.severity == "warning" and w.path == "workload.checkpoint.budget_fraction" and w.value == 0.02
    assert "OSS" in w.fix
    doc = plan_to_dict(plan)
    assert doc["warnings"] == [i.line() for i in plan.warnings]


def test_targets_cover_every_check(prod: Any, lab: Any) -> None:
    checks = {t.check for t in prod.targets}
    for needed in (
        "fabric.ib_write_bw",
        "fabric.nccl_allreduce_inter",
        "storage.fio_lustre_read",
        "storage.ior_easy_write",
        "storage.mdtest_create",
        "objectstore.s3_get",
        "network.iperf3",
        "gpu.h2d_bw",
        "conformance.lnet",
    ):
        assert needed in checks
    for t in prod.targets:
        if t.higher_is_better:
            assert t.fail <= t.warn <= t.expected and t.expected > 0, t.check
        assert t.why and t.unit
    assert "fabric.ib_write_bw" not in {t.check for t in lab.targets}  # tcp lab: no RDMA rails


def test_plan_is_frozen(prod: Any) -> None:
    with pytest.raises(AttributeError):
        prod.stack = "x"


def test_default_quota_policy(stack: Any) -> None:
    plan = build_plan(load_stack("dev"))
    user, project = plan.quota_defaults
    assert user.args() == ["-U", "-b", "2147483648", "-B", "2306867200", "-i", "5000000", "-I", "5500000"]
    assert (project.type, project.block_soft_KiB, project.inode_hard) == ("project", 20 << 30, 0)
    assert build_plan(load_stack("lab")).quota_defaults == ()


def test_default_quota_policy_refusals(stack: Any) -> None:
    data = stack("dev")
    data["lustre"]["quotas"] = {
        "enforce": "ug",
        "defaults": {
            "user": {"block_soft": "1M"},
            "group": {"block_soft": "2T", "block_hard": "1T", "inode_hard": 1000},
            "project": {"block_soft": "1T"},
        },
    }
    with pytest.raises(SpecError) as exc:
        plan_of(data)
    by = {(i.path, i.value) for i in exc.value.issues if not isinstance(i.value, dict)}
    assert ("lustre.quotas.defaults.user.block_soft", "1M") in by  # 1024 KiB: lfs warns below the minimum qunit
    assert ("lustre.quotas.defaults.group.block_soft", "2T") in by  # soft above hard
    assert ("lustre.quotas.defaults.group.inode_hard", 1000) in by
    assert any(i.path == "lustre.quotas.defaults.project" and "does not enforce" in i.problem
               for i in exc.value.issues)
    data["lustre"]["quotas"] = {"defaults": {"user": {}}}
    with pytest.raises(SpecError) as exc:
        plan_of(data)
    assert exc.value.issues[0].path == "lustre.quotas.defaults.user" and "no limit" in exc.value.issues[0].problem
    data["lustre"]["quotas"] = {"defaults": {"user": {"block_soft": "2 T"}}}
    with pytest.raises(SpecError) as exc:
        plan_of(data)
    assert exc.value.issues[0].path.startswith("lustre.quotas.defaults.user.block_soft")


@pytest.mark.parametrize("include_hosts", [True, False])
@pytest.mark.parametrize("stack", ["dev", "lab", "prod-h100"])
def test_streamed_json_is_the_document_byte_for_byte(stack: str, include_hosts: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serialize, "HOSTS_PER_CHUNK", 5)  # several chunks even on a small stack
    plan = build_plan(load_stack(stack))
    streamed = "".join(serialize.plan_json(plan, include_hosts=include_hosts))
    assert streamed == json.dumps(plan_to_dict(plan, include_hosts=include_hosts))
