"""Spec problems: each names the field path, the offending value and the fix."""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

_MISSING = object()


@dataclass(frozen=True, slots=True)
class SpecIssue:
    path: str
    value: Any
    problem: str
    fix: str

    def render(self) -> str:
        shown = "(missing)" if self.value is _MISSING else short(self.value)
        return f"  - {self.path} = {shown}: {self.problem}\n    fix: {self.fix}"

    def as_dict(self) -> dict[str, Any]:
        value = None if self.value is _MISSING else self.value
        return {"path": self.path, "value": _jsonable(value), "problem": self.problem, "fix": self.fix}


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
_MAX_JSON_DEPTH = 8
_MAX_JSON_ITEMS = 50


def short(value: Any) -> str:
    """A bounded repr: depth, items and lengths are capped before the text is built (values can be huge)."""
    try:
        text = _SHORT.repr(value)
    except ValueError:  # an integer over Python's digit limit
        return "(a value too large to show)"
    return text if len(text) <= 80 else text[:77] + "..."


def _jsonable(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return value if len(value) <= 200 else value[:197] + "..."
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        return value if abs(value) < 10**18 else short(value)
    if depth >= _MAX_JSON_DEPTH:
        return "..."
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1) for v in value[:_MAX_JSON_ITEMS]]
    if isinstance(value, dict):
        items = list(value.items())[:_MAX_JSON_ITEMS]
        return {(k if isinstance(k, str) else short(k))[:200]: _jsonable(v, depth + 1) for k, v in items}
    return short(value)
