"""The lustre_ha role's pcs commands (plugins/filter/pacemaker.py) for a prod-like pair: what a real cluster gets
from `kiln inventory prod-h100` — the md arrays under ocf:heartbeat:mdraid (resource-agents 4.12 metadata:
mdadm_conf and md_dev, both required), colocated with and started before their targets, a healthLNET per node and
interface pinned to its node, location rules per node, fencing with one delayed device, tier ordering; and where
the agents those commands name live."""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from kiln_filters import filter_plugin

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import load_stack
from kiln.yamlio import load_inventory

F = filter_plugin("pacemaker")


@pytest.fixture(scope="module")
def pm() -> ModuleType:
    return F


def pair_of(stack: str, host: str) -> dict[str, Any]:
    files = render_inventory(build_plan(load_stack(stack)))
    hv = load_inventory(files[f"host_vars/{host}.yml"])
    gv = load_inventory(files["group_vars/kiln_lustre_servers.yml"])
    return {"nodes": hv["lustre_ha_nodes"], "resources": hv["lustre_ha_resources"],
            "lnet_checks": hv["lustre_ha_lnet_checks"], "fencing": gv["lustre_ha_fencing"],
            "timing": gv["lustre_ha_timing"], "stickiness": 200, "md_conf": "/etc/kiln/mdadm-lustre.conf"}


@pytest.fixture(scope="module")
def prod(pm: ModuleType) -> list[list[str]]:
    return pm.pcs_commands(pair_of("prod-h100", "mds01"))


def test_each_md_array_is_a_mdraid_resource_under_its_target(prod: list[list[str]]) -> None:
    creates = {c[2]: c for c in prod if c[:2] == ["resource", "create"]}
    md = creates["MGS-md"]
    assert md[3:6] == ["ocf:heartbeat:mdraid", "mdadm_conf=/etc/kiln/mdadm-lustre.conf", "md_dev=/dev/md/prod-mgt"]
    assert creates["prod-MDT0001-md"][5] == "md_dev=/dev/md/prod-mdt0001"
    assert ["constraint", "colocation", "add", "MGS", "with", "MGS-md", "INFINITY", "id=MGS-with-storage"] in prod
    assert ["constraint", "order", "start", "MGS-md", "then", "start", "MGS", "kind=Mandatory",
            "id=MGS-after-storage"] in prod
    # the array resource is created before the target that needs it
    order = [c[2] for c in prod if c[:2] == ["resource", "create"]]
    assert order.index("MGS-md") < order.index("MGS")


def test_healthlnet_per_node_and_interface_with_its_own_nids(prod: list[list[str]]) -> None:
    lnet = [c for c in prod if c[:2] == ["resource", "create"] and c[3] == "ocf:lustre:healthLNET"]
    assert [c[2] for c in lnet] == ["lnet-mds01-ibp65s0", "lnet-mds01-ibp193s0", "lnet-mds02-ibp65s0",
                                     "lnet-mds02-ibp193s0"]
    first = lnet[0]
    assert "device=ibp65s0" in first and "name=lnet_ibp65s0" in first and "lctl=true" in first
    hosts = next(a for a in first if a.startswith("host_list="))
    assert "@o2ib0" in hosts and len(hosts.split()) == 3
    assert ["constraint", "location", "lnet-mds01-ibp65s0", "avoids", "mds02"] in prod


def test_a_target_is_banned_only_where_every_interface_is_below_the_threshold(prod: list[list[str]]) -> None:
    rule = next(c for c in prod if "constraint-id=MGS-lnet" in c)
    assert rule[:6] == ["constraint", "location", "MGS", "rule", "constraint-id=MGS-lnet", "score=-INFINITY"]
    per_node = ["and", "(", "not_defined", "lnet_ibp65s0", "or", "lnet_ibp65s0", "lt", "integer", "2", ")",
                "and", "(", "not_defined", "lnet_ibp193s0", "or", "lnet_ibp193s0", "lt", "integer", "2", ")"]
    assert rule[6:] == ["(", "#uname", "eq", "mds01", *per_node, ")", "or",
                        "(", "#uname", "eq", "mds02", *per_node, ")"]


def test_fencing_devices_avoid_their_node_and_the_first_waits(prod: list[list[str]]) -> None:
    stonith = {c[2]: c for c in prod if c[:2] == ["stonith", "create"]}
    assert set(stonith) == {"fence-mds01", "fence-mds02"}
    assert "pcmk_delay_base=5s" in stonith["fence-mds01"]
    assert not any(a.startswith("pcmk_delay_base") for a in stonith["fence-mds02"])
    assert "password_script=cat /etc/kiln/fence-password" in stonith["fence-mds01"]
    assert not any("password=" in a for a in stonith["fence-mds01"])  # never the secret itself
    assert ["constraint", "location", "fence-mds01", "avoids", "mds01"] in prod
    assert prod[0] == ["property", "set", "stonith-enabled=true", "no-quorum-policy=stop"]


def test_tiers_start_in_order_and_optional(prod: list[list[str]]) -> None:
    assert ["constraint", "order", "start", "MGS", "then", "start", "prod-MDT0000", "kind=Optional",
            "id=MGS-before-prod-MDT0000"] in prod


def test_targets_whose_storage_agent_is_missing_are_left_out(pm: ModuleType) -> None:
    pair = pair_of("prod-h100", "mds01")
    kept = pm.usable_resources(pair["resources"], ["ocf:heartbeat:mdraid"])
    assert kept == []
    assert len(pm.usable_resources(pair["resources"], [])) == 3


def test_lab_pair_has_no_md_and_uses_the_lab_fence_agent(pm: ModuleType) -> None:
    cmds = pm.pcs_commands(pair_of("lab", "oss01"))
    assert not any("ocf:heartbeat:mdraid" in c for c in cmds)
    fence = next(c for c in cmds if c[:3] == ["stonith", "create", "fence-oss01"])
    assert fence[3:6] == ["fence_kiln_lab", "pcmk_host_list=oss01", "ip=kiln-lab-oss01"]


@pytest.mark.parametrize(("agent", "path"), [
    ("ocf:lustre:Lustre", "/usr/lib/ocf/resource.d/lustre/Lustre"),
    ("ocf:heartbeat:ZFS", "/usr/lib/ocf/resource.d/heartbeat/ZFS"),
    # As `IFS=: read -r class provider type` splits it: the type keeps any further colon; a name of
    # another class gets a path where nothing is installed (reported missing, not refused).
    ("ocf:acme:a:b", "/usr/lib/ocf/resource.d/acme/a:b"),
    ("stonith:fence_ipmilan", "/usr/sbin/fence_ipmilan"),
])
def test_agent_path(agent: str, path: str) -> None:
    assert F.ocf_agent_path(agent) == path


def test_missing_agents_in_the_order_given() -> None:
    paths = {
        "/usr/lib/ocf/resource.d/lustre/Lustre": {"exists": True, "executable": True},
        "/usr/lib/ocf/resource.d/lustre/healthLNET": {"exists": True, "executable": False},
        "/usr/lib/ocf/resource.d/heartbeat/ZFS": {"exists": False, "executable": False},
    }
    agents = ["ocf:lustre:Lustre", "ocf:lustre:healthLNET", "ocf:heartbeat:ZFS"]
    assert F.ocf_agents_missing(agents, paths) == ["ocf:lustre:healthLNET", "ocf:heartbeat:ZFS"]


def test_an_agent_the_probe_did_not_look_at_is_a_role_bug() -> None:
    with pytest.raises(AnsibleFilterError, match=re.escape("did not look at /usr/lib/ocf/resource.d/lustre/Lustre")):
        F.ocf_agents_missing(["ocf:lustre:Lustre"], {})
