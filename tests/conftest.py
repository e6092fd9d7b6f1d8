"""Shared fixtures: the stacks and a helper to build variants of a spec."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


def stack_data(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())
    return copy.deepcopy(doc["config"]["kiln:cluster"])


@pytest.fixture
def lab_data() -> dict[str, Any]:
    return stack_data("lab")


@pytest.fixture
def prod_data() -> dict[str, Any]:
    return stack_data("prod-h100")


@pytest.fixture
def stack() -> Any:
    """stack(name) → a deep copy of that stack's kiln:cluster object, to mutate in a test."""
    return stack_data
