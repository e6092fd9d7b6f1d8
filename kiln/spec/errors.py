"""Spec problems: each names the field path, the offending value and the fix."""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

_MISSING = object()

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class SpecIssue:
    """One problem with a spec. An error stops the plan; a warning is carried by the plan (Plan.warnings)."""

    path: str
    value: Any
    problem: str
    fix: str
    severity: Severity = "error"

    def _shown(self) -> str:
        return "(missing)" if self.value is _MISSING else short(self.value)

    def render(self) -> str:
        return f"  - {self.path} = {self._shown()}: {self.problem}\n    fix: {self.fix}"

    def line(self) -> str:
        """The issue on one line (plan JSON `warnings`, `kiln validate`)."""
        return f"{self.path} = {self._shown()}: {self.problem}; fix: {self.fix}"


class SpecError(Exception):
    """The spec cannot be planned. Carries every problem found, not only the first."""

    def __init__(self, source: str, issues: Sequence[SpecIssue]) -> None:
        self.source = source
        self.issues = list(issues)
        super().__init__(self.render())

    def render(self) -> str:
        n = len(self.issues)
        head = f"{self.source}: {n} problem{'s' if n != 1 else ''} in the spec (kiln:cluster)"
        return "\n".join([head, *(i.render() for i in self.issues)])


def missing() -> object:
    return _MISSING


def suggest(word: str, choices: Iterable[str]) -> str:
    """'did you mean X?' text for a misspelt name, or the list of choices."""
    options = sorted(choices)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}? (choices: {', '.join(options)})"
    return f"choose one of: {', '.join(options)}"


def _shortener() -> reprlib.Repr:
    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 3, 6, 6, 4, 6
    r.maxstring, r.maxother, r.maxlong = 60, 60, 40
    return r


_SHORT = _shortener()


def short(value: Any) -> str:
    """A bounded repr: depth, items and lengths are capped before the text is built (values can be huge)."""
    try:
        text = _SHORT.repr(value)
    except ValueError:  # an integer over Python's digit limit
        return "(a value too large to show)"
    return text if len(text) <= 80 else text[:77] + "..."

