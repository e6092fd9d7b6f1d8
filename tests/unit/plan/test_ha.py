"""Failover pairs in the plan (kiln/plan/ha.py): healthLNET's devices and independent NIDs per node with a
majority threshold, md arrays and pools under their targets, fence delay on one node, Corosync links and the
takeover bounds of the ha.* targets."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kiln import knowledge
from kiln.plan import build_plan
from kiln.plan.groups import COMPUTE, LNET_ROUTERS, LUSTRE_SERVERS
from kiln.spec import load_stack, stack_path, validate


def test_every_node_watches_its_storage_interfaces() -> None:
    plan = build_plan(load_stack("prod-h100"))
    for pair in plan.ha.pairs:
        for node in pair.nodes:
            host = plan.host(node.name)
            assert node.lnet is not None
            assert node.lnet.devices == tuple(n.interface for n in host.nics if n.carries_storage)


def test_nodes_ping_nids_outside_their_pair_and_not_the_same_as_the_partner() -> None:
    plan = build_plan(load_stack("prod-h100"))
    nid_of = {nid: h.name for h in plan.hosts for nid in h.nids}
    for pair in plan.ha.pairs:
        names = {n.name for n in pair.nodes}
        a, b = pair.nodes
        assert a.lnet is not None and b.lnet is not None
        for node in pair.nodes:
            assert node.lnet is not None
            assert not {nid_of[nid] for nid in node.lnet.host_list} & names  # never the pair itself
            assert len(node.lnet.host_list) == 3 and node.lnet.threshold == 2  # a majority must answer
        assert a.lnet.host_list != b.lnet.host_list


def test_small_cluster_pings_clients_after_other_servers() -> None:
    plan = build_plan(load_stack("lab"))
    (pair,) = plan.ha.pairs
    assert [n.name for n in pair.nodes] == ["oss01", "oss02"]
    nid_of = {nid: h.name for h in plan.hosts for nid in h.nids}
    for node in pair.nodes:
        assert node.lnet is not None
        assert [nid_of[n] for n in node.lnet.host_list] == ["mds01", "gpu001", "gpu002"]
        assert node.lnet.devices == ("eth1",)


def test_md_targets_carry_their_array_and_members() -> None:
    plan = build_plan(load_stack("prod-h100"))
    res = {r.name: r for p in plan.ha.pairs for r in p.resources}
    assert res["MGS"].md_device == "/dev/md/prod-mgt" and len(res["MGS"].md_members) == 2
    assert res["prod-OST0008"].md_device == "/dev/md/prod-ost0008" and res["prod-OST0008"].node == "oss02"
    assert all(r.zpool == "" for r in res.values())


def test_zfs_targets_carry_their_pool() -> None:
    spec = load_stack("prod-h100")
    spec = spec.model_copy(update={"lustre": spec.lustre.model_copy(update={"backend": "zfs"})})
    plan = build_plan(spec)
    res = {r.name: r for p in plan.ha.pairs for r in p.resources}
    assert res["prod-OST0000"].zpool == "prod-ost0000" and res["prod-OST0000"].md_device == ""


def test_only_the_first_node_fence_device_waits() -> None:
    plan = build_plan(load_stack("prod-h100"))
    for pair in plan.ha.pairs:
        assert [n.fence_delay_s for n in pair.nodes] == [plan.ha.timing.fence_delay_s, 0]


def test_corosync_gets_a_second_link_on_the_storage_network() -> None:
    plan = build_plan(load_stack("lab"))
    (pair,) = plan.ha.pairs
    assert pair.nodes[0].links == ("10.89.10.5", "10.89.20.5")


def test_takeover_bounds_add_up_from_the_timing() -> None:
    plan = build_plan(load_stack("lab"))
    t = plan.ha.timing
    assert t.consensus_ms == 3600  # 1.2 × token (corosync.conf(5) consensus)
    # detection 3.0 + 3.6 + 0.05 s, fence delay 5 s, fence action 15 s, one start step (OSTs) of 10 s
    assert t.partner_loss_bound_s == 36.65
    assert t.lnet_loss_bound_s == 10 + 5 + 2 * 10
    targets = {x.check: x for x in plan.targets if x.check.startswith("ha.")}
    assert set(targets) == {"ha.fencing", "ha.partner_loss", "ha.lnet_loss"}
    assert targets["ha.partner_loss"].fail == 36.65 and targets["ha.partner_loss"].group == LUSTRE_SERVERS


def test_a_stack_without_pairs_still_lists_the_drills() -> None:
    plan = build_plan(load_stack("dev"))
    assert plan.ha.pairs == ()
    assert {x.check for x in plan.targets if x.check.startswith("ha.")} == {"ha.fencing", "ha.partner_loss",
                                                                          "ha.lnet_loss"}


def test_pairing_only_the_oss_tier_warns_about_the_mgs() -> None:
    plan = build_plan(load_stack("lab"))
    assert any(w.path == "lustre.ha.tiers" for w in plan.warnings)
    assert plan.host("mds01").failover_partner is None and plan.host("oss01").failover_partner == "oss02"


def _ping_list_by_definition(plan: Any, node: str, pair: set[str], shift: int, wanted: int) -> tuple[str, ...]:
    """healthLNET's host list straight from its definition: one NID per host outside the pair on a network the node
    has, other servers from the one after it (moved on by `shift`), then LNet routers, then clients."""
    host = plan.host(node)
    nets = {nid.split("@", 1)[1] for nid in host.nids}
    nid = {h.name: next((n for n in h.nids if n.split("@", 1)[1] in nets), None) for h in plan.hosts}
    outside = [h for h in plan.hosts if h.name not in pair and nid[h.name]]
    servers = [h.name for h in plan.hosts if LUSTRE_SERVERS in h.groups]
    after = servers.index(node) + 1
    ring = [s for s in servers[after:] + servers[:after] if s not in pair and nid[s]]
    k = shift % len(ring) if ring else 0
    rest = [h.name for g in (LNET_ROUTERS, COMPUTE) for h in outside if g in h.groups]
    return tuple(nid[n] or "" for n in (ring[k:] + ring[:k] + rest)[:wanted])


@pytest.mark.parametrize("oss", [4, 6, 10, 16])
def test_ping_lists_follow_the_definition_on_larger_fleets(oss: int) -> None:
    doc = yaml.safe_load(stack_path("prod-h100").read_text())["config"]["kiln:cluster"]
    doc["lustre"]["oss"]["nodes"] = oss
    plan = build_plan(validate(doc))
    wanted = knowledge.load().tuning.ha.lnet_ping_hosts.value
    assert plan.ha.pairs
    for pair in plan.ha.pairs:
        names = {n.name for n in pair.nodes}
        for i, node in enumerate(pair.nodes):
            assert node.lnet is not None
            assert node.lnet.host_list == _ping_list_by_definition(plan, node.name, names, i * wanted, wanted)
