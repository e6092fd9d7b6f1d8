"""Tables of refused spec inputs: one row per input, one test body per table.

A row (`refusal(...)`) names a stack, the edits that break it, the path of the issue kiln must report and what that
issue must say: its value, fragments of its problem and of its fix. `refused(row)` edits a copy of the stack,
validates it (and plans it, for rows marked `plan=True`: contradictions only the planner sees), and checks the issue
at that path; every issue reported must carry a fix. Use it with `@pytest.mark.parametrize("row", TABLE)`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.spec import SpecError, validate
from kiln.spec.errors import SpecIssue
from tests.conftest import stack_data

#: An edit's value that deletes the key instead of setting it.
DROP = object()
#: A row's value when the issue's value is not checked.
ANY_VALUE = object()

#: Dotted paths (`lustre.oss.nodes`, list indices as numbers: `compute.pools.0.nodes`) and the values to set there,
#: a function that edits the data in place (for edits that depend on the stack's own values), or a tuple of these,
#: applied in order.
Edit = Mapping[str, Any] | Callable[[dict[str, Any]], object] | tuple[Any, ...]


def edited(data: dict[str, Any], edit: Edit) -> dict[str, Any]:
    """A deep copy of data with the edit applied."""
    out = copy.deepcopy(data)
    _apply(out, edit)
    return out


def _apply(out: dict[str, Any], edit: Edit) -> None:
    if isinstance(edit, tuple):
        for step in edit:
            _apply(out, step)
        return
    if callable(edit):
        edit(out)
        return
    for dotted, value in edit.items():
        node: Any = out
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        key: Any = int(last) if last.isdigit() else last
        if value is DROP:
            del node[key]
        else:
            node[key] = copy.deepcopy(value)


@dataclass(frozen=True)
class Refusal:
    stack: str
    edit: Edit
    path: str
    value: Any = ANY_VALUE
    problem: tuple[str, ...] = ()
    problem_is: str | None = None
    problem_starts: str | None = None
    fix: tuple[str, ...] = ()
    first: bool = False
    alone: bool = False
    plan: bool = False
    others: tuple[str, ...] = field(default=())


def refusal(
    id: str,
    stack: str,
    edit: Edit,
    path: str,
    *,
    value: Any = ANY_VALUE,
    problem: str | tuple[str, ...] = (),
    problem_is: str | None = None,
    problem_starts: str | None = None,
    fix: str | tuple[str, ...] = (),
    first: bool = False,
    alone: bool = False,
    plan: bool = False,
    others: tuple[str, ...] = (),
) -> Any:
    """One row: `id` is the test id; `problem` and `fix` are fragments (one or a tuple) the issue's text holds,
    `problem_is` the whole problem, `problem_starts` its beginning; `first` asks that the issue be the first one
    reported, `alone` that it be the only one; `others` are paths that must be reported too."""
    problem = (problem,) if isinstance(problem, str) else problem
    fix = (fix,) if isinstance(fix, str) else fix
    row = Refusal(stack, edit, path, value, problem, problem_is, problem_starts, fix, first, alone, plan, others)
    return pytest.param(row, id=id)


def issues_of(data: dict[str, Any], *, plan: bool = False) -> list[SpecIssue]:
    """The issues kiln reports for data (validated, and planned with plan=True); fails if it accepts it."""
    with pytest.raises(SpecError) as exc:
        spec = validate(data, "test")
        if plan:
            build_plan(spec, "test")
    return list(exc.value.issues)


def refused(row: Refusal) -> SpecIssue:
    """Check that the row's input is refused as the row says; the issue at its path, for further checks."""
    issues = issues_of(edited(stack_data(row.stack), row.edit), plan=row.plan)
    paths = [i.path for i in issues]
    match = [i for i in issues if i.path == row.path]
    assert match, f"no issue at {row.path}: {paths}"
    issue = match[0]
    if row.first:
        assert issues[0] is issue, f"the first issue is {paths[0]}, not {row.path}"
    if row.alone:
        assert issues == [issue], f"more issues than the one at {row.path}: {paths}"
    assert all(i.fix for i in issues), f"every issue carries a fix: {[i.path for i in issues if not i.fix]}"
    if row.value is not ANY_VALUE:
        assert issue.value == row.value
    for fragment in row.problem:
        assert fragment in issue.problem, (fragment, issue.problem)
    if row.problem_is is not None:
        assert issue.problem == row.problem_is
    if row.problem_starts is not None:
        assert issue.problem.startswith(row.problem_starts), issue.problem
    for fragment in row.fix:
        assert fragment in issue.fix, (fragment, issue.fix)
    for other in row.others:
        assert other in paths, f"no issue at {other}: {paths}"
    return issue
