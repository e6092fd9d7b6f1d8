"""The mkfs.lustre arguments the plan gives each target, checked against mkfs.lustre's own limits.

The checks are kiln.lustre.lustre_target's (the lustre_target module runs the same ones before mkfs.lustre);
the limits and their lustre-release sources are in kiln/knowledge/lustre_params.yaml (mkfs_limits).
"""

from __future__ import annotations

from kiln.knowledge import lustre_params
from kiln.lustre.lustre_target import (
    MD_LEVELS,
    MKFS_INDEX_MAX,
    draid_problems,
    md_problems,
    mkfs_option_problems,
    mkfs_param_problems,
)
from kiln.plan.model import LustreTarget
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec

_GROUP = {"mgt": "mds.mdts", "mdt": "mds.mdts", "ost": "oss.osts"}
_NICS = {"mgt": "mds.nics.count", "mdt": "mds.nics.count", "ost": "oss.nics.count"}


def mkfs_issues(
    spec: ClusterSpec, targets: tuple[LustreTarget, ...], mgs_nids: tuple[tuple[str, ...], ...]
) -> list[SpecIssue]:
    """One issue per distinct problem: index range, --mkfsoptions words, NID parameter lengths."""
    limits = lustre_params.load().mkfs_limits
    issues: dict[tuple[str, str], SpecIssue] = {}

    def cite(limit: str) -> str:
        return f"{limits[limit].source.file} {limits[limit].source.function}"

    def add(path: str, value: object, problem: str, fix: str, source: str) -> None:
        issues.setdefault((path, problem), SpecIssue(path, value, f"{problem} ({source})", fix))

    for t in targets:
        group = spec.lustre.mds.mdts if t.kind != "ost" else spec.lustre.oss.osts
        nodes = spec.lustre.mds.nodes if t.kind != "ost" else spec.lustre.oss.nodes
        if t.index > MKFS_INDEX_MAX:
            add(
                f"lustre.{_GROUP[t.kind]}.per_node",
                group.per_node,
                f"{nodes * group.per_node} {t.kind.upper()}s need indexes above {MKFS_INDEX_MAX}, which mkfs.lustre "
                "refuses",
                f"keep nodes × per_node at or below {MKFS_INDEX_MAX + 1}",
                cite("index_max"),
            )
        for problem in mkfs_option_problems(list(t.mkfs_options), spec.lustre.backend):
            add(f"lustre.{_GROUP[t.kind]}.chunk_KiB", group.chunk_KiB, problem, "use another chunk size",
                cite("mkfsoptions_length_max"))  # fmt: skip
        if t.protection in MD_LEVELS and spec.lustre.backend == "ldiskfs":
            for problem in md_problems(t.protection, list(t.drives), t.raid_chunk_KiB):
                add(f"lustre.{_GROUP[t.kind]}.protection", t.protection, problem,
                    "fix the drive count, level or chunk_KiB", "mdadm(8) --create, --chunk")  # fmt: skip
        for problem in draid_problems(list(t.vdevs)):
            add(f"lustre.{_GROUP[t.kind]}.protection", t.protection, problem, "use more drives or another level",
                "OpenZFS cmd/zpool/zpool_vdev.c draid_config_by_type")  # fmt: skip
        mgsnode = [list(g) for g in mgs_nids] if t.kind != "mgt" else []
        for problem in mkfs_param_problems(mgsnode, [list(g) for g in t.servicenodes]):
            add(f"lustre.{_NICS[t.kind]}", None, problem, "use fewer storage NICs per server for LNet",
                cite("nid_param_value_max"))  # fmt: skip
    return list(issues.values())
