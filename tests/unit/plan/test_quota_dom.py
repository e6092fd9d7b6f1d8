"""Block quota of Data-on-MDT files: the MDTs' data-pool quota slave (quota_slave_dt) is planned and applied."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec.loader import validate
from kiln.yamlio import load_inventory


def _plan(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


@pytest.mark.parametrize("version", ["2.15", "2.16"])
def test_mdt_data_pool_slave_enforces_the_planned_types(stack: Any, version: str) -> None:
    data = stack("prod-h100")
    data["lustre"]["version"] = version
    data["lustre"]["quotas"] = {"enforce": "up"}
    plan = _plan(data)
    dom = plan.tunable("server.quota.enforce_mdt_dom")
    # qsd_lib.c qsd_init: an MDT's data slave is registered as quota_slave_dt; qsd_enabled_seq_write switches the
    # data pool (LQUOTA_RES_DT) through it, which quota_slave.enabled (the MDT's metadata slave) does not.
    assert (dom.param, dom.value, dom.side, dom.apply) == (
        "osd-*.prod-MDT*.quota_slave_dt.enabled", "up", "mds", "set_param_persistent"
    )
    assert "inodes" in plan.tunable("server.quota.enforce_mdt").reason
    assert "blocks of Data-on-MDT files)" not in plan.tunable("server.quota.enforce_mdt").reason


def test_mdt_data_pool_slave_is_stored_by_the_server_role(stack: Any) -> None:
    plan = _plan(stack("prod-h100"))
    servers = load_inventory(render_inventory(plan)["group_vars/kiln_lustre_servers.yml"])
    stored = {p["id"]: p["name"] for p in servers["lustre_server_params_persistent"]}
    assert stored["server.quota.enforce_mdt_dom"] == "osd-*.prod-MDT*.quota_slave_dt.enabled"
