"""The sign-off: one verdict over a run's rows, and what evidence is missing for it.

- **REJECTED** — a FAIL that no waiver covers (with --strict: any FAIL, and NOT APPLICABLE counts as FAIL).
- **INCOMPLETE** — no such FAIL, but evidence is missing: a *required* check (the plan says which,
  kiln/plan/signoff.py) has a NOT APPLICABLE or ERROR row or was not run at all (--only), any row is an ERROR,
  or nothing was measured. Missing evidence is never waived: waivers cover FAILs only.
- **ACCEPTED WITH WAIVERS** — every required check measured, and every FAIL waived (acceptance.waivers).
- **ACCEPTED** — every required check measured, no FAIL.

A NOT APPLICABLE row is never counted as measured. It is missing evidence unless its check is optional (the plan
has none of what it measures) or the plan asks for nothing on that subject (NothingPlanned).

Exit codes (the CLI's EXIT_* in kiln/cli/common.py name the same numbers; a test keeps them equal): ACCEPTED 0,
REJECTED 1, INCOMPLETE 3, ACCEPTED WITH WAIVERS 4 (2 stays the usage error).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from kiln.plan.model import AcceptanceTarget
from kiln.verify.judge import Verdict, effective

if TYPE_CHECKING:
    from kiln.verify.runner import Result


class SignOff(StrEnum):
    ACCEPTED = "ACCEPTED"
    ACCEPTED_WITH_WAIVERS = "ACCEPTED WITH WAIVERS"
    INCOMPLETE = "INCOMPLETE"
    REJECTED = "REJECTED"

    @property
    def exit_code(self) -> int:
        return SIGN_OFF_EXIT[self]


SIGN_OFF_EXIT = {SignOff.ACCEPTED: 0, SignOff.REJECTED: 1, SignOff.INCOMPLETE: 3, SignOff.ACCEPTED_WITH_WAIVERS: 4}


class Evidence(StrEnum):
    """What a row gives the sign-off."""

    MEASURED = "measured"
    MISSING = "missing"  # a required check without a measurement, or an ERROR
    OPTIONAL = "optional"  # NOT APPLICABLE of a check the plan does not require
    NOTHING_PLANNED = "nothing planned"  # NOT APPLICABLE where the plan asks for nothing


def evidence(r: Result) -> Evidence:
    if r.verdict is Verdict.ERROR:
        return Evidence.MISSING
    if r.verdict is not Verdict.NOT_APPLICABLE:
        return Evidence.MEASURED
    if r.nothing_planned:
        return Evidence.NOTHING_PLANNED
    return Evidence.MISSING if r.target.required else Evidence.OPTIONAL


@dataclass(frozen=True, slots=True, kw_only=True)
class Missing:
    """Evidence the sign-off lacks: a row without a measurement, or a required check that did not run."""

    check: str
    subject: str
    verdict: str  # NOT_APPLICABLE, ERROR, or NOT_RUN
    reason: str
    requires: tuple[str, ...]
    required_why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    verdict: SignOff
    missing: tuple[Missing, ...]
    failed: tuple[str, ...]  # "<check> @ <subject>" of each FAIL that counts
    waived: int  # FAILs a waiver covers (0 with --strict)

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


def _missing_rows(results: Iterable[Result]) -> list[Missing]:
    return [
        Missing(check=r.check, subject=r.subject.label, verdict=r.verdict.value, reason=r.message,
                requires=r.target.requires, required_why=r.target.required_why)
        for r in results if evidence(r) is Evidence.MISSING
    ]


def _not_run(results: Sequence[Result], targets: Iterable[AcceptanceTarget]) -> list[Missing]:
    ran = {r.check for r in results}
    return [
        Missing(check=t.check, subject="-", verdict="NOT_RUN", reason="not run in this pass (left out by --only)",
                requires=t.requires, required_why=t.required_why)
        for t in targets if t.required and t.check not in ran
    ]


def decide(results: Sequence[Result], targets: Iterable[AcceptanceTarget], strict: bool) -> Decision:
    """The sign-off of a run's `results` against the plan's `targets` (all of them, also those --only left out)."""
    failed = [r for r in results if effective(r.verdict, strict) is Verdict.FAIL and (strict or not r.waiver)]
    waived = 0 if strict else sum(1 for r in results if r.verdict is Verdict.FAIL and r.waiver)
    missing = _missing_rows(results) + _not_run(results, targets)
    if not any(r.stats is not None for r in results):
        missing.append(Missing(check="*", subject="-", verdict="NOT_RUN", reason="nothing was measured",
                               requires=(), required_why="a sign-off rests on measurements"))
    if failed:
        verdict = SignOff.REJECTED
    elif missing:
        verdict = SignOff.INCOMPLETE
    else:
        verdict = SignOff.ACCEPTED_WITH_WAIVERS if waived else SignOff.ACCEPTED
    return Decision(verdict=verdict, missing=tuple(missing), waived=waived,
                    failed=tuple(f"{r.check} @ {r.subject.label}" for r in failed))
