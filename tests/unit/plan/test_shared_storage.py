"""Shared storage is a precondition of failover: the attachment of each target kind, refused for pairs on internal
drives, carried per target in the plan, and the enclosure's uplinks as a supply layer."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.plan.serialize import plan_to_dict
from kiln.spec.errors import SpecError
from kiln.spec.loader import validate


def _issues(data: dict[str, Any]) -> list[tuple[str, Any, str]]:
    with pytest.raises(SpecError) as exc:
        validate(data, "test")
    return [(i.path, i.value, i.fix) for i in exc.value.issues]


@pytest.mark.parametrize(
    ("where", "path"),
    [(("oss", "osts"), "lustre.oss.osts.attachment"), (("mds", "mdts"), "lustre.mds.mdts.attachment")],
)
def test_failover_pairs_on_internal_drives_are_refused(stack: Any, where: tuple[str, str], path: str) -> None:
    data = stack("prod-h100")
    data["lustre"][where[0]][where[1]]["attachment"] = "internal"
    if where[0] == "oss":
        del data["lustre"]["oss"]["uplink"]
    found = _issues(data)
    assert any(p == path and v == "internal" and "lustre.failover: none" in fix for p, v, fix in found), found


def test_the_mgt_follows_the_mdts_unless_it_says_otherwise(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["mgs"]["attachment"] = "internal"
    assert [p for p, _, _ in _issues(data)] == ["lustre.mgs.attachment"]
    plan = build_plan(validate(stack("prod-h100"), "test"), "test")
    assert {t.kind: t.attachment for t in plan.lustre_targets} == {
        "mgt": "shared-enclosure", "mdt": "shared-enclosure", "ost": "shared-enclosure"
    }


def test_internal_drives_without_failover_are_fine(stack: Any) -> None:
    plan = build_plan(validate(stack("dev"), "test"), "test")  # failover: none
    assert {t.attachment for t in plan.lustre_targets} == {"internal"}
    assert {t["attachment"] for t in plan_to_dict(plan)["lustre"]["targets"]} == {"internal"}


def test_enclosure_uplinks_bound_the_ost_data_path(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["oss"]["uplink"] = {"pcie_lanes": 8, "pcie_gen": 4, "source": "test: an x8 Gen4 JBOF link"}
    plan = build_plan(validate(data, "test"), "test")
    layer = next(x for x in plan.sizing.layers if x.name == "ost_uplinks")
    # 4 OSS × 8 lanes × 31.5 / 16 GB/s per Gen4 lane (PCI-SIG, kiln/knowledge/workload.yaml)
    assert layer.read_GBps == pytest.approx(4 * 8 * 31.5 / 16)
    assert plan.sizing.read_bottleneck == plan.sizing.write_bottleneck == "ost_uplinks"
    assert plan.sizing.aggregate_read_GBps == pytest.approx(layer.read_GBps)


def test_san_links_bound_the_ost_data_path(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["oss"]["osts"].update(attachment="san", devices_per_target=1, protection="external")
    data["lustre"]["mds"]["mdts"]["attachment"] = "san"
    data["lustre"]["oss"]["uplink"] = {"links": 2, "link_Gbps": 32, "source": "test: two 32GFC ports"}
    plan = build_plan(validate(data, "test"), "test")
    layer = next(x for x in plan.sizing.layers if x.name == "ost_uplinks")
    assert layer.read_GBps == pytest.approx(4 * 2 * 32 / 8)


@pytest.mark.parametrize(
    ("attachment", "uplink"),
    [("internal", {"pcie_lanes": 16}), ("shared-enclosure", {"links": 2, "link_Gbps": 100}),
     ("nvmeof", {"pcie_lanes": 16})],
)
def test_uplinks_not_fitting_the_attachment_are_refused(stack: Any, attachment: str, uplink: dict[str, Any]) -> None:
    data = stack("prod-h100")
    data["lustre"]["failover"] = "none"
    data["lustre"]["oss"]["osts"]["attachment"] = attachment
    data["lustre"]["oss"]["uplink"] = {**uplink, "source": "test"}
    assert [p for p, _, _ in _issues(data)] == ["lustre.oss.uplink"]
