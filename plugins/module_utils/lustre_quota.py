"""Lustre default quotas: lfs quota -U|-G|-P, lfs setquota -U|-G|-P.

One of the five files of kiln's Lustre library (docs/architecture.md, "Lustre library"); pure functions, Python 3.9
and the standard library only (the module side runs on managed nodes).

Format parsed here: ``lfs quota -U|-G|-P MOUNT``, printed by print_quota_title() and print_quota() in
lustre/utils/lfs.c (v2_15_0 and v2_16_0) with show_default set: a ``Disk default <usr|grp|prj> quota:``
line, a header ``Filesystem bquota blimit bgrace iquota ilimit igrace``, then the mount point (2.15 puts a
mount point longer than 15 characters on a line of its own) and six numbers: block soft and hard limits in
KiB, block grace, inode soft and hard limits, inode grace. A value lfs could not read in full is shown in
brackets (``[0]``). Fixtures: tests/unit/ansible_modules/fixtures/quota_default_*.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

QUOTA_TYPES = {"user": ("-U", "usr"), "group": ("-G", "grp"), "project": ("-P", "prj")}
LIMIT_MIN = 1025  # lfs_setquota() warns at or below 1024 (KiB or inodes): below the minimum qunit size
_TITLE = re.compile(r"^Disk default (usr|grp|prj) quota:", re.MULTILINE)
_NUMBER = re.compile(r"^\[?(\d+)\]?$")


@dataclass
class DefaultQuota:
    """Default limits of one quota type; block limits in KiB, 0 = no limit."""

    block_soft_KiB: int = 0
    block_hard_KiB: int = 0
    inode_soft: int = 0
    inode_hard: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def quota_from_spec(raw: dict[str, Any]) -> DefaultQuota:
    """The module's limit arguments -> DefaultQuota (missing keys are 0)."""
    values = {}
    for key in ("block_soft_KiB", "block_hard_KiB", "inode_soft", "inode_hard"):
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value or 0, int):
            raise ValueError(f"{key} must be an integer, not {value!r}")
        values[key] = int(value or 0)
    return DefaultQuota(**values)


def validate_quota(want: DefaultQuota) -> list[str]:
    """Problems with wanted default limits, as sentences (empty when lfs setquota takes them quietly)."""
    errors = []
    for key, value in want.to_dict().items():
        if value < 0:
            errors.append(f"{key} {value}: must be 0 (no limit) or positive")
        elif 0 < value < LIMIT_MIN:
            errors.append(f"{key} {value}: at most 1024 is below the minimum qunit size (lfs setquota warns)")
    for kind in ("block", "inode"):
        unit = "_KiB" if kind == "block" else ""
        soft, hard = getattr(want, f"{kind}_soft{unit}"), getattr(want, f"{kind}_hard{unit}")
        if soft and hard and soft > hard:
            errors.append(f"{kind}_soft{unit} {soft}: above {kind}_hard{unit} {hard}")
    if not any(want.to_dict().values()):
        errors.append("no limit given (all four are 0)")
    return errors


def build_setquota_args(quota_type: str, want: DefaultQuota) -> list[str]:
    """``lfs setquota`` options (without the mount point): ``-U -b 2147483648 -B 0 -i 0 -I 0``.

    lfs_setquota() reads a bare block number in KiB (ARG2ULL with 1024 as the default unit, then >> 10).
    """
    return [
        QUOTA_TYPES[quota_type][0], "-b", str(want.block_soft_KiB), "-B", str(want.block_hard_KiB),
        "-i", str(want.inode_soft), "-I", str(want.inode_hard),
    ]  # fmt: skip


def parse_default_quota(text: str, quota_type: str) -> DefaultQuota | None:
    """``lfs quota -U|-G|-P MOUNT`` -> DefaultQuota, or None when the output has no default quota table."""
    title = next((m for m in _TITLE.finditer(text) if m.group(1) == QUOTA_TYPES[quota_type][1]), None)
    if title is None:
        return None
    tokens = text[title.end():].split()
    if "igrace" not in tokens:
        return None
    values = tokens[tokens.index("igrace") + 2:]  # skip the mount point
    numbers = [_NUMBER.match(v) for v in values[:6]]
    if len(numbers) < 6 or not all(numbers):
        return None
    block_soft, block_hard, _bgrace, inode_soft, inode_hard, _igrace = (int(m.group(1)) for m in numbers if m)
    return DefaultQuota(block_soft, block_hard, inode_soft, inode_hard)


def quota_drift(current: DefaultQuota | None, wanted: DefaultQuota) -> list[dict[str, Any]]:
    """Limits that differ, each {field, current, wanted}; no readable table counts as all limits 0."""
    have = current or DefaultQuota()
    return [
        {"field": key, "current": getattr(have, key), "wanted": value}
        for key, value in wanted.to_dict().items()
        if getattr(have, key) != value
    ]
