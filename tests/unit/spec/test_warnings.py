"""Every warning a plan carries names a field of the spec, shows that field's own value (never a figure the plan
derived) and a fix that changes something."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.spec import ClusterSpec
from kiln.spec.errors import SpecIssue
from tests.conftest import stack_data


def values_at(doc: Any, path: str) -> list[Any]:
    """Every value at a dotted path ('a.b[0].c'; '*' matches any key) of the spec's JSON form."""
    found = [doc]
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        nxt: list[Any] = []
        for x in found:
            if part.startswith("["):
                i = int(part[1:-1])
                nxt += [x[i]] if isinstance(x, list) and i < len(x) else []
            elif part == "*":
                nxt += list(x.values()) if isinstance(x, dict) else []
            elif isinstance(x, dict) and part in x:
                nxt.append(x[part])
        found = nxt
    return found


def variants() -> list[tuple[str, dict[str, Any]]]:
    """The shipped stacks, and some that warn more (checkpoint budget, export backlog, fencing, unfed GPUs)."""
    out = [(name, stack_data(name)) for name in ("lab", "dev", "prod-h100")]
    tight = stack_data("prod-h100")
    tight["workload"]["checkpoint"]["budget_fraction"] = 0.004
    tight["workload"]["checkpoint"]["interval_min"] = 1
    out.append(("prod-h100 tight checkpoints", tight))
    fewer = stack_data("prod-h100")
    fewer["lustre"]["oss"]["nodes"] = 2
    fewer["workload"]["dataset_TB"] = 100  # two OSS still hold it (the capacity plan refuses 200 TB)
    out.append(("prod-h100 two OSS", fewer))
    lab = stack_data("lab")
    lab["acceptance"]["waivers"].append({"check": "dataflow.stage_inn", "reason": "a misspelt check id, for the test"})
    out.append(("lab misspelt waiver", lab))
    return out


def warnings_of(data: dict[str, Any]) -> tuple[dict[str, Any], tuple[SpecIssue, ...]]:
    spec = ClusterSpec.model_validate(data)
    return spec.model_dump(mode="json"), build_plan(spec).warnings


@pytest.mark.parametrize(("name", "data"), variants(), ids=[n for n, _ in variants()])
def test_every_warning_names_a_field_with_its_value_and_a_fix(name: str, data: dict[str, Any]) -> None:
    doc, warnings = warnings_of(data)
    for w in warnings:
        assert w.severity == "warning"
        values = values_at(doc, w.path)
        assert values, f"{name}: {w.path} is not a field of the spec"
        assert w.value in values, f"{name}: {w.path} shows {w.value!r}, not the field's value ({values[:3]})"
        assert w.fix and w.fix != w.problem
        assert not re.search(r"\b(acceptable|nothing to (do|fix)|already)\b", w.fix), f"{name}: {w.fix}"


def test_the_variants_do_warn() -> None:
    """The test above would pass on stacks without warnings: these ones have them."""
    paths = {w.path for _, data in variants() for w in warnings_of(data)[1]}
    misspelt = f"acceptance.waivers[{len(stack_data('lab')['acceptance']['waivers'])}].check"  # appended last
    assert {"objectstore.nodes", "dataflow.checkpoints.write_back", "lustre.oss.nodes", "lustre.*.protection",
            misspelt, "workload.checkpoint.budget_fraction"} <= paths, paths
