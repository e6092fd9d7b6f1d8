"""A host whose one port serves both compute rails and storage (compute.pools[].shared_storage_rails)."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import SpecError, validate
from kiln.yamlio import load_inventory


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


def _issue(data: dict[str, Any], path: str) -> Any:
    with pytest.raises(SpecError) as exc:
        validate(data, "test")
    match = [i for i in exc.value.issues if i.path == path]
    assert match, f"no issue at {path}: {[i.path for i in exc.value.issues]}"
    assert match[0].fix
    return match[0]


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


def test_a_shared_port_not_on_the_host_is_refused(stack: Any) -> None:
    issue = _issue(_shared(stack("prod-h100"), ["mlx5_1"]), "compute.pools[0].shared_storage_rails[0]")
    assert issue.value == "mlx5_1" and "mlx5_0" in issue.fix


def test_nccl_must_use_the_shared_port(stack: Any) -> None:
    data = _shared(stack("prod-h100"), ["mlx5_0"])
    data["compute"]["pools"][0]["nccl_hcas"] = ["mlx5_3", "mlx5_4"]
    assert "mlx5_0" in _issue(data, "compute.pools[0].nccl_hcas").fix


def test_a_port_listed_twice_is_refused(stack: Any) -> None:
    data = _shared(stack("prod-h100"), ["mlx5_0", "mlx5_0"])
    _issue(data, "compute.pools[0].shared_storage_rails[1]")
    data = _shared(stack("prod-h100"), ["mlx5_0"], storage_nics=1)
    data["compute"]["pools"][0]["storage_nics"]["devices"] = ["mlx5_0"]
    _issue(data, "compute.pools[0].storage_nics.devices")


def test_no_storage_port_at_all_is_refused(stack: Any) -> None:
    issue = _issue(_shared(stack("prod-h100"), []), "compute.pools[0].storage_nics.count")
    assert "shared_storage_rails" in issue.fix


def test_a_tcp_fabric_cannot_share(stack: Any) -> None:
    data = stack("lab")
    pool = data["compute"]["pools"][0]
    if data["fabric"]["kind"] != "tcp" or "compute_rails" not in pool:
        pytest.skip("the lab stack is not a tcp GPU pool")
    pool["shared_storage_rails"] = ["mlx5_0"]
    _issue(data, "compute.pools[0].shared_storage_rails")


def test_a_storage_only_pool_cannot_share(stack: Any) -> None:
    data = stack("prod-h100")
    pool = data["compute"]["pools"][0]
    for key in ("gpu", "compute_rails", "nccl_hcas", "topology_file"):
        pool.pop(key, None)
    pool["shared_storage_rails"] = ["mlx5_0"]
    with pytest.raises(SpecError) as exc:
        validate(data, "test")
    assert "shared_storage_rails" in str(exc.value)
