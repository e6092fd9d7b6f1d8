"""Storage-only client hosts: a pool without GPUs or compute rails mounts Lustre and counts on the
storage side, and gets no GPU or NCCL checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.render.manifests import render_manifests
from kiln.spec import SpecError, validate
from kiln.yamlio import load_inventory


def _with_clients(data: dict[str, Any], nodes: int = 4) -> dict[str, Any]:
    gpu_pool = data["compute"]["pools"][0]
    clients = {
        "name": "bench",
        "nodes": nodes,
        "storage_nics": copy.deepcopy(gpu_pool["storage_nics"]),
        "ram_GiB": 256,
        "cpu_cores": 32,
    }
    data["compute"]["pools"].append(clients)
    return data


def test_a_storage_only_pool_plans_as_lustre_clients(stack: Any) -> None:
    base = stack("prod-h100")
    spec = validate(_with_clients(stack("prod-h100")), "test")
    plan = build_plan(spec, "test")
    bench = [h for h in plan.hosts if h.pool == "bench"]
    assert len(bench) == 4 and all(h.gpus == 0 and h.gpu_model is None for h in bench)
    assert all("kiln_lustre_clients" in h.groups for h in bench)
    assert all(n.role != "compute" for h in bench for n in h.nics)
    # no GPU or fabric check for the pool; the GPU pool's checks are still there
    assert not [t for t in plan.targets if t.group == "kiln_pool_bench" and t.check.startswith(("gpu.", "fabric."))]
    assert [t for t in plan.targets if t.check == "fabric.nccl_allreduce_intra"]
    # the clients add storage-side client bandwidth, and no GPU demand
    before = build_plan(validate(base, "test"), "test").sizing
    after = plan.sizing
    layer = {la.name: la for la in after.layers}
    old = {la.name: la for la in before.layers}
    assert layer["client_nics"].read_GBps > old["client_nics"].read_GBps
    assert after.gpus_total == before.gpus_total and after.demand_read_GBps == before.demand_read_GBps


def test_the_pool_renders_without_gpu_work(stack: Any) -> None:
    spec = validate(_with_clients(stack("prod-h100")), "test")
    plan = build_plan(spec, "test")
    group = load_inventory(render_inventory(plan)["group_vars/kiln_pool_bench.yml"])
    assert group["gpu_expected_count"] == 0 and group["gpu_peermem"] is False  # the gpu role skips the hosts
    manifests = "\n".join(render_manifests(plan).values())
    assert "nccl-intra-bench" not in manifests and "nccl-inter-bench" not in manifests


def test_a_cluster_of_storage_clients_only_plans(stack: Any) -> None:
    data = _with_clients(stack("prod-h100"), nodes=10)
    data["compute"]["pools"] = data["compute"]["pools"][1:]
    data.pop("dataflow", None)  # its model links name the GPU pool
    data.pop("pipeline", None)  # so does the token stream's consumer
    plan = build_plan(validate(data, "test"), "test")
    assert plan.sizing.gpus_total == 0 and plan.sizing.demand_read_GBps == 0
    assert any("no GPUs: storage-only clients" in n for n in plan.sizing.notes)


@pytest.mark.parametrize("drop", ["gpu", "compute_rails"])
def test_gpu_and_rails_come_together(stack: Any, drop: str) -> None:
    data = stack("prod-h100")
    del data["compute"]["pools"][0][drop]
    with pytest.raises(SpecError, match=r"compute\.pools\[0\]") as e:
        validate(data, "test")
    assert "storage-only client pool has neither" in str(e.value)
