"""The write cost of the OSTs' protection: mirrors write twice, md parity levels pay read-modify-write on partial
stripes, RAID-Z/dRAID round their blocks; the protection layer carries it and names it."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.plan.protection_cost import MD_SOURCE, md_parity_cost
from kiln.spec import validate


def plan_of(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


def layer(plan: Any, name: str) -> Any:
    return next(la for la in plan.sizing.layers if la.name == name)


def _raid6(data: dict[str, Any], chunk_KiB: int) -> dict[str, Any]:
    data["lustre"]["oss"]["osts"].update(devices_per_target=10, protection="raid6", chunk_KiB=chunk_KiB)
    data["lustre"]["oss"]["osts"]["per_node"] = 2
    return data


def test_full_stripes_cost_the_parity_share(stack: Any) -> None:
    plan = plan_of(_raid6(stack("prod-h100"), 128))  # 8 × 128 KiB = 1 MiB stripes, 16 MiB RPCs
    prot, dev = layer(plan, "protection"), layer(plan, "ost_devices")
    assert prot.write_GBps == pytest.approx(dev.write_GBps * 8 / 10)
    assert "whole 1024 KiB stripes" in prot.formula


def test_raid6_partial_stripes_are_bounded_by_read_modify_write(stack: Any) -> None:
    plan = plan_of(_raid6(stack("prod-h100"), 4096))  # 32 MiB stripes: every 16 MiB RPC is half a stripe
    prot, dev = layer(plan, "protection"), layer(plan, "ost_devices")
    # 4 changed chunks: write 4 + 2 parity, read min(4 + 2, 8 - 4) = 4 chunks at the drives' write/read ratio
    weight = 6.6 / 13.0
    assert prot.write_GBps == pytest.approx(dev.write_GBps * 4 / (6 + 4 * weight))
    assert prot.write_GBps < dev.write_GBps * 0.8 * 0.7
    assert MD_SOURCE in prot.formula and "partial" in prot.formula
    assert plan.sizing.write_bottleneck == "protection"


def test_mirrors_write_twice(stack: Any) -> None:
    plan = plan_of(stack("prod-h100"))  # md raid1 pairs
    assert layer(plan, "protection").write_GBps == pytest.approx(layer(plan, "ost_devices").write_GBps / 2)
    assert "every block written 2×" in layer(plan, "protection").formula


def test_md_picks_the_cheaper_partial_write() -> None:
    # one changed chunk of 8: read-modify-write reads 1 + 2, reconstruct-write would read 7
    one = md_parity_cost(devices=10, parity=2, chunk_KiB=1024, unit_KiB=1024, read_weight=1.0)
    assert one.efficiency == pytest.approx(1 / (3 + 3))
    seven = md_parity_cost(devices=10, parity=2, chunk_KiB=1024, unit_KiB=7 * 1024, read_weight=1.0)
    assert seven.efficiency == pytest.approx(7 / (9 + 1))  # reconstruct-write reads the one untouched chunk


def test_draid_rounds_records(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["backend"] = "zfs"
    data["lustre"]["oss"]["osts"].update(devices_per_target=10, protection="draid2")
    data["lustre"]["mds"]["mdts"].update(protection="mirror")
    prot = layer(plan_of(data), "protection")
    assert "128 KiB records on draid2 of 10 (d=8)" in prot.formula
    assert prot.write_GBps == pytest.approx(layer(plan_of(data), "ost_devices").write_GBps * 0.8)
