"""Property: any number in any numeric field of the spec is refused with its path, or the whole pipeline runs."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln.spec import SpecError, validate
from tests.conftest import stack_data
from tests.unit.hardening.helpers import dotted, run_pipeline

LAB = stack_data("lab")


def _numeric_leaves(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(data, bool):
        return
    if isinstance(data, int | float):
        yield path
    elif isinstance(data, list):
        for i, item in enumerate(data):
            yield from _numeric_leaves(item, (*path, i))
    elif isinstance(data, dict):
        for key, item in data.items():
            yield from _numeric_leaves(item, (*path, key))


PATHS = list(_numeric_leaves(LAB))
NUMBERS = st.one_of(
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30, math.inf, -math.inf, math.nan, 1e308, 5e-324, 0.5, True]),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
)


@settings(max_examples=25, deadline=15000, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, len(PATHS) - 1), value=NUMBERS)
def test_numbers_are_refused_or_planned(index: int, value: Any) -> None:
    path = PATHS[index]
    data = copy.deepcopy(LAB)
    node: Any = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    try:
        run_pipeline(validate(data))  # no OverflowError, ZeroDivisionError or other traceback
    except SpecError as exc:  # refused by the models, the cross-field checks or the plan's own checks
        assert exc.issues and all(i.path and i.fix for i in exc.issues)


def test_every_numeric_field_of_the_lab_is_exercised() -> None:
    assert {dotted(p) for p in PATHS} >= {"compute.pools[0].nodes", "lustre.oss.nics.count", "workload.dataset_TB"}
