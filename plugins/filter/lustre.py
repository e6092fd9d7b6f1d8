"""Filters for the Lustre roles: the order Lustre starts targets in, what a server lacks (lustre_server), and
which directories a client reaches through lfs (lustre_layout)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

#: Lustre starts the MGS first, then the MDTs, then the OSTs (an MDT registers with the MGS, an OST
#: with the MGS and needs the MDTs).
START_ORDER = ("mgt", "mdt", "ost")


def lustre_start_order(targets: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The targets in the order Lustre starts them: MGT, MDTs, OSTs, each kind by index.

    A target of another kind is left out, as no step of the role knows how to start it.
    """
    for target in targets:
        if not isinstance(target, Mapping) or "kind" not in target or "index" not in target:
            raise AnsibleFilterError(f"each Lustre target needs a kind and an index; got {target!r}")
    return [
        target
        for kind in START_ORDER
        for target in sorted((t for t in targets if t["kind"] == kind), key=lambda t: t["index"])
    ]


def lustre_server_lacks(missing_tools: Sequence[str], has_kmod: bool, backend: str) -> str:
    """What stops a Lustre server here, e.g. ``the Lustre server tools mkfs.lustre, lctl and the osd_zfs kernel
    module``; '' when nothing does."""
    lacks = []
    if missing_tools:
        lacks.append("the Lustre server tools " + ", ".join(missing_tools))
    if not has_kmod:
        lacks.append(f"the osd_{backend} kernel module")
    return " and ".join(lacks)


def lustre_layout_reach(probe_lines: Sequence[str], directories: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Read lustre_layout's lfs probe: ``lfs present`` (or ``lfs absent``), then one ``parent 1`` (``lfs
    getstripe -d`` works on the directory's parent, so it is on a mounted Lustre client) or ``parent 0`` per
    directory, in order.

    Returns ``has_lfs``, ``reachable`` (the directories whose parent is on Lustre) and ``unreachable`` (the
    paths of the others; all of them without lfs).
    """
    answers = [line for line in probe_lines if line.startswith("parent ")]
    reachable = [d for d, answer in zip(directories, answers) if answer == "parent 1"]
    reached = {d["path"] for d in reachable}
    return {
        "has_lfs": "lfs present" in probe_lines,
        "reachable": reachable,
        "unreachable": [d["path"] for d in directories if d["path"] not in reached],
    }


class FilterModule:
    """Lustre server ordering and messages."""

    def filters(self) -> dict[str, Any]:
        return {
            "lustre_start_order": lustre_start_order,
            "lustre_server_lacks": lustre_server_lacks,
            "lustre_layout_reach": lustre_layout_reach,
        }
