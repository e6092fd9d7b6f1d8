"""Server parameters are read back where they apply: each MDS and OSS gets the persistent parameters of its own side
(the lustre_server role reads them back there), and conformance.lustre_tunables reads each tunable on its side."""

from __future__ import annotations

from typing import Any

from kiln.plan import build_plan
from kiln.plan.groups import LUSTRE_MDS, LUSTRE_OSS
from kiln.render.inventory import render_inventory
from kiln.spec.loader import validate
from kiln.verify.checks import REGISTRY
from kiln.verify.checks.conformance import tunables_for
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Options
from kiln.verify.inventory import inventory_from_files
from kiln.yamlio import load_inventory


def _plan(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


def _local(plan: Any, host: str) -> dict[str, Any]:
    hv = load_inventory(render_inventory(plan)[f"host_vars/{host}.yml"])
    return {p["id"]: p["name"] for p in hv.get("lustre_server_params_local", [])}


def test_each_server_reads_back_the_persistent_parameters_of_its_side(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["version"] = "2.16"  # mdt.*.max_mod_rpcs_in_flight is persistent on 2.16
    plan = _plan(data)
    oss = plan.groups[LUSTRE_OSS][0]
    mds = plan.groups[LUSTRE_MDS][0]
    assert set(_local(plan, oss)) == {
        "server.obdfilter.brw_size", "server.ost.read_cache_enable", "server.ost.writethrough_cache_enable",
        "server.ost.readcache_max_filesize", "server.quota.enforce_ost",
    }
    assert set(_local(plan, mds)) == {
        "server.mdt.max_mod_rpcs", "server.quota.enforce_mdt", "server.quota.enforce_mdt_dom",
    }
    assert _local(plan, plan.groups["kiln_compute"][0]) == {}


def test_colocated_mds_reads_back_both_sides(stack: Any) -> None:
    data = stack("dev")
    data["lustre"]["mds"]["colocated_with_oss"] = True
    plan = _plan(data)
    local = _local(plan, plan.groups[LUSTRE_MDS][0])
    assert {"server.obdfilter.brw_size", "server.quota.enforce_mdt_dom"} <= set(local)


def _routed_context(stack: Any) -> Context:
    data = stack("dev")
    data["lustre"]["lnet"] = [{"name": "o2ib0", "hosts": "clients"}, {"name": "o2ib1", "hosts": "servers"}]
    data["lustre"]["routers"] = [{
        "name": "rtr", "count": 1, "client_net": "o2ib0", "server_net": "o2ib1",
        "client_nics": {"count": 1, "nic": "cx7-ndr400"}, "server_nics": {"count": 1, "nic": "cx7-ndr400"},
    }]
    plan = _plan(data)
    inventory = inventory_from_files(render_inventory(plan), "test")
    remotes = {h.name: object() for h in plan.hosts}
    return Context(plan, plan.acceptance, inventory, remotes, Options())  # type: ignore[arg-type]


def test_conformance_reads_each_tunable_on_its_side_routers_included(stack: Any) -> None:
    ctx = _routed_context(stack)
    target = next(t for t in ctx.plan.targets if t.check == "conformance.lustre_tunables")
    subjects = [s.label for s in REGISTRY["conformance.lustre_tunables"].subjects(ctx, target)]
    router = ctx.plan.groups["kiln_lnet_routers"][0]
    oss = ctx.plan.groups[LUSTRE_OSS][0]
    mds = ctx.plan.groups[LUSTRE_MDS][0]
    assert {router, oss, mds} <= set(subjects)
    assert {t.side for t in tunables_for(ctx, router)} == {"lnet"}
    assert {t.side for t in tunables_for(ctx, oss)} == {"oss", "lnet"}
    assert "server.quota.enforce_mdt_dom" in {t.id for t in tunables_for(ctx, mds)}
