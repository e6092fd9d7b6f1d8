"""The per-file decisions of a pass (kiln/dataflow/decide.py): conflicts and the four policies, repair, the
deletion guard."""

from __future__ import annotations

import os
import stat

import pytest

from kiln.dataflow.decide import Act, deletion_guard, export_one, import_one
from kiln.dataflow.lake import Obj
from kiln.dataflow.manifest import Entry

E = Entry(10, "e" * 32, 1_000)
SAME = Obj("k", 10, "e" * 32, "2026-01-01T00:00:00.000Z")
CHANGED = Obj("k", 12, "f" * 32, "2026-01-01T00:00:00.000Z")  # 1767225600 s


def st(size: int = 10, mtime_ns: int = 1_000) -> os.stat_result:
    return os.stat_result((stat.S_IFREG | 0o644, 1, 0, 1, 0, 0, size, 0, 0, 0, 0.0, mtime_ns / 1e9, 0.0, 0, mtime_ns,
                           0))


def imp(o: Obj, e: Entry | None, s: os.stat_result | None, policy: str = "fail", two_way: bool = False) -> Act:
    return import_one(o, e, s, policy=policy, two_way=two_way, propagate=False).act


def test_clean_files_move_only_when_the_source_changed() -> None:
    assert imp(SAME, E, st()) is Act.NOTHING
    assert imp(CHANGED, E, st()) is Act.MOVE
    assert imp(SAME, None, None) is Act.MOVE
    assert import_one(SAME, E, None, policy="fail", two_way=True, propagate=True).act is Act.KEEP


def test_a_local_edit_is_kept_on_a_two_way_link_and_repaired_on_an_import_only_one() -> None:
    edited = st(11, 2_000)
    assert imp(SAME, E, edited, two_way=True) is Act.NOTHING
    assert imp(SAME, E, edited, two_way=False) is Act.REPAIR


@pytest.mark.parametrize(("policy", "local_mtime_ns", "act"), [
    ("fail", 2_000, Act.FAIL),
    ("skip", 2_000, Act.SKIP),
    ("overwrite", 2_000, Act.OVERWRITE),
    ("overwrite-if-dirty", 2_000, Act.OVERWRITE),  # the object (2026) is newer than the local edit (1970)
    ("overwrite-if-dirty", 1_800_000_000 * 10**9, Act.FAIL),  # the local edit is newer: never overwritten
])
def test_both_sides_changed_is_a_conflict_the_policy_settles(policy: str, local_mtime_ns: int, act: Act) -> None:
    assert imp(CHANGED, E, st(11, local_mtime_ns), policy) is act
    assert imp(CHANGED, E, st(11, local_mtime_ns), policy, two_way=True) is act


def test_an_unknown_local_file_is_adopted_if_identical_else_a_conflict() -> None:
    assert imp(SAME, None, st()) is Act.ADOPT  # same size: hashed before it counts
    assert imp(SAME, None, st(99)) is Act.FAIL


def test_export_conflicts_mirror_the_import() -> None:
    assert export_one(st(), E, SAME, policy="fail").act is Act.NOTHING
    assert export_one(st(11, 2_000), E, SAME, policy="fail").act is Act.MOVE  # lake as recorded: upload
    assert export_one(st(11, 2_000), E, None, policy="fail").act is Act.MOVE
    assert export_one(st(11, 2_000), E, CHANGED, policy="fail").act is Act.FAIL
    assert export_one(st(11, 2_000), E, CHANGED, policy="skip").act is Act.SKIP
    assert export_one(st(11, 2_000), E, CHANGED, policy="overwrite-if-dirty").act is Act.FAIL  # lake newer
    assert export_one(st(11, 1_800_000_000 * 10**9), E, CHANGED, policy="overwrite-if-dirty").act is Act.OVERWRITE
    assert export_one(st(12), None, CHANGED, policy="fail").act is Act.ADOPT


def test_the_deletion_guard_allows_a_share_and_at_least_one() -> None:
    assert deletion_guard(1, 3, 0.1) is None
    assert deletion_guard(10, 100, 0.1) is None
    why = deletion_guard(11, 100, 0.1)
    assert why is not None and "refusing to delete 11 of 100 files" in why and "max_delete_fraction" in why
