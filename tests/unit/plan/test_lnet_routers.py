"""LNet routers between fabrics: spec checks, router hosts and routes, inventory, lnet.conf, tuning and sizing."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from kiln.plan import build_plan
from kiln.plan.model import Plan
from kiln.plan.serialize import plan_to_dict
from kiln.render.firewall import firewall_rules
from kiln.render.inventory import render_inventory
from kiln.render.report import render_plan_report
from kiln.spec import SpecError, validate
from kiln.yamlio import load_inventory
from tests.conftest import stack_data
from tests.unit.hardening.test_templates import render

NIC = "cx7-ndr400"


def routed(count: int = 2, server_nics: int = 1) -> dict[str, Any]:
    """The dev stack with clients on o2ib0, servers on o2ib1 and one router group between them."""
    d = stack_data("dev")
    lu = d["lustre"]
    lu["lnet"] = [{"name": "o2ib0", "hosts": "clients"}, {"name": "o2ib1", "hosts": "servers"}]
    lu["routers"] = [{
        "name": "rtr", "count": count, "client_net": "o2ib0", "server_net": "o2ib1",
        "client_nics": {"count": 1, "nic": NIC}, "server_nics": {"count": server_nics, "nic": NIC},
    }]
    return d


def plan_of(data: dict[str, Any]) -> Plan:
    return build_plan(validate(data))


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as exc:
        plan_of(data)
    return [(i.path, i.problem) for i in exc.value.issues]


def test_router_hosts_join_both_networks_and_clients_and_servers_keep_to_their_side() -> None:
    plan = plan_of(routed())
    routers = [h for h in plan.hosts if h.role == "router"]
    assert [h.name for h in routers] == ["rtr-01", "rtr-02"]
    assert plan.groups["kiln_lnet_routers"] == ("rtr-01", "rtr-02")
    assert plan.groups["kiln_lnet_router_rtr"] == ("rtr-01", "rtr-02")
    for h in routers:
        assert sorted(nid.split("@")[1] for nid in h.nids) == ["o2ib0", "o2ib1"]
        assert h.name not in plan.groups["kiln_lustre_clients"]
    assert all(nid.endswith("@o2ib0") for nid in plan.host("gpu001").nids)
    assert all(nid.endswith("@o2ib1") for nid in plan.host("oss01").nids)
    assert all(nid.endswith("@o2ib1") for nids in plan.mgs_nids for nid in nids)


def test_routes_point_each_side_at_the_routers_nids_on_its_own_network() -> None:
    plan = plan_of(routed())
    r1, r2 = (plan.host(n) for n in ("rtr-01", "rtr-02"))
    client_routes = plan.routes_for(plan.host("gpu002"))
    assert [(r.net, r.gateway) for r in client_routes] == [
        ("o2ib1", r1.nids[0]), ("o2ib1", r2.nids[0]),
    ]
    assert all(r.gateway.endswith("@o2ib0") for r in client_routes)
    server_routes = plan.routes_for(plan.host("mds01"))
    assert [(r.net, r.gateway) for r in server_routes] == [("o2ib0", r1.nids[1]), ("o2ib0", r2.nids[1])]
    assert plan.routes_for(r1) == ()


def test_inventory_carries_routes_routing_and_the_router_group() -> None:
    files = render_inventory(plan_of(routed()))
    client = load_inventory(files["host_vars/gpu001.yml"])
    assert [r["net"] for r in client["lnet_routes"]] == ["o2ib1", "o2ib1"]
    assert "lnet_routing" not in client
    router = load_inventory(files["host_vars/rtr-01.yml"])
    assert router["lnet_routing"] is True and "lnet_routes" not in router
    assert sorted(i["net"] for i in router["lnet_interfaces"]) == ["o2ib0", "o2ib1"]
    hosts = yaml.safe_load(files["hosts.yml"])["all"]["children"]
    assert set(hosts["kiln_lnet_routers"]["hosts"]) == {"rtr-01", "rtr-02"}
    # A spec without routers writes no route variables.
    plain = render_inventory(plan_of(stack_data("dev")))
    assert "lnet_routes" not in load_inventory(plain["host_vars/gpu001.yml"])


def test_lnet_conf_renders_routes_after_the_networks_and_routing_on_routers() -> None:
    plan = plan_of(routed())
    client = plan.host("gpu001")
    text = render("lnet", "lnet.conf.j2", {
        "lnet_networks": [{"name": n.name, "lnd": n.lnd, "multi_rail": n.multi_rail} for n in plan.lnet],
        "lnet_interfaces": [{"net": "o2ib0", "interface": "ib8"}, {"net": "o2ib0", "interface": "ib9"}],
        "lnet_routes": [{"net": r.net, "gateway": r.gateway} for r in plan.routes_for(client)],
    })
    data = yaml.safe_load(text)
    assert [n["net type"] for n in data["net"]] == ["o2ib0"]
    assert data["route"] == [{"net": "o2ib1", "gateway": plan.host(h).nids[0]} for h in ("rtr-01", "rtr-02")]
    assert "routing" not in data
    assert text.index("\nnet:") < text.index("\nroute:")
    router = yaml.safe_load(render("lnet", "lnet.conf.j2", {
        "lnet_networks": [{"name": "o2ib0", "lnd": "o2ib"}, {"name": "o2ib1", "lnd": "o2ib"}],
        "lnet_interfaces": [{"net": "o2ib0", "interface": "ib0"}, {"net": "o2ib1", "interface": "ib1"}],
        "lnet_routing": True,
    }))
    assert router["routing"] == {"enable": 1} and "route" not in router


def test_router_health_options_only_on_routed_filesystems() -> None:
    ids = ("lnet.lnet.check_routers_before_use", "lnet.lnet.alive_router_check_interval",
           "lnet.lnet.router_ping_timeout")
    plan = plan_of(routed())
    assert {t.param: t.value for t in plan.tunables if t.id in ids} == {
        "lnet.check_routers_before_use": 1, "lnet.alive_router_check_interval": 60, "lnet.router_ping_timeout": 50,
    }
    assert not [t for t in plan_of(stack_data("dev")).tunables if t.id in ids]
    # The registry's range holds for overrides too: 0 would turn router checks off.
    data = routed()
    data["overrides"] = {"lnet.lnet.alive_router_check_interval": 0}
    assert any("alive_router_check_interval" in path for path, _ in problems(data))


def test_routers_bound_the_client_to_server_path() -> None:
    plan = plan_of(routed(count=1))
    layers = {la.name: la for la in plan.sizing.layers}
    rtr = layers["lnet_routers"]
    assert "lnet_router" in rtr.factors
    # one router, one NDR400 NIC a side: 50 GB/s × rdma_payload 0.9 × lnet_o2ib 0.85 × lnet_router 0.9
    assert rtr.read_GBps == pytest.approx(50 * 0.9 * 0.85 * 0.9)
    assert plan.sizing.read_bottleneck == "lnet_routers" and plan.sizing.write_bottleneck == "lnet_routers"
    assert plan.sizing.aggregate_read_GBps <= rtr.read_GBps
    assert plan.sizing.aggregate_write_GBps <= rtr.write_GBps
    assert "lnet_routers" not in {la.name for la in plan_of(stack_data("dev")).sizing.layers}


def test_more_routers_or_router_nics_never_lower_bandwidth() -> None:
    rates = [plan_of(routed(count=n)).sizing.aggregate_read_GBps for n in (1, 2, 4, 8)]
    assert rates == sorted(rates)
    narrow, wide = (plan_of(routed(count=1, server_nics=n)).sizing.aggregate_read_GBps for n in (1, 2))
    assert narrow == wide  # the client side (one NIC) stays the narrower side of each router


def test_a_network_shared_by_both_sides_leaves_the_routers_out_of_sizing() -> None:
    data = routed(count=1)
    data["lustre"]["lnet"].append({"name": "o2ib2"})
    plan = plan_of(data)
    assert "lnet_routers" not in {la.name for la in plan.sizing.layers}


@pytest.mark.parametrize(
    ("edit", "path", "words"),
    [
        (lambda lu: lu["routers"][0].update(server_net="o2ib5"), "lustre.routers[0].server_net",
         "not a network of lustre.lnet"),
        (lambda lu: lu["routers"][0].update(server_net="o2ib0"), "lustre.routers[0].server_net",
         "two different networks"),
        (lambda lu: lu["lnet"][1].update(hosts="all"), "lustre.routers[0].server_net", "already on it"),
        (lambda lu: lu["routers"][0].update(client_net="o2ib1", server_net="o2ib0"), "lustre.routers[0].client_net",
         "already on it"),
        (lambda lu: lu["routers"].clear(), "lustre.routers", "cannot reach servers on o2ib1"),
        (lambda lu: lu["lnet"].append({"name": "o2ib2", "hosts": "servers"}), "lustre.routers",
         "cannot reach servers on o2ib2"),
        (lambda lu: lu["lnet"].__setitem__(1, {"name": "o2ib1"}) or lu.update(routers=[]), "lustre.lnet",
         "no network is for servers only"),
        (lambda lu: lu.update(lnet=[{"name": "o2ib0"}]), "lustre.routers", "nothing to route"),
        (lambda lu: lu["routers"][0].update(hostname_prefix="gpu0", count=2), "lustre.routers[0].hostname_prefix",
         "would be generated by both"),
        (lambda lu: lu["routers"].append(copy.deepcopy(lu["routers"][0])), "lustre.routers[1].name",
         "router group name"),
        (lambda lu: lu["routers"][0]["server_nics"].update(nic="no-such-nic"), "lustre.routers[0].server_nics.nic",
         "unknown NIC model"),
    ],
)
def test_bad_router_specs_name_the_field_and_the_fix(edit: Any, path: str, words: str) -> None:
    data = routed()
    edit(data["lustre"])
    found = problems(data)
    assert any(p == path and words in problem for p, problem in found), found


def test_router_nets_are_written_with_their_number() -> None:
    data = routed()
    data["lustre"]["lnet"][0]["name"] = "o2ib"
    assert validate(data).lustre.routers[0].client_net == "o2ib0"
    assert plan_of(data).host("gpu001").nids[0].endswith("@o2ib0")


def test_lnet_selftest_pair_target_counts_the_router_crossing() -> None:
    def selftest(data: dict[str, Any]) -> float:
        return next(t.expected for t in plan_of(data).targets if t.check == "storage.lnet_selftest")

    direct = selftest(stack_data("dev"))
    assert selftest(routed(count=4)) == pytest.approx(direct * 0.9)  # lnet_router on the same links
    assert selftest(routed(count=1)) == pytest.approx(50 * 0.9 * 0.85 * 0.9)  # one router's single NIC


def test_plan_json_and_report_list_the_gateways_only_when_routed() -> None:
    plan = plan_of(routed())
    routes = plan_to_dict(plan)["lustre"]["lnet_routes"]
    assert {(r["side"], r["via"], r["net"], r["router"]) for r in routes} == {
        ("clients", "o2ib0", "o2ib1", "rtr-01"), ("clients", "o2ib0", "o2ib1", "rtr-02"),
        ("servers", "o2ib1", "o2ib0", "rtr-01"), ("servers", "o2ib1", "o2ib0", "rtr-02"),
    }
    report = render_plan_report(plan)
    assert "LNET ROUTES (4 gateways" in report
    assert f"clients on o2ib0 → o2ib1 via {plan.host('rtr-01').nids[0]} (rtr-01)" in report
    assert "lnet_routers" in report.split("TUNING")[0]
    plain = plan_of(stack_data("dev"))
    assert "lnet_routes" not in plan_to_dict(plain)["lustre"]
    assert "LNET ROUTES" not in render_plan_report(plain)


def test_routers_on_a_tcp_fabric_open_the_lnet_acceptor() -> None:
    d = stack_data("lab")
    lu = d["lustre"]
    lu["lnet"] = [{"name": "tcp0", "hosts": "clients"}, {"name": "tcp1", "hosts": "servers"}]
    lu["routers"] = [{
        "name": "rtr", "count": 1, "client_net": "tcp0", "server_net": "tcp1",
        "client_nics": {"count": 1, "nic": "lab-veth"}, "server_nics": {"count": 1, "nic": "lab-veth"},
    }]
    spec = validate(d)
    plan = build_plan(spec)
    router = plan.host("rtr-01")
    assert [nid.split("@")[1] for nid in router.nids] == ["tcp0", "tcp1"]
    assert [n.interface for n in router.nics] == ["eth1", "eth2"]
    rules = {r["name"]: r for r in firewall_rules(plan, router)}
    assert rules["lnet"]["ports"] == [988]
