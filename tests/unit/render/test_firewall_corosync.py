"""The Corosync rule of a failover pair's servers (kiln/render/firewall.py): knet's UDP port (5405, corosync.conf(5);
RHEL 9 HA "Enabling ports for the High Availability Add-On") from the partner's link addresses only, and no such
rule on a server without a partner. Without it, the partners' knet packets pass only through conntrack."""

from __future__ import annotations

from kiln.plan import build_plan
from kiln.render.firewall import firewall_rules
from kiln.spec import load_stack


def test_each_server_of_a_pair_admits_corosync_from_its_partner_only() -> None:
    plan = build_plan(load_stack("lab"))
    (rule,) = [r for r in firewall_rules(plan, plan.host("oss01")) if r["name"] == "corosync"]
    partner = next(n for n in plan.ha.pairs[0].nodes if n.name == "oss02")
    assert rule["proto"] == "udp" and rule["ports"] == [5405]
    assert rule["sources"] == [f"{a}/32" for a in partner.links] and len(partner.links) == 2  # two knet links


def test_a_server_without_partner_has_no_corosync_rule() -> None:
    plan = build_plan(load_stack("lab"))
    assert not [r for r in firewall_rules(plan, plan.host("mds01")) if r["name"] == "corosync"]
