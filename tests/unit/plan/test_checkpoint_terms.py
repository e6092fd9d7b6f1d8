"""The checkpoint save as DCP's terms: device-to-host copies, file creates, the fsync'd storage write; labelled a
lower bound (serialisation is not modelled)."""

from __future__ import annotations

from typing import Any

import pytest

from kiln import knowledge
from kiln.plan import build_plan
from kiln.plan.serialize import plan_to_dict
from kiln.spec import validate


def plan_of(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


def test_the_save_has_its_terms_and_is_a_lower_bound(stack: Any) -> None:
    plan = plan_of(stack("dev"))  # 8B params, 2 nodes × 8 H100, 1 MDT
    ck = plan.sizing.checkpoint
    terms = {t.name: t for t in ck.terms}
    assert list(terms) == ["device_to_host", "file_creates", "storage_write"]
    kb = knowledge.load()
    nbytes = 8e9 * 14
    assert terms["device_to_host"].seconds == pytest.approx(nbytes / 16 / (63.0 * kb.factor("pcie_h2d") * 1e9))
    assert terms["file_creates"].seconds == pytest.approx(17 / 50_000)  # 16 ranks + .metadata at one NVMe MDT
    assert terms["storage_write"].seconds == pytest.approx(ck.save_s)
    assert ck.save_total_s == pytest.approx(sum(t.seconds for t in ck.terms))
    assert ck.lower_bound and ck.meets_budget == (ck.save_total_s <= ck.budget_s)
    assert "Asynchronous Checkpointing" in terms["device_to_host"].why
    assert "FileSystemWriter" in terms["file_creates"].why
    doc = plan_to_dict(plan)["sizing"]["checkpoint"]
    assert doc["lower_bound"] is True and [t["name"] for t in doc["terms"]] == list(terms)


def test_an_unsharded_save_copies_through_one_gpu(stack: Any) -> None:
    data = stack("dev")
    data["workload"]["checkpoint"]["sharded"] = False
    ck = plan_of(data).sizing.checkpoint
    d2h = next(t for t in ck.terms if t.name == "device_to_host")
    assert "the whole state, one GPU" in d2h.why and d2h.seconds > 1.0  # 112 GB through one PCIe Gen5 link


def test_the_budget_is_judged_on_the_terms(stack: Any) -> None:
    data = stack("dev")
    data["workload"]["checkpoint"]["sharded"] = False  # 2.2 s more of device-to-host copy
    data["workload"]["checkpoint"]["interval_min"] = 60
    data["workload"]["checkpoint"]["budget_fraction"] = 0.001  # 3.6 s: the storage write (2.8 s) alone would fit
    ck = plan_of(data).sizing.checkpoint
    assert ck.save_s < ck.budget_s < ck.save_total_s and not ck.meets_budget
