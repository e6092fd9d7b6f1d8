"""What a pass does with one file, given the manifest, the source and the destination: pure decisions.

A file is *clean* on a side when that side still is what the mover last verified (the manifest entry: the
object's size and ETag, the local file's size and mtime). A *conflict* is a destination that is not clean and
that the pass would replace: changed on both sides since the last verified move, or there without a record and
with other bytes. The link's `conflict` policy settles it (as Azure Managed Lustre's import modes):

- fail: leave both sides; the file fails the pass;
- skip: leave both sides; the pass reports it and succeeds;
- overwrite-if-dirty: the source replaces the destination unless the destination is the newer one (then as fail);
- overwrite: the source replaces the destination; the pass reports each one it replaced.

On an import-only link the lake is the truth: a local file changed since its import (with the object unchanged)
is restored from the lake and reported as repaired. On a two-way link such a file is the export's to upload, and
the import leaves it; the import runs first, so without this rule it would revert every local edit.
"""

from __future__ import annotations

import enum
import os
import stat
from dataclasses import dataclass

from kiln.dataflow.lake import Obj
from kiln.dataflow.manifest import Entry
from kiln.dataflow.posix import modified_ns


class Act(enum.Enum):
    NOTHING = "nothing"  # both sides are as last verified
    MOVE = "move"  # copy the source over (a new file, a changed source over a clean destination)
    REPAIR = "repair"  # import-only link: the local copy changed, the lake's did not: restore it
    OVERWRITE = "overwrite"  # a conflict the policy settles for the source (reported)
    ADOPT = "adopt"  # the destination exists without a record and has the source's size: record it if identical
    SKIP = "skip"  # a conflict the policy leaves (reported, not a failure)
    FAIL = "fail"  # a conflict the policy refuses (the file fails the pass)
    KEEP = "keep"  # a deletion the export (two-way link) will propagate: leave it


@dataclass(frozen=True, slots=True)
class Decision:
    act: Act
    why: str = ""


POLICIES = ("fail", "skip", "overwrite-if-dirty", "overwrite")


def resolve(policy: str, why: str, dest_newer: bool) -> Decision:
    """A conflict settled by the link's policy."""
    if policy == "overwrite" or (policy == "overwrite-if-dirty" and not dest_newer):
        return Decision(Act.OVERWRITE, why)
    if policy == "skip":
        return Decision(Act.SKIP, why)
    newer = "; the destination is the newer one" if policy == "overwrite-if-dirty" else ""
    return Decision(Act.FAIL, f"conflict: {why}{newer}; fix: settle it by hand, or set the link's conflict policy")


def clean_local(st: os.stat_result | None, e: Entry | None) -> bool:
    return st is not None and e is not None and (st.st_size, st.st_mtime_ns) == (e.size, e.mtime_ns)


def import_one(o: Obj, e: Entry | None, st: os.stat_result | None, *, policy: str, two_way: bool,
               propagate: bool) -> Decision:
    """What an import does with object `o` (manifest entry e, local lstat st)."""
    lake_same = e is not None and (o.size, o.etag) == (e.size, e.etag)
    if st is None:
        if lake_same and two_way and propagate:
            return Decision(Act.KEEP, "deleted locally; the export deletes it from the lake")
        return Decision(Act.MOVE)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        return resolve(policy, "a directory or special file stands where the object goes", dest_newer=True)
    if clean_local(st, e):
        return Decision(Act.NOTHING) if lake_same else Decision(Act.MOVE)
    if e is None:
        if st.st_size == o.size:
            return Decision(Act.ADOPT)
        return conflict_import(o, st, policy, "the local file was not put there by the mover and differs")
    if lake_same:
        if two_way:
            return Decision(Act.NOTHING, "changed locally; the export uploads it")
        return Decision(Act.REPAIR, "the local copy changed since its verified import; restored from the lake")
    return conflict_import(o, st, policy, "changed locally and in the lake since the last verified move")


def conflict_import(o: Obj, st: os.stat_result, policy: str, why: str) -> Decision:
    newer = bool(o.modified) and st.st_mtime_ns > modified_ns(o.modified)
    return resolve(policy, why, dest_newer=newer)


def export_one(st: os.stat_result, e: Entry | None, o: Obj | None, *, policy: str) -> Decision:
    """What an export does with a local file (lstat st, manifest entry e, its object o or None)."""
    if clean_local(st, e):
        return Decision(Act.NOTHING)
    if o is None or (e is not None and (o.size, o.etag) == (e.size, e.etag)):
        return Decision(Act.MOVE)
    why = ("changed locally and in the lake since the last verified move" if e is not None
           else "the object was not written by the mover and differs")
    if e is None and o.size == st.st_size:
        return Decision(Act.ADOPT, why)
    newer = bool(o.modified) and modified_ns(o.modified) > st.st_mtime_ns
    return resolve(policy, why, dest_newer=newer)


def deletion_guard(deletions: int, held: int, fraction: float) -> str | None:
    """Why a pass must not delete `deletions` of the `held` files of a link, or None (at least one is allowed)."""
    allowed = max(1, int(fraction * held))
    if deletions <= allowed:
        return None
    return (f"refusing to delete {deletions} of {held} files in one pass (more than max_delete_fraction "
            f"{fraction:g}: {allowed}); fix: check that the source was not emptied by mistake, then raise the "
            "link's max_delete_fraction for one pass or delete the files by hand")
