"""A host whose one port serves both compute rails and storage (compute.pools[].shared_storage_rails)."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import validate
from kiln.yamlio import load_inventory
from tests.unit.refusals import Refusal, refusal, refused


def _shared(data: dict[str, Any], shared: list[str], storage_nics: int = 0) -> dict[str, Any]:
    """The stack's first pool with `storage_nics` storage ports (their names cut to match) and `shared` rails
    (prod-h100's rails are a DGX H100's: mlx5_0, mlx5_3, ..., mlx5_11)."""
    pool = data["compute"]["pools"][0]
    group = pool["storage_nics"]
    group["count"] = storage_nics
    for field in ("devices", "interfaces"):
        if field in group:
            group[field] = group[field][:storage_nics]
    pool["shared_storage_rails"] = shared
    return data


def _sharing(shared: list[str], storage_nics: int = 0) -> dict[str, Any]:
    """_shared as a table's edit."""
    return {"compute.pools.0.storage_nics.count": storage_nics, "compute.pools.0.shared_storage_rails": shared}


def _storage_only(data: dict[str, Any]) -> None:
    for key in ("gpu", "compute_rails", "nccl_hcas", "topology_file"):
        data["compute"]["pools"][0].pop(key, None)


def test_a_shared_port_is_one_port_for_lnet_and_nccl(stack: Any) -> None:
    spec = validate(_shared(stack("prod-h100"), ["mlx5_0", "mlx5_3"]), "test")
    plan = build_plan(spec, "test")
    host = next(h for h in plan.hosts if h.pool == "h100")
    shared = [n for n in host.nics if n.role == "shared"]
    assert [n.device for n in shared] == ["mlx5_0", "mlx5_3"]
    assert all(n.nid and n.nid.startswith(f"{n.address}@o2ib") for n in shared)
    assert len(host.nics) == 8  # the eight rails, no extra storage port
    hca = next(t.value for t in plan.tunables if t.param == "NCCL_IB_HCA" and t.pool == "h100")
    assert {"mlx5_0", "mlx5_3"} <= set(str(hca).lstrip("=").split(","))
    files = render_inventory(plan)
    hv = load_inventory(files[f"host_vars/{host.name}.yml"])
    assert [i["interface"] for i in hv["lnet_interfaces"]] == ["ibp24s0", "ibp64s0"]  # the rails of mlx5_0, mlx5_3
    assert {d["device"]: d["role"] for d in hv["rdma_expected_devices"]}["mlx5_0"] == "shared"
    assert [i["name"] for i in hv["rdma_ipoib_interfaces"]] == ["ibp24s0", "ibp64s0"]


def test_the_port_is_counted_once(stack: Any) -> None:
    """Two dedicated storage NICs and two shared rail ports give the same client link; a shared port
    added beside the dedicated ones adds its rate once, and the plan notes the contention."""
    dedicated = build_plan(validate(stack("prod-h100"), "test"), "test").sizing
    shared = build_plan(validate(_shared(stack("prod-h100"), ["mlx5_0", "mlx5_3"]), "test"), "test").sizing
    both = build_plan(validate(_shared(stack("prod-h100"), ["mlx5_0"], storage_nics=2), "test"), "test").sizing

    def layer(s: Any, name: str) -> float:
        return float(next(la.read_GBps for la in s.layers if la.name == name))

    assert layer(shared, "client_nics") == pytest.approx(layer(dedicated, "client_nics"))
    assert layer(both, "client_nics") == pytest.approx(layer(dedicated, "client_nics") * 1.5)
    assert any("also carry storage" in n for n in shared.notes)
    assert not any("also carry storage" in n for n in dedicated.notes)


REFUSALS = [
    refusal("a shared port not on the host", "prod-h100", _sharing(["mlx5_1"]),
            "compute.pools[0].shared_storage_rails[0]", value="mlx5_1", fix="mlx5_0"),
    refusal("NCCL must use the shared port", "prod-h100",
            (_sharing(["mlx5_0"]), {"compute.pools.0.nccl_hcas": ["mlx5_3", "mlx5_4"]}),
            "compute.pools[0].nccl_hcas", fix="mlx5_0"),
    refusal("a port listed twice as shared", "prod-h100", _sharing(["mlx5_0", "mlx5_0"]),
            "compute.pools[0].shared_storage_rails[1]"),
    refusal("a shared port also a storage NIC", "prod-h100",
            (_sharing(["mlx5_0"], storage_nics=1), {"compute.pools.0.storage_nics.devices": ["mlx5_0"]}),
            "compute.pools[0].storage_nics.devices"),
    refusal("no storage port at all", "prod-h100", _sharing([]), "compute.pools[0].storage_nics.count",
            fix="shared_storage_rails"),
    refusal("a tcp fabric cannot share", "lab", {"compute.pools.0.shared_storage_rails": ["mlx5_0"]},
            "compute.pools[0].shared_storage_rails"),
    refusal("a storage-only pool cannot share", "prod-h100",
            (_storage_only, {"compute.pools.0.shared_storage_rails": ["mlx5_0"]}), "compute.pools[0]",
            problem="shared_storage_rails"),
]


@pytest.mark.parametrize("row", REFUSALS)
def test_refused(row: Refusal) -> None:
    refused(row)


def test_the_lab_is_a_tcp_gpu_pool(stack: Any) -> None:
    """The tcp row above refuses a shared port on the lab's own GPU pool."""
    data = stack("lab")
    assert data["fabric"]["kind"] == "tcp" and "compute_rails" in data["compute"]["pools"][0]
