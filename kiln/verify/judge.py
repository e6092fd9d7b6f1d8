"""Judging measurements against a plan Target: statistics over repetitions, verdicts, exit code.

Protocol: the runner discards `warmup` runs and keeps `repetitions` samples. The median is compared with
the target's thresholds (respecting higher_is_better), min–max and the coefficient of variation (sample
standard deviation ÷ mean) are reported; CV above `cv_limit` marks the result UNSTABLE and turns a PASS
into a WARN (a figure that does not repeat is not one an operator should sign off). NOT_APPLICABLE is never
a pass: --strict counts it as a failure, and the sign-off (kiln/verify/verdict.py) never counts it as measured.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from kiln.plan.model import AcceptanceTarget


class Verdict(StrEnum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    NOT_APPLICABLE = "NOT_APPLICABLE"
    ERROR = "ERROR"


@dataclass(frozen=True, slots=True)
class Stats:
    n: int
    median: float
    min: float
    max: float
    mean: float
    stdev: float  # sample standard deviation (0 for one sample)
    cv: float  # stdev / |mean| (0 when the mean is 0)


def stats(values: Sequence[float]) -> Stats:
    if not values:
        raise ValueError("no samples")
    xs = [float(v) for v in values]
    if any(math.isnan(x) or math.isinf(x) for x in xs):
        raise ValueError(f"non-finite sample in {xs}")
    mean = statistics.fmean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    cv = sd / abs(mean) if mean else 0.0
    return Stats(n=len(xs), median=statistics.median(xs), min=min(xs), max=max(xs), mean=mean, stdev=sd, cv=cv)


def verdict_for(target: AcceptanceTarget, value: float) -> Verdict:
    """PASS/WARN/FAIL for one value. Higher-is-better: below fail → FAIL, below warn → WARN.
    Lower-is-better (conformance mismatches, expected 0): above fail → FAIL, above warn → WARN."""
    if target.higher_is_better:
        if value < target.fail:
            return Verdict.FAIL
        if value < target.warn:
            return Verdict.WARN
        return Verdict.PASS
    if value > target.fail:
        return Verdict.FAIL
    if value > target.warn:
        return Verdict.WARN
    return Verdict.PASS


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    stats: Stats | None
    unstable: bool
    message: str


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def judge(target: AcceptanceTarget, values: Sequence[float], cv_limit: float) -> Judgement:
    """The verdict of `values` (warm-up already removed) against `target`."""
    st = stats(values)
    v = verdict_for(target, st.median)
    unstable = st.n > 1 and st.cv > cv_limit
    cmp = "≥" if target.higher_is_better else "≤"
    if v is Verdict.PASS:
        msg = f"median {_fmt(st.median)} {target.unit} {cmp} warn threshold {_fmt(target.warn)}"
    elif v is Verdict.WARN:
        msg = (f"median {_fmt(st.median)} {target.unit} is past the warn threshold {_fmt(target.warn)} "
               f"(fail at {_fmt(target.fail)}; expected {_fmt(target.expected)})")
    else:
        msg = (f"median {_fmt(st.median)} {target.unit} is past the fail threshold {_fmt(target.fail)} "
               f"(expected {_fmt(target.expected)})")
    if unstable:
        msg += f"; UNSTABLE: CV {st.cv:.1%} > cv_limit {cv_limit:.0%} over {st.n} runs"
        if v is Verdict.PASS:
            v = Verdict.WARN
    return Judgement(v, st, unstable, msg)


def effective(verdict: Verdict, strict: bool) -> Verdict:
    """--strict: NOT_APPLICABLE counts as FAIL."""
    if strict and verdict is Verdict.NOT_APPLICABLE:
        return Verdict.FAIL
    return verdict
