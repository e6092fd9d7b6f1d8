"""An appliance whose MDS and OSS share hosts and controllers (lustre.mds.colocated_with_oss)."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import validate
from kiln.yamlio import load_inventory
from tests.unit.refusals import Refusal, refusal, refused


def _colocated(data: dict[str, Any]) -> dict[str, Any]:
    lu = data["lustre"]
    lu["mds"]["colocated_with_oss"] = True
    lu["mds"]["nics"] = dict(lu["oss"]["nics"])
    return data


def _layer(plan: Any, name: str) -> Any:
    return next(la for la in plan.sizing.layers if la.name == name)


def test_mdts_go_on_oss_hosts_and_no_mds_host_is_generated(stack: Any) -> None:
    spec = validate(_colocated(stack("prod-h100")), "test")
    plan = build_plan(spec, "test")
    assert not [h for h in plan.hosts if h.name.startswith("mds")]
    servers = {h.name: h for h in plan.hosts if "kiln_lustre_servers" in h.groups}
    assert sorted(servers) == ["oss01", "oss02", "oss03", "oss04"]
    mdts = [t for t in plan.lustre_targets if t.kind == "mdt"]
    osts = [t for t in plan.lustre_targets if t.kind == "ost"]
    assert [t.host for t in mdts] == ["oss01", "oss02", "oss03", "oss04"]
    assert {t.host for t in osts} == set(servers)
    assert "kiln_lustre_mgs" in servers["oss01"].groups  # combined MGS on the first MDS, an OSS host
    for t in mdts:  # failover partners are MDS hosts too
        assert t.failover_host is not None and "kiln_lustre_mds" in servers[t.failover_host].groups
    hv = load_inventory(render_inventory(plan)["host_vars/oss02.yml"])
    kinds = sorted({t["name"].split("-")[1][:3] for t in hv["lustre_server_targets"]})
    assert kinds == ["MDT", "OST"]
    assert hv["kiln_failover_partner"] == "oss01"
    assert plan.monitoring.hosts  # a host of the plan is chosen, not a missing mds01


def test_the_server_layer_shares_a_derived_ceiling(stack: Any) -> None:
    separate = build_plan(validate(stack("prod-h100"), "test"), "test")
    colocated = build_plan(validate(_colocated(stack("prod-h100")), "test"), "test")
    lu = stack("prod-h100")["lustre"]
    ost = lu["oss"]["osts"]["per_node"] * lu["oss"]["osts"].get("devices_per_target", 1)
    mdt = lu["mds"]["mdts"]["per_node"] * lu["mds"]["mdts"].get("devices_per_target", 1)
    # all four OSS carry an MDT: their ceiling goes to OST traffic in the OST drives' share
    assert _layer(colocated, "oss_servers").read_GBps == pytest.approx(
        _layer(separate, "oss_servers").read_GBps * ost / (ost + mdt)
    )
    assert "OST share" in _layer(colocated, "oss_servers").formula
    assert any("MDS and OSS share hosts" in n for n in colocated.sizing.notes)


def test_a_published_appliance_ceiling_is_not_split_again(stack: Any) -> None:
    def with_ceiling(data: dict[str, Any]) -> dict[str, Any]:
        data["lustre"]["oss"]["server"] = {"read_GBps": 90, "write_GBps": 60, "servers_per_unit": 4,
                                           "source": "vendor's published figure, MDTs on the same controllers"}
        return data

    separate = build_plan(validate(with_ceiling(stack("prod-h100")), "test"), "test")
    colocated = build_plan(validate(_colocated(with_ceiling(stack("prod-h100"))), "test"), "test")
    assert _layer(colocated, "oss_servers").read_GBps == pytest.approx(_layer(separate, "oss_servers").read_GBps)


def test_more_plain_oss_never_lower_the_layer(stack: Any) -> None:
    def plan(oss: int) -> Any:
        data = _colocated(stack("prod-h100"))
        data["lustre"]["oss"]["nodes"] = oss
        return build_plan(validate(data, "test"), "test")

    assert _layer(plan(6), "oss_servers").read_GBps > _layer(plan(4), "oss_servers").read_GBps


REFUSALS = [
    refusal("more MDS than OSS hosts", "prod-h100", (_colocated, {"lustre.mds.nodes": 6}), "lustre.mds.nodes",
            fix="≤ 4"),
    refusal("different NICs on the shared hosts", "prod-h100", (_colocated, {"lustre.mds.nics.count": 1}),
            "lustre.mds.nics"),
    refusal("an odd MDS count with pairs", "prod-h100", (_colocated, {"lustre.mds.nodes": 3}), "lustre.mds.nodes"),
    refusal("a pool named like mds, MDS hosts generated", "prod-h100", {
        "compute.pools.0.hostname_prefix": "mds", "lustre.mds.nodes": 100, "lustre.oss.nodes": 100},
            "compute.pools[0].hostname_prefix"),  # mds001..mds100 beside the pool's mds001..mds128
]


@pytest.mark.parametrize("row", REFUSALS)
def test_refused(row: Refusal) -> None:
    refused(row)


def test_a_pool_named_like_mds_does_not_collide(stack: Any) -> None:
    """With no mds<NNN> hosts generated, a pool prefixed mds no longer collides with them."""
    data = stack("prod-h100")
    data["compute"]["pools"][0]["hostname_prefix"] = "mds"
    data["lustre"]["mds"]["nodes"] = data["lustre"]["oss"]["nodes"] = 100
    validate(_colocated(data), "test")
