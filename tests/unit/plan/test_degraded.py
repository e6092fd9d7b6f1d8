"""One server down: a failover pair's surviving server serves both servers' targets; the plan says what the
filesystem then delivers and whether the demand holds."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.plan.serialize import plan_to_dict
from kiln.render.report import render_plan_report
from kiln.spec import validate


def plan_of(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


def test_a_pair_plan_shows_its_degraded_mode(stack: Any) -> None:
    plan = plan_of(stack("prod-h100"))  # 4 OSS in pairs, each bound by 2 × NDR400 × 0.765 = 76.5 GB/s
    d = plan.degraded
    assert d.failover == "pairs"
    assert d.read_GBps == pytest.approx(4 / 2 * 76.5)  # the survivor moves 2/4 of the bytes at 76.5 GB/s
    assert d.read_GBps < plan.sizing.aggregate_read_GBps
    assert d.gpus_fed == int(153.0 / 0.156) and d.gpus_fed < plan.sizing.gpus_total
    assert not d.holds
    assert d.create_ops == pytest.approx(plan.sizing.metadata_create_ops / 2)
    warn = next(w for w in plan.warnings if w.path == "lustre.oss.nodes" and "one OSS down" in w.problem)
    assert "use at least 6 OSS nodes" in warn.fix  # 2 × 159.7 ÷ 76.5 = 4.2 -> 6 in pairs
    doc = plan_to_dict(plan)["degraded"]
    assert doc["holds"] is False and doc["gpus_fed"] == d.gpus_fed and doc["read_GBps"] == pytest.approx(153.0)
    assert "does NOT hold" in render_plan_report(plan)


def test_six_oss_hold_the_demand_through_a_failover(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["oss"]["nodes"] = 6
    d = plan_of(data).degraded
    assert d.holds and d.gpus_fed >= 1024


def test_drive_bound_pairs_lose_nothing(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["oss"]["osts"]["per_node"] = 1  # 2 drives per OSS: the drives, not the server, bound reads
    data["lustre"]["oss"]["nodes"] = 20
    data["lustre"]["oss"]["server"] = {"read_GBps": 500, "write_GBps": 500, "source": "above the drives (test)"}
    plan = plan_of(data)
    assert plan.sizing.read_bottleneck in ("ost_devices", "protection")
    assert plan.degraded.read_GBps == pytest.approx(plan.sizing.aggregate_read_GBps)


def test_without_failover_the_targets_go_offline(stack: Any) -> None:
    d = plan_of(stack("dev")).degraded
    assert d.failover == "none" and not d.holds and d.gpus_fed == 0
    assert "unreachable" in d.why[0]
