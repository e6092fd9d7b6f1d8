"""Read a stack's spec from its Pulumi stack file, without Pulumi, and validate it."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from kiln import yamlio
from kiln.spec.checks import check
from kiln.spec.errors import SpecError, SpecIssue, missing, short, suggest
from kiln.spec.models import ClusterSpec
from kiln.spec.types import PATTERN_HINTS

CONFIG_KEY = "kiln:cluster"
STACKS_ENV = "KILN_STACKS_DIR"
#: A stack file is a few KiB; anything over this is refused before it is read or parsed.
MAX_STACK_BYTES = 1 << 20


class StackNotFound(SpecError):
    """A stack name matched no file: names every file looked for and how to fix it (exit 2, like a bad spec)."""

    def __init__(self, stack: str, tried: Sequence[tuple[Path, str]]) -> None:
        self.stack, self.tried = stack, list(tried)
        found = (p.name for path, _ in tried for p in path.parent.glob("Pulumi.*.yaml"))
        known = sorted({name[len("Pulumi.") : -len(".yaml")] for name in found})
        fix = (
            f"run kiln in a directory holding stacks/Pulumi.{stack}.yaml, pass --stacks-dir DIR, set {STACKS_ENV}=DIR, "
            f"or give the stack file's path (./Pulumi.{stack}.yaml)"
            + (f"; stacks there: {', '.join(known)}" if known else "")
        )
        super().__init__(stack, [SpecIssue("(stack)", stack, "no such stack file", fix)])

    def render(self) -> str:
        looked = "".join(f"\n  - {path} ({why})" for path, why in self.tried)
        return f"no stack {self.stack!r}; looked for:{looked}\n  fix: {self.issues[0].fix}"


def stack_dirs(stacks_dir: str | Path | None = None) -> list[tuple[Path, str]]:
    """Where a stack name is looked up, in order, each with the reason: `--stacks-dir` alone when given,
    else $KILN_STACKS_DIR (when set) and then ./stacks of the working directory."""
    if stacks_dir is not None:
        return [(Path(stacks_dir), "--stacks-dir")]
    dirs = [(Path(env), f"${STACKS_ENV}") for env in [os.environ.get(STACKS_ENV, "")] if env]
    return [*dirs, (Path("stacks"), "./stacks of the working directory")]


def is_stack_path(stack: str) -> bool:
    """A path to a stack file (it holds a `/` or ends in .yaml/.yml), not a stack name."""
    return "/" in stack or os.sep in stack or stack.endswith((".yaml", ".yml"))


def stack_path(stack: str, stacks_dir: str | Path | None = None) -> Path:
    """The stack file of a stack name (`dev` → <dir>/Pulumi.dev.yaml, dirs from `stack_dirs`) or a path
    (returned as given). The one resolver every subcommand uses. Raises StackNotFound for an unknown name."""
    if is_stack_path(stack):
        return Path(stack)
    tried = []
    for directory, why in stack_dirs(stacks_dir):
        path = directory / f"Pulumi.{stack}.yaml"
        if path.is_file():
            return path
        tried.append((path.absolute(), why))
    raise StackNotFound(stack, tried)


def load_stack(stack: str, stacks_dir: str | Path | None = None) -> ClusterSpec:
    """Load and validate the spec of a stack (a name or a path, see `stack_path`). Raises SpecError with
    every problem found."""
    path = stack_path(stack, stacks_dir)
    try:
        with path.open("rb") as fh:  # at most one byte past the limit: /dev/zero or a 50 GB file end here too
            raw = fh.read(MAX_STACK_BYTES + 1)
        if len(raw) > MAX_STACK_BYTES:
            raise SpecError(str(path), [_too_large(len(raw))])
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise SpecError(
            str(path), [SpecIssue("(file)", str(path), "no such stack file", "check the path, or name a stack")]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(path), [SpecIssue("(file)", str(path), f"cannot read: {exc}", "check the path")]) from None
    return parse_stack_text(text, source=str(path))


def parse_stack_text(text: str, source: str = "<spec>") -> ClusterSpec:
    """Parse the text of a Pulumi stack file and validate its `kiln:cluster` object."""
    if len(text) > MAX_STACK_BYTES:
        raise SpecError(source, [_too_large(len(text))])
    try:
        doc = yamlio.load_bounded(text)
    except (ValueError, RecursionError) as exc:
        problem = str(exc).splitlines()[0][:200] if isinstance(exc, ValueError) else "nested too deeply"
        raise SpecError(
            source, [SpecIssue("(yaml)", "(document)", f"cannot be read: {problem}", "write plain, short values")]
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(
            source, [SpecIssue("(yaml)", where, f"not valid YAML: {problem}", "fix the YAML syntax there")]
        ) from None
    if not isinstance(doc, dict):
        raise SpecError(
            source,
            [SpecIssue("(file)", doc, "a stack file is a mapping with a `config:` key", "see stacks/Pulumi.lab.yaml")],
        )
    config = doc.get("config")
    if not isinstance(config, dict) or CONFIG_KEY not in config:
        raise SpecError(
            source,
            [
                SpecIssue(
                    "config",
                    missing(),
                    f"no `{CONFIG_KEY}` object under `config:`",
                    f"add `config: {{{CONFIG_KEY}: {{...}}}}` as in stacks/Pulumi.lab.yaml",
                )
            ],
        )
    return validate(config[CONFIG_KEY], source)


def _too_large(size: int) -> SpecIssue:
    return SpecIssue(
        "(file)", f"over {size - 1} bytes", f"larger than the {MAX_STACK_BYTES} bytes a stack file may have",
        "trim the file",
    )


def validate(data: Any, source: str = "<spec>") -> ClusterSpec:
    """Validate a `kiln:cluster` object: types and ranges first, then cross-field rules."""
    if not isinstance(data, dict):
        raise SpecError(source, [SpecIssue(CONFIG_KEY, data, "must be a mapping", "see docs/stack-reference.md")])
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(source, [_issue_from_pydantic(e, data) for e in exc.errors()]) from None
    issues = check(spec)
    if issues:
        raise SpecError(source, issues)
    return spec


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and re.fullmatch(r"[A-Za-z0-9_.*\[\]-]{1,128}", part):
            out += ("." if out else "") + part
        else:  # a hostile mapping key: shown escaped and shortened, never raw on the terminal
            out += f"[{short(part)}]"
    return out or CONFIG_KEY


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that holds the field at `loc` (for listing known fields)."""
    model: Any = ClusterSpec
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        model = _inner_model(field.annotation)
        if model is None:
            return None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _issue_from_pydantic(err: Any, data: dict[str, Any]) -> SpecIssue:
    loc = tuple(err.get("loc", ()))
    path = _path(loc)
    kind = err.get("type", "")
    value = err.get("input", missing())
    msg = str(err.get("msg", "invalid value"))
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        model = _model_at(loc)
        known = list(model.model_fields) if model else []
        name = str(loc[-1]) if loc else ""
        fix = f"remove `{name}`; {suggest(name, known)}" if known else f"remove `{name}`"
        return SpecIssue(path, value, "unknown field", fix)
    if kind == "missing":
        model = _model_at(loc)
        field = model.model_fields.get(str(loc[-1])) if model else None
        desc = f" ({field.description})" if field is not None and field.description else ""
        return SpecIssue(path, missing(), "required field is missing", f"add `{loc[-1]}`{desc}")
    if kind == "value_error":
        text = msg.removeprefix("Value error, ")
        problem, _, fix = text.partition("; fix: ")
        return SpecIssue(path, value, problem, fix or "see docs/stack-reference.md")
    if kind == "literal_error":
        return SpecIssue(path, value, "not an allowed value", f"use one of {ctx.get('expected', '')}")
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return SpecIssue(path, value, "out of range", f"use a value that is {msg.removeprefix('Input should be ')}")
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        hint = PATTERN_HINTS.get(pattern)
        return SpecIssue(path, value, "badly formed", f"write {hint}" if hint else f"it must match {pattern}")
    if kind in ("too_short", "too_long"):
        return SpecIssue(path, value, msg, "add or remove entries")
    return SpecIssue(path, value, msg, _type_fix(kind, msg))


def _type_fix(kind: str, msg: str) -> str:
    if kind.startswith(("int_", "float_")):
        return "write a number (no units, no quotes)"
    if kind.startswith("bool"):
        return "write true or false"
    if kind.startswith(("dict", "model")):
        return "write a mapping (key: value lines) here"
    if kind.startswith("list"):
        return "write a list (lines starting with '- ') here"
    if kind.startswith("string"):
        return "write a string here"
    return f"see docs/stack-reference.md ({msg})"
