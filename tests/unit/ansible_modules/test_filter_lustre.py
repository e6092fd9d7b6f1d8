"""plugins/filter/lustre.py: Lustre's start order and what a server lacks."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from kiln_filters import filter_plugin

F = filter_plugin("lustre")


def target(kind: str, index: int) -> dict[str, object]:
    return {"name": f"{kind}{index}", "kind": kind, "index": index}


def test_mgs_then_mdts_then_osts_each_by_index() -> None:
    targets = [target("ost", 10), target("mdt", 1), target("ost", 2), target("mgt", 0), target("mdt", 0)]
    assert [t["name"] for t in F.lustre_start_order(targets)] == ["mgt0", "mdt0", "mdt1", "ost2", "ost10"]


def test_an_unknown_kind_is_left_out_and_nothing_is_copied() -> None:
    ost = target("ost", 0)
    ordered = F.lustre_start_order([target("mystery", 0), ost])
    assert ordered == [ost] and ordered[0] is ost
    assert F.lustre_start_order([]) == []


def test_a_target_without_kind_or_index_is_refused() -> None:
    with pytest.raises(AnsibleFilterError, match="needs a kind and an index"):
        F.lustre_start_order([{"name": "lab-OST0000", "kind": "ost"}])


@pytest.mark.parametrize(("missing", "kmod", "expected"), [
    (["mkfs.lustre", "lctl"], False, "the Lustre server tools mkfs.lustre, lctl and the osd_zfs kernel module"),
    (["mount.lustre"], True, "the Lustre server tools mount.lustre"),
    ([], False, "the osd_zfs kernel module"),
    ([], True, ""),
])
def test_what_a_server_lacks(missing: list[str], kmod: bool, expected: str) -> None:
    assert F.lustre_server_lacks(missing, kmod, "zfs") == expected


DIRS = [{"path": "/lustre/lab/ckpt", "components": []}, {"path": "/lustre/lab/datasets", "components": []},
        {"path": "/scratch/tmp", "components": []}]


def test_layout_reach_pairs_each_parent_line_with_its_directory() -> None:
    lines = ["lfs present", "parent 1", "parent 1", "parent 0"]
    assert F.lustre_layout_reach(lines, DIRS) == {
        "has_lfs": True, "reachable": DIRS[:2], "unreachable": ["/scratch/tmp"]}


def test_layout_reach_without_lfs_reaches_nothing() -> None:
    assert F.lustre_layout_reach(["lfs absent"], DIRS) == {
        "has_lfs": False, "reachable": [], "unreachable": [d["path"] for d in DIRS]}
    assert F.lustre_layout_reach(["lfs present"], []) == {"has_lfs": True, "reachable": [], "unreachable": []}
