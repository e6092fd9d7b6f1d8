"""Data protection behind one Lustre target: the default level, its device rules and its data share.

The levels and their figures live in kiln/knowledge/protection.yaml; the planner builds zpool vdevs
and md arrays from them (kiln/plan/topology.py) and the sizing model applies the data share
(kiln/plan/sizing.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from kiln import knowledge

#: dRAID data drives per redundancy group at most (OpenZFS zpoolconcepts(7): the default of 8).
DRAID_MAX_DATA = 8
#: ext4 block size of an ldiskfs target, bytes (mkfs.lustre formats ldiskfs with 4 KiB blocks).
LDISKFS_BLOCK_BYTES = 4096


def default_level(backend: str, kind: str, devices: int) -> str | None:
    """The redundant level kiln picks when the spec names none; None for one drive (no default)."""
    if devices < 2:
        return None
    if backend == "zfs":
        if devices == 2 or (kind != "ost" and devices % 2 == 0):
            return "mirror"
        return "raidz1" if devices == 3 else "raidz2"
    if devices < 4:
        return "raid1"
    return "raid6" if kind == "ost" else ("raid10" if devices % 2 == 0 else "raid6")


def level_problem(level: str, backend: str, devices: int) -> tuple[str, str] | None:
    """(problem, fix) when `level` cannot be built from `devices` drives on `backend`; None when it can."""
    levels = knowledge.load().protection.levels
    lv = levels[level]
    if backend not in lv.backends:
        allowed = sorted(k for k, v in levels.items() if backend in v.backends)
        return f"{level} is not a {backend} protection level", f"use one of {', '.join(allowed)}"
    if devices < lv.min_devices:
        return (
            f"{level} needs at least {lv.min_devices} drives, devices_per_target is {devices}",
            f"raise devices_per_target to {lv.min_devices} or pick another level",
        )
    if lv.even and devices % 2:
        return f"{level} pairs drives, {devices} is odd", f"set devices_per_target to {devices + 1} or {devices - 1}"
    if lv.max_devices is not None and devices > lv.max_devices:
        return (
            f"{level} means the array provides redundancy behind one device, not {devices} drives",
            "set devices_per_target: 1, or name an md level (raid1, raid5, raid6, raid10)",
        )
    if level == "none" and backend == "ldiskfs" and devices > 1:
        return "an ldiskfs target without md RAID sits on one device", "set devices_per_target: 1 or a raid level"
    return None


@dataclass(frozen=True, slots=True)
class Share:
    """Share of the drives' raw sequential rate that carries data."""

    read: float
    write: float
    formula: str


def data_drives(level: str, devices: int) -> int:
    """Data drives per redundancy group (n - p; dRAID: min(8, n - p))."""
    parity = knowledge.load().protection.levels[level].parity
    if level.startswith("draid"):
        return min(DRAID_MAX_DATA, devices - parity)
    return devices - parity


def data_share(level: str, devices: int) -> Share:
    lv = knowledge.load().protection.levels[level]
    parity = lv.parity
    copies = devices if lv.copies == "all" else lv.copies
    d = data_drives(level, devices)
    share = d / (d + parity)
    return Share(share, share / copies, f"{level}: data {d}/{d + parity}, written {copies}×")


def capacity_share(level: str, devices: int) -> float:
    """Share of the drives' raw capacity that holds data at `level`: the data drives of each redundancy group, and
    of those one copy ((n - p) / n ÷ copies; a two-way mirror keeps 1/2, raidz2 of 6 drives 4/6, md raid1 of n
    drives 1/n). The same fraction as the write share of data_share(): every data byte is stored once per copy."""
    return data_share(level, devices).write


def zfs_vdevs(level: str, drives: tuple[str, ...]) -> tuple[str, ...]:
    """The vdev words of `zpool create` for `drives` at `level` (mirror: striped two-way mirrors)."""
    if level == "none":
        return drives
    if level == "mirror":
        return tuple(w for i in range(0, len(drives), 2) for w in ("mirror", *drives[i : i + 2]))
    if level.startswith("draid"):
        p = knowledge.load().protection.levels[level].parity
        return (f"draid{p}:{data_drives(level, len(drives))}d:{len(drives)}c:0s", *drives)
    return (level, *drives)


def ext4_raid_options(level: str, devices: int, chunk_KiB: int) -> tuple[str, ...]:
    """mkfs.lustre words aligning ldiskfs to an md array: stride = chunk ÷ block, stripe_width = stride × data
    drives (mke2fs(8), -E stride/stripe_width). Empty for levels without striping (raid1, external, none)."""
    if level not in ("raid5", "raid6", "raid10"):
        return ()
    stride = chunk_KiB * 1024 // LDISKFS_BLOCK_BYTES
    data = devices // 2 if level == "raid10" else data_drives(level, devices)
    return (f"--mkfsoptions=-E stride={stride},stripe_width={stride * data}",)


def default_drive_base(kind: str, idx: int) -> str:
    """The by-id name of the drive(s) behind target `idx` of `kind` when the stack names no paths (drives of a
    group of several are <base>-0, <base>-1, ...): named by the target's index in the filesystem, so failover
    partners address a shared LUN alike and no two targets share one."""
    return f"/dev/disk/by-id/kiln-{kind}{idx:04d}"
