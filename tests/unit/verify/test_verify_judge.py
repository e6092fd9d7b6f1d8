"""Judging: thresholds both ways, CV → UNSTABLE, strict mode, exit codes; properties with hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kiln.plan.model import AcceptanceTarget
from kiln.verify.judge import Verdict, effective, judge, stats, verdict_for

PERF = AcceptanceTarget(
    check="storage.fio_local_read", metric="bw", unit="GB/s", expected=10.0, warn=9.0, fail=7.5, why="test",
    scope="host", higher_is_better=True, group="g", requires=("nvme",),
)
CONF = AcceptanceTarget(
    check="conformance.sysctls", metric="mismatches", unit="count", expected=0, warn=0, fail=0, why="test",
    scope="host", higher_is_better=False, group="all", requires=(),
)


def test_higher_is_better_thresholds() -> None:
    assert verdict_for(PERF, 10.0) is Verdict.PASS
    assert verdict_for(PERF, 9.0) is Verdict.PASS  # at the warn threshold: not below it
    assert verdict_for(PERF, 8.99) is Verdict.WARN
    assert verdict_for(PERF, 7.5) is Verdict.WARN
    assert verdict_for(PERF, 7.49) is Verdict.FAIL


def test_conformance_counts() -> None:
    assert verdict_for(CONF, 0) is Verdict.PASS
    assert verdict_for(CONF, 1) is Verdict.FAIL


def test_median_not_mean_and_warmup_is_the_callers_job() -> None:
    # the runner drops warm-up runs before judging; one slow measured run does not sink the median
    j = judge(PERF, [10.2, 10.1, 3.0, 10.3, 10.0], cv_limit=1.0)
    assert j.verdict is Verdict.PASS and j.stats is not None and j.stats.median == 10.1
    # a warm-up outlier (cold cache, first connection) would have failed the check if it were counted
    warmup, measured = [2.0], [10.2, 10.1, 10.3]
    assert judge(PERF, warmup + measured, cv_limit=0.1).verdict is not Verdict.PASS
    assert judge(PERF, measured, cv_limit=0.1).verdict is Verdict.PASS


def test_unstable_turns_pass_into_warn() -> None:
    j = judge(PERF, [9.5, 14.0, 20.0], cv_limit=0.1)
    assert j.unstable and j.verdict is Verdict.WARN and "UNSTABLE" in j.message and "cv_limit" in j.message
    j = judge(PERF, [5.0, 7.0, 2.0], cv_limit=0.1)  # unstable and failing: stays FAIL
    assert j.unstable and j.verdict is Verdict.FAIL


def test_single_sample_is_never_unstable() -> None:
    j = judge(PERF, [12.0], cv_limit=0.01)
    assert not j.unstable and j.stats is not None and j.stats.cv == 0


def test_messages_name_thresholds() -> None:
    assert "fail threshold 7.5" in judge(PERF, [1.0], 0.1).message
    assert "warn threshold 9" in judge(PERF, [8.0], 0.1).message


def test_strict_counts_not_applicable_as_fail() -> None:
    na = Verdict.NOT_APPLICABLE
    assert effective(na, strict=False) is na and effective(na, strict=True) is Verdict.FAIL
    assert effective(Verdict.ERROR, strict=True) is Verdict.ERROR


def test_stats_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        stats([])
    with pytest.raises(ValueError):
        stats([1.0, float("nan")])


finite = st.floats(min_value=0.0, max_value=1e12, allow_nan=False, allow_infinity=False)


@given(st.lists(finite, min_size=1, max_size=30))
def test_median_inside_min_max(xs: list[float]) -> None:
    s = stats(xs)
    assert s.min <= s.median <= s.max
    assert s.cv >= 0


@given(expected=st.floats(min_value=1e-6, max_value=1e6), excess=st.floats(min_value=0, max_value=1e6),
       warn_f=st.floats(min_value=0.01, max_value=1.0), fail_f=st.floats(min_value=0.01, max_value=1.0))
def test_at_or_above_expected_never_fails(expected: float, excess: float, warn_f: float, fail_f: float) -> None:
    lo, hi = sorted((warn_f, fail_f))
    t = AcceptanceTarget(
        check="x", metric="bw", unit="GB/s", expected=expected, warn=expected * hi, fail=expected * lo, why="",
        scope="host", higher_is_better=True,
    )
    assert verdict_for(t, expected + excess) is Verdict.PASS


@given(st.lists(st.floats(min_value=0.1, max_value=1e6), min_size=1, max_size=20), st.floats(0.01, 1.0))
def test_verdict_is_the_medians(xs: list[float], cv_limit: float) -> None:
    j = judge(PERF, xs, cv_limit)
    base = verdict_for(PERF, stats(xs).median)
    if j.unstable and base is Verdict.PASS:
        assert j.verdict is Verdict.WARN
    else:
        assert j.verdict is base


@given(st.integers(min_value=0, max_value=1000))
def test_any_mismatch_fails_conformance(n: int) -> None:
    assert verdict_for(CONF, n) is (Verdict.PASS if n == 0 else Verdict.FAIL)
