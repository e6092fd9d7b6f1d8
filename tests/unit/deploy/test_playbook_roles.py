"""kiln.deploy.playbook_roles: the roles each playbook of the collection runs on each host of an inventory."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln import yamlio
from kiln.deploy.playbook_roles import hosts_matching, inventory_groups, roles_by_host
from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import load_stack

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOKS = ROOT / "playbooks"

GROUPS = {"all": frozenset({"a", "b", "c", "d"}), "servers": frozenset({"a", "b"}), "mgs": frozenset({"a"}),
          "clients": frozenset({"c", "d"})}


@pytest.mark.parametrize(("pattern", "hosts"), [
    ("all", {"a", "b", "c", "d"}),
    ("servers:clients", {"a", "b", "c", "d"}),
    ("servers:!mgs", {"b"}),
    ("!mgs:servers", {"b"}),  # exclusions apply after the union, wherever they are written
    ("all:&clients", {"c", "d"}),
    ("servers:&{{ kiln_scope | default('all') }}", {"a", "b"}),
    ("servers:&made_by_group_by", {"a", "b"}),
    ("c,d", {"c", "d"}),
    ("nobody", set()),
], ids=["all", "union", "exclusion", "exclusion-first", "intersection", "template", "unknown-group", "hosts",
        "unknown"])
def test_host_patterns_select_as_ansible_does(pattern: str, hosts: set[str]) -> None:
    assert hosts_matching(pattern, GROUPS) == hosts


def test_children_groups_hold_their_childrens_hosts() -> None:
    tree = {"all": {"children": {"kiln_lustre_servers": {"children": {"kiln_lustre_oss": {"hosts": {"oss01": {}}}}},
                                 "kiln_compute": {"hosts": {"gpu001": None}}}}}
    groups = inventory_groups(tree)
    assert groups["kiln_lustre_servers"] == {"oss01"} and groups["all"] == {"oss01", "gpu001"}


@pytest.fixture(scope="module")
def lab_groups() -> dict[str, frozenset[str]]:
    plan = build_plan(load_stack("lab", ROOT / "stacks"), source="lab")
    return inventory_groups(yamlio.load_inventory(render_inventory(plan)["hosts.yml"]))


def test_site_runs_the_server_roles_on_servers_only(lab_groups: dict[str, frozenset[str]]) -> None:
    roles = roles_by_host(PLAYBOOKS / "site.yml", lab_groups)
    assert {"lustre_server", "lustre_ha", "lnet", "common", "firewall"} <= roles["oss01"]
    assert "lustre_client" not in roles["oss01"]
    # The Lustre packages play includes lustre_server under a `when` that holds on servers only.
    assert {"gpu", "nccl", "lustre_client", "datamover"} <= roles["gpu001"]
    assert "lustre_server" not in roles["gpu001"]
    assert "objectstore" in roles["s3-01"] and "gpu" not in roles["s3-01"]


def test_compute_runs_no_storage_role(lab_groups: dict[str, frozenset[str]]) -> None:
    roles = roles_by_host(PLAYBOOKS / "compute.yml", lab_groups)
    assert "lustre_server" not in set().union(*roles.values())
    assert "gpu" in roles["gpu001"] and "gpu" not in roles["oss01"]
