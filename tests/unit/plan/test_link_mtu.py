"""Link MTU per fabric: RoCE netdevs default to 9000 so the RDMA path MTU is 4096; IPoIB keeps 4096 less 4."""

from __future__ import annotations

from typing import Any

import pytest

from kiln import knowledge
from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec.loader import validate
from kiln.yamlio import load_inventory


def _roce(stack: Any) -> dict[str, Any]:
    data: dict[str, Any] = stack("dev")
    data["fabric"]["kind"] = "roce"  # cx7-ndr400 runs InfiniBand and RoCE
    data["networks"]["roce_rails"] = "10.30.0.0/16"
    return data


def _host_vars(plan: Any, key: str) -> list[dict[str, Any]]:
    files = render_inventory(plan)
    return list(load_inventory(files[f"host_vars/{plan.hosts[0].name}.yml"])[key])


@pytest.mark.parametrize(("netdev", "path"), [(1500, 1024), (4096, 2048), (4191, 2048), (4192, 4096), (9000, 4096)])
def test_roce_path_mtu_follows_iboe_get_mtu(netdev: int, path: int) -> None:
    # include/rdma/ib_addr.h iboe_get_mtu(): netdev MTU less GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4.
    assert knowledge.load().tuning.protocol.roce_path_mtu(netdev) == path


def test_roce_netdevs_default_to_jumbo_frames(stack: Any) -> None:
    plan = build_plan(validate(_roce(stack), "test"), "test")
    assert plan.rdma.mtu == 9000
    assert {i["mtu"] for i in _host_vars(plan, "rdma_roce_interfaces")} == {9000}
    assert not [w for w in plan.warnings if w.path == "fabric.mtu"]


def test_roce_netdev_mtu_of_4096_warns_of_a_2048_path_mtu(stack: Any) -> None:
    data = _roce(stack)
    data["fabric"]["mtu"] = 4096
    plan = build_plan(validate(data, "test"), "test")
    (w,) = [w for w in plan.warnings if w.path == "fabric.mtu"]
    assert w.value == 4096 and "path MTU of 2048" in w.problem and "4192" in w.fix


def test_infiniband_keeps_the_4096_ib_mtu_and_4092_on_ipoib(stack: Any) -> None:
    plan = build_plan(validate(stack("dev"), "test"), "test")
    assert (plan.rdma.mtu, plan.rdma.ipoib_mtu) == (4096, 4092)
    assert {i["mtu"] for i in _host_vars(plan, "rdma_ipoib_interfaces")} == {4092}
