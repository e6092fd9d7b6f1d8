"""The plan JSON and the plan report of every stack, pinned as golden files.

A change that alters what kiln plans shows up here as a diff to review. Refresh after an intended
change, then read the diff before committing:

    KILN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit -k golden
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kiln.plan import build_plan
from kiln.plan.serialize import plan_to_dict
from kiln.render.report import render_plan_report
from kiln.spec import load_stack

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden" / "plan"
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
REFRESH = "KILN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit -k golden"


def _check(path: Path, text: str) -> None:
    if os.environ.get("KILN_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path}; create it with: {REFRESH}"
    assert path.read_text(encoding="utf-8") == text, f"{path.name} changed; review, then refresh with: {REFRESH}"


@pytest.mark.parametrize("stack", STACKS)
def test_plan_json_matches_its_golden_file(stack: str) -> None:
    plan = build_plan(load_stack(str(ROOT / "stacks" / f"Pulumi.{stack}.yaml")), source=stack)
    _check(GOLDEN / f"{stack}.json", json.dumps(plan_to_dict(plan), indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("stack", STACKS)
def test_plan_report_matches_its_golden_file(stack: str) -> None:
    plan = build_plan(load_stack(str(ROOT / "stacks" / f"Pulumi.{stack}.yaml")), source=stack)
    _check(GOLDEN / f"{stack}.report.txt", render_plan_report(plan))
