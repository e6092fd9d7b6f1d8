"""Default quota policy (lfs setquota -U/-G/-P) from lustre.quotas: limits in KiB and inodes, checked
against what lfs_setquota() in lustre/utils/lfs.c accepts without its minimum-qunit warning."""

from __future__ import annotations

from kiln.knowledge import lustre_params
from kiln.lustre.lustre_common import parse_size
from kiln.plan.model import QuotaDefault
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, QuotaLimits

_ENFORCE_LETTER = {"user": "u", "group": "g", "project": "p"}


def _kib(size: str) -> int:
    return parse_size(size) // 1024


def build_quota_defaults(spec: ClusterSpec) -> tuple[tuple[QuotaDefault, ...], list[SpecIssue]]:
    """The default quota of each type the stack limits, and the limits lfs would refuse (quota_issues)."""
    defaults = spec.lustre.quotas.defaults
    out = []
    for kind in ("user", "group", "project"):
        lim: QuotaLimits | None = getattr(defaults, kind)
        if lim is not None:
            out.append(
                QuotaDefault(
                    type=kind, block_soft_KiB=_kib(lim.block_soft), block_hard_KiB=_kib(lim.block_hard),
                    inode_soft=lim.inode_soft, inode_hard=lim.inode_hard,
                )
            )
    planned = tuple(out)
    return planned, quota_issues(spec, planned)


def quota_issues(spec: ClusterSpec, planned: tuple[QuotaDefault, ...]) -> list[SpecIssue]:
    """Each default limit: enforced type, soft ≤ hard, at least one limit, above lfs's minimum qunit."""
    reg = lustre_params.load().layout_limits
    block_min, inode_min = reg["quota_block_limit_min_KiB"], reg["quota_inode_limit_min"]
    lim = spec.lustre.quotas.defaults
    issues: list[SpecIssue] = []
    for q in planned:
        path = f"lustre.quotas.defaults.{q.type}"
        given: QuotaLimits = getattr(lim, q.type)
        letter = _ENFORCE_LETTER[q.type]
        if letter not in spec.lustre.quotas.enforce:
            issues.append(
                SpecIssue(
                    path,
                    given.model_dump(),
                    f"a default {q.type} quota while lustre.quotas.enforce ({spec.lustre.quotas.enforce}) does not "
                    f"enforce {q.type} quotas limits nothing",
                    f"add '{letter}' to lustre.quotas.enforce, or drop lustre.quotas.defaults.{q.type}",
                )
            )
        if not any((q.block_soft_KiB, q.block_hard_KiB, q.inode_soft, q.inode_hard)):
            issues.append(
                SpecIssue(path, given.model_dump(), "no limit given", "set a block or inode limit, or drop it")
            )
        for field, value, shown, minimum in (
            ("block_soft", q.block_soft_KiB, given.block_soft, block_min),
            ("block_hard", q.block_hard_KiB, given.block_hard, block_min),
            ("inode_soft", q.inode_soft, given.inode_soft, inode_min),
            ("inode_hard", q.inode_hard, given.inode_hard, inode_min),
        ):
            if value and value < minimum.value:
                unit = "KiB (1M)" if field.startswith("block") else "inodes"
                issues.append(
                    SpecIssue(
                        f"{path}.{field}",
                        shown,
                        f"a limit of at most {minimum.value - 1} {unit} is below the minimum qunit size "
                        f"({minimum.source.file} {minimum.source.function})",
                        "use 0 (no limit) or a larger limit, e.g. 100G or 1000000 inodes",
                    )
                )
        for kind, soft, hard in (("block", q.block_soft_KiB, q.block_hard_KiB), ("inode", q.inode_soft, q.inode_hard)):
            if soft and hard and soft > hard:
                issues.append(
                    SpecIssue(
                        f"{path}.{kind}_soft",
                        getattr(given, f"{kind}_soft"),
                        f"the soft limit is above the hard limit ({getattr(given, f'{kind}_hard')}), "
                        "so it never applies",
                        f"make {kind}_soft at most {kind}_hard, or 0",
                    )
                )
    return issues
