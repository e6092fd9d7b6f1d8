"""The mkfs.lustre arguments the plan gives each target, checked against mkfs.lustre's own limits.

The checks are kiln.lustre.lustre_target's (the lustre_target module runs the same ones before mkfs.lustre);
the limits and their lustre-release sources are in kiln/knowledge/lustre_params.yaml (mkfs_limits).
"""

from __future__ import annotations

from kiln.knowledge import lustre_params
from kiln.lustre.lustre_target import MKFS_INDEX_MAX, mkfs_option_problems, mkfs_param_problems
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

    def add(path: str, value: object, problem: str, fix: str, limit: str) -> None:
        src = limits[limit].source
        issues.setdefault((path, problem), SpecIssue(path, value, f"{problem} ({src.file} {src.function})", fix))

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
                "index_max",
            )
        for problem in mkfs_option_problems(list(t.mkfs_options), spec.lustre.backend):
            add(f"lustre.{_GROUP[t.kind]}.chunk_KiB", group.chunk_KiB, problem, "use another chunk size",
                "mkfsoptions_length_max")  # fmt: skip
        mgsnode = [list(g) for g in mgs_nids] if t.kind != "mgt" else []
        for problem in mkfs_param_problems(mgsnode, [list(g) for g in t.servicenodes]):
            add(f"lustre.{_NICS[t.kind]}", None, problem, "use fewer storage NICs per server for LNet",
                "nid_param_value_max")  # fmt: skip
    return list(issues.values())
