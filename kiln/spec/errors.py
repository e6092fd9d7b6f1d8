"""Spec problems: each names the field path, the offending value and the fix."""

from __future__ import annotations

import difflib
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
        shown = "(missing)" if self.value is _MISSING else _short(self.value)
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


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)
