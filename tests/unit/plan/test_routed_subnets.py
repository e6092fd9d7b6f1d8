"""Routed filesystems: each LNet network's addresses come from its own IP subnet (a slice of networks.storage by
default, or lustre.lnet[].subnet), and hosts, NIDs, routes and the inventory follow it."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec.errors import SpecError
from kiln.spec.loader import validate
from kiln.yamlio import load_inventory

NIC = {"count": 1, "nic": "cx7-ndr400"}


def _routed(stack: Any) -> dict[str, Any]:
    data: dict[str, Any] = stack("dev")  # networks.storage 10.21.0.0/24
    data["lustre"]["lnet"] = [{"name": "o2ib0", "hosts": "clients"}, {"name": "o2ib1", "hosts": "servers"}]
    data["lustre"]["routers"] = [{"name": "rtr", "count": 2, "client_net": "o2ib0", "server_net": "o2ib1",
                                  "client_nics": NIC, "server_nics": NIC}]
    return data


def _in(address: str, cidr: str) -> bool:
    return ipaddress.ip_address(address) in ipaddress.ip_network(cidr)


def test_each_network_of_a_routed_filesystem_gets_a_slice_of_the_storage_subnet(stack: Any) -> None:
    plan = build_plan(validate(_routed(stack), "test"), "test")
    assert plan.networks.lnet == {"o2ib0": "10.21.0.0/25", "o2ib1": "10.21.0.128/25"}
    for h in plan.hosts:
        for n in h.nics:
            if n.nid:
                assert _in(str(n.address), plan.networks.lnet[n.nid.split("@")[1]]), (h.name, n.nid)
    router = next(h for h in plan.hosts if h.role == "router")
    assert [n.nid.split("@")[1] for n in router.nics if n.nid] == ["o2ib0", "o2ib1"]
    # the clients' route to o2ib1 goes through the router's address on the clients' own subnet
    gpu = next(h for h in plan.hosts if h.role == "compute")
    assert all(_in(r.gateway.split("@")[0], "10.21.0.0/25") for r in plan.routes_for(gpu))
    files = render_inventory(plan)
    hv = load_inventory(files[f"host_vars/{router.name}.yml"])
    assert {i["prefix"] for i in hv["kiln_storage_interfaces"]} == {25}
    assert all(i["address"].endswith("/25") for i in hv["rdma_ipoib_interfaces"])


def test_explicit_subnets_are_used_and_reach_the_firewall(stack: Any) -> None:
    data = _routed(stack)
    data["lustre"]["lnet"][0]["subnet"] = "10.40.0.0/16"
    plan = build_plan(validate(data, "test"), "test")
    assert plan.networks.lnet["o2ib0"] == "10.40.0.0/16"
    assert plan.networks.lnet["o2ib1"] == "10.21.0.128/25"  # still its default slice
    gpu = next(h for h in plan.hosts if h.role == "compute")
    assert all(_in(str(n.address), "10.40.0.0/16") for n in gpu.nics if n.nid)
    assert plan.networks.storage_sources() == ["10.21.0.0/24", "10.40.0.0/16"]


def test_unrouted_networks_keep_sharing_the_storage_subnet(stack: Any) -> None:
    plan = build_plan(validate(stack("dev"), "test"), "test")
    assert plan.networks.lnet == {"o2ib0": "10.21.0.0/24"}


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"lnet": [{"subnet": "10.21.0.0/25"}, {"subnet": "10.21.0.0/24"}]}, "lustre.lnet[1].subnet", "overlaps"),
        ({"lnet": [{"subnet": "10.20.0.0/25"}, {}]}, "lustre.lnet[0].subnet", "networks.management"),
        ({"storage": "10.21.0.0/31"}, "networks.storage", "subnet of its own"),
        ({"storage": "10.21.0.0/29"}, "networks.storage", "(the slice of o2ib1)"),
        ({"lnet": [{"subnet": "10.40.0.0/30"}, {}]}, "lustre.lnet[0].subnet", "addresses needed"),
    ],
)
def test_subnets_that_cannot_work_are_refused(stack: Any, change: dict[str, Any], path: str, words: str) -> None:
    data = _routed(stack)
    for net, extra in zip(data["lustre"]["lnet"], change.get("lnet", [{}, {}]), strict=True):
        net.update(extra)
    if "storage" in change:
        data["networks"]["storage"] = change["storage"]
    with pytest.raises(SpecError) as exc:
        validate(data, "test")
    assert any(i.path == path and words in f"{i.problem} {i.fix}" for i in exc.value.issues), exc.value.issues
