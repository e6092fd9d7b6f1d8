"""Stage-in uses the path the data takes: an external lake reached over the management network is bounded by it."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.spec import SpecError, validate


def plan_of(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


def test_an_external_lake_over_ethernet_is_bounded_by_it(stack: Any) -> None:
    data = stack("dev")  # external store sold at 5 GB/s, 2 GPU nodes
    data["objectstore"]["throughput_GBps"] = 100
    data["networks"]["management_link_Gbps"] = 25
    s = plan_of(data).sizing
    assert s.stage_in_GBps == pytest.approx(2 * 25 / 8 * 0.7)  # 2 hosts × 25 GbE × tcp_payload
    assert s.stage_in_bottleneck == "lake_path (management network)"
    data["objectstore"]["network"] = "storage"  # the same lake on the fabric: 2 × 2 × NDR400
    s = plan_of(data).sizing
    assert s.stage_in_GBps == pytest.approx(39.6) and s.stage_in_bottleneck == "protection"  # Lustre write binds


def test_the_dataflow_movers_use_the_same_path(stack: Any) -> None:
    data = stack("dev")
    data["networks"]["management_link_Gbps"] = 25
    df = plan_of(data).dataflow
    assert df.host_GBps == pytest.approx(25 / 8 * 0.7) and "management port" in df.why[0]


def test_a_management_path_needs_its_line_rate(stack: Any) -> None:
    data = stack("dev")
    del data["networks"]["management_link_Gbps"]
    with pytest.raises(SpecError) as e:
        validate(data, "test")
    text = str(e.value)
    assert "networks.management_link_Gbps" in text and "objectstore.network: storage" in text
