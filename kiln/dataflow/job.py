"""A pass's inputs and outputs: the link job (what to move, under which policy), the tally a pass keeps as it goes,
and the result it returns."""

from __future__ import annotations

import fnmatch
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from kiln.dataflow import engine, progress
from kiln.dataflow.keys import escape

log = logging.getLogger(__name__)


@cache
def _glob_re(pattern: str) -> re.Pattern[str]:
    """'**' matches across '/', '*' and '?' within one path segment, '[...]' a class, '{a,b}' alternatives."""
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif c == "*":
            out, i = out + "[^/]*", i + 1
        elif c == "?":
            out, i = out + "[^/]", i + 1
        elif c == "{":
            end = pattern.index("}", i)
            out += "(?:" + "|".join(re.escape(a) for a in pattern[i + 1 : end].split(",")) + ")"
            i = end + 1
        elif c == "[":
            end = pattern.index("]", i + 1)
            out += fnmatch.translate(pattern[i : end + 1])[4:-3]
            i = end + 1
        else:
            out, i = out + re.escape(c), i + 1
    return re.compile(out + r"\Z")


def selected(path: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether a relative path is moved: matches an include (or there are none) and no exclude.

    A pattern without '/' matches the base name anywhere (as rclone filters do)."""

    def match(p: str) -> bool:
        target = path if "/" in p else path.rsplit("/", 1)[-1]
        return bool(_glob_re(p).match(target))

    return (not include or any(match(p) for p in include)) and not any(match(p) for p in exclude)


@dataclass(frozen=True, slots=True)
class LinkJob:
    name: str
    bucket: str
    prefix: str
    local: Path  # the directory on the fast tier
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    only: frozenset[str] | None = None  # exact keys (relative to the prefix), e.g. from change events
    conflict: str = "fail"  # the link's conflict policy (kiln/dataflow/decide.py)
    deletions: str = "keep"  # keep | propagate
    max_delete_fraction: float = 0.1
    posix_metadata: bool = False
    two_way: bool = False  # the link exports too: an import leaves local edits to the export

    def wants(self, key: str) -> bool:
        return selected(key, self.include, self.exclude) and (self.only is None or key in self.only)


@dataclass
class Tally:
    """What a pass did, file by file, as it goes (frozen into a PassResult at its end)."""

    failed: dict[str, str] = field(default_factory=dict)  # key → why it failed
    conflicts: dict[str, str] = field(default_factory=dict)  # key → why it was left (policy skip)
    overwritten: list[str] = field(default_factory=list)  # conflicts settled for the source
    repaired: list[str] = field(default_factory=list)  # local copies restored from the lake
    deleted: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # what failed the pass beyond single files
    verified: int = 0

    def fail(self, key: str, why: str) -> None:
        self.failed[key] = why
        log.error("%s: %s", escape(key), why)


@dataclass(frozen=True, slots=True)
class PassResult:
    bytes_moved: int
    files_moved: int
    files_verified: int
    files_selected: int
    bytes_selected: int
    seconds: float
    failed: tuple[str, ...] = ()  # keys that failed: refused, not copied, not verified, or a conflict
    reasons: tuple[tuple[str, str], ...] = ()  # (key, why) for each of them
    conflicts: tuple[tuple[str, str], ...] = ()  # (key, why) left by the link's policy (skip)
    overwritten: tuple[str, ...] = ()
    repaired: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    errors: tuple[str, ...] = ()
    # Where the seconds went (import): list + decide, the engine (rclone start, its listing, the transfers),
    # verify, record (manifest and status); for the measurement pass and operators' reading of a slow stage.
    phases: tuple[tuple[str, float], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed and not self.errors


def freeze(t: Tally, *, res: engine.Result, selected: tuple[int, int], seconds: float,
           phases: tuple[tuple[str, float], ...] = ()) -> PassResult:
    return PassResult(
        bytes_moved=res.bytes, files_moved=res.files, files_verified=t.verified, files_selected=selected[0],
        bytes_selected=selected[1], seconds=seconds, failed=tuple(t.failed), reasons=tuple(t.failed.items()),
        conflicts=tuple(t.conflicts.items()), overwritten=tuple(t.overwritten), repaired=tuple(t.repaired),
        deleted=tuple(t.deleted), renamed=tuple(t.renamed), errors=tuple(t.errors), phases=phases,
    )


def conclude(status: progress.Status, t: Tally) -> None:
    """The pass's terminal state: done, or failed with what failed it."""
    bad = len(t.failed)
    status.state = "failed" if bad or t.errors else "done"
    status.error = "; ".join([*t.errors, *([f"{bad} file(s) failed, e.g. {escape(next(iter(t.failed)))}: "
                                            f"{next(iter(t.failed.values()))}"] if bad else [])])
    status.error_class = "" if status.state == "done" else ("FileFailures" if bad else "PassRefused")
    if status.state == "done":
        status.last_success = time.time()
