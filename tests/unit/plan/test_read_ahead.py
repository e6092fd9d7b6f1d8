"""Read-ahead against the limit the kernel applies: half of MemTotal (totalram pages), below the installed RAM."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.lustre.lustre_param import ram_limit_refusal
from kiln.plan import build_plan
from kiln.spec.errors import SpecError
from kiln.spec.loader import validate


def _small_node(stack: Any, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = stack("lab")  # 2 GiB nodes with one GPU
    data.update(extra)
    return data


def test_derived_read_ahead_is_accepted_by_a_small_node(stack: Any) -> None:
    plan = build_plan(validate(_small_node(stack), "test"), "test")
    ra = plan.tunable("client.llite.max_read_ahead_mb")
    # A 2 GiB node's MemTotal is below 2 GiB (e.g. 2037152 kB); lproc_llite.c refuses pages > totalram / 2.
    assert ram_limit_refusal(ra.param, ra.value, 2037152) is None
    assert int(ra.value) <= 2 * 1024 // 4


def test_half_of_the_installed_ram_is_refused_in_the_plan(stack: Any) -> None:
    data = _small_node(stack, overrides={"client.llite.max_read_ahead_mb": 1024})
    with pytest.raises(SpecError) as exc:
        build_plan(validate(data, "test"), "test")
    issue = exc.value.issues[0]
    assert issue.path == "overrides.client.llite.max_read_ahead_mb"
    assert "MemTotal" in issue.problem
