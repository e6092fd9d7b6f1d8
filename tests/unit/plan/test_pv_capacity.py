"""The Lustre PersistentVolumes carry the usable capacity: raw OST drives less their protection."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.render.manifests.context import quantity_GB
from kiln.spec.loader import validate


@pytest.mark.parametrize(
    ("protection", "drives", "share"),
    [("raid1", 2, 1 / 2), ("raid6", 6, 4 / 6), ("raid10", 4, 1 / 2), ("external", 1, 1.0)],
)
def test_usable_capacity_is_raw_less_the_protection(stack: Any, protection: str, drives: int, share: float) -> None:
    data = stack("dev")  # 2 OSS × 4 OSTs of samsung-pm1743-15t (15.36 TB)
    osts = data["lustre"]["oss"]["osts"]
    osts.update(protection=protection, devices_per_target=drives)
    plan = build_plan(validate(data, "test"), "test")
    raw = 2 * 4 * drives * 15.36
    assert plan.lustre.ost_usable_capacity_TB == pytest.approx(raw * share)


def test_dev_persistent_volumes_show_the_raid1_usable_capacity(stack: Any) -> None:
    from kiln.render.manifests import render_manifests

    plan = build_plan(validate(stack("dev"), "test"), "test")
    assert quantity_GB(plan.lustre.ost_usable_capacity_TB) == "122880G"  # 245.76 TB raw in md raid1 pairs
    text = "".join(render_manifests(plan).values())
    assert "storage: 122880G" in text and "245760G" not in text
