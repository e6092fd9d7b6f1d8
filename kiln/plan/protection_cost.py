"""Write cost of the OSTs' data protection: data bytes per byte the drives write, per protection level.

- Mirrors (ZFS mirror, md raid1/raid10) write every block once per copy (protection.yaml `copies`).
- md raid5/raid6 write full stripes at the data share d/(d+p); a write smaller than a stripe is a partial-stripe
  write, for which md either reads the old data and parity it changes (read-modify-write) or the data it does not
  change (reconstruct-write), whichever reads less, then writes the changed chunks and the parity
  (Linux drivers/md/raid5.c, handle_stripe_dirtying(): rmw and rcw block counts; md(4), "RAID4/5/6").
  The write unit is the OSS's bulk RPC (`server.obdfilter.brw_size`), the largest write ldiskfs hands to md.
- RAID-Z and dRAID never read to write (copy-on-write, full-block parity) but round each block: to multiples of
  parity + 1 sectors (RAID-Z) or to whole stripes of d data sectors (dRAID) (kiln.plan.capacity.zfs_block_bytes).

Not modelled: the CPU cost of md's parity engine on full stripes (one raid5d thread per array unless
group_thread_cnt is set): no published measurement on NVMe was found to put a figure on it, so the plan says so
beside the protection layer and the storage.ior_easy_write check measures it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kiln import knowledge
from kiln.plan.tuning import brw_size_MiB
from kiln.spec.models import ClusterSpec
from kiln.spec.protection import data_drives, data_share, default_level

#: Where the partial-stripe rule is written down.
MD_SOURCE = "drivers/md/raid5.c handle_stripe_dirtying (rmw vs rcw)"


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteCost:
    """Data bytes per write-equivalent byte on the OST drives, and how that was found."""

    efficiency: float
    formula: str


def ost_level(spec: ClusterSpec) -> str:
    osts = spec.lustre.oss.osts
    return osts.protection or default_level(spec.lustre.backend, "ost", osts.devices_per_target) or "none"


def md_parity_cost(*, devices: int, parity: int, chunk_KiB: int, unit_KiB: int, read_weight: float) -> WriteCost:
    """md raid5/6: full stripes cost (d+p)/d; a partial stripe of r chunks writes r + p chunks and reads the fewer
    of r + p (read-modify-write) and d − r (reconstruct-write), a read weighing `read_weight` of a write."""
    d = devices - parity
    stripe_KiB = d * chunk_KiB
    full, rest = divmod(unit_KiB, stripe_KiB)
    r = math.ceil(rest / chunk_KiB)
    written = full * (d + parity) + (r + parity if r else 0)
    read = min(r + parity, d - r) if r else 0
    efficiency = (unit_KiB / chunk_KiB) / (written + read * read_weight)
    if not r:
        how = f"{unit_KiB // 1024} MiB RPCs fill whole {stripe_KiB} KiB stripes: data {d}/{d + parity}"
    else:
        how = (
            f"{unit_KiB // 1024} MiB RPCs leave {r} of {d} chunks of a {stripe_KiB} KiB stripe partial: md writes "
            f"{r}+{parity} chunks and reads {read} ({MD_SOURCE})"
        )
    return WriteCost(efficiency=efficiency, formula=how)


def zfs_parity_cost(level: str, devices: int, ashift: int) -> WriteCost:
    """RAID-Z/dRAID: a full record's data against the sectors it occupies after rounding (no reads)."""
    from kiln.plan.capacity import zfs_block_bytes  # one rounding rule, kept with the capacity plan

    record = knowledge.load().capacity.zfs.recordsize_bytes.value
    used = zfs_block_bytes(level, devices, ashift, record)
    d = data_drives(level, devices)
    return WriteCost(
        efficiency=record / used,
        formula=f"{record // 1024} KiB records on {level} of {devices} (d={d}): {record / used:.3f} of the sectors "
        "written carry data (parity and rounding)",
    )


def write_cost(spec: ClusterSpec, *, read_weight: float) -> WriteCost:
    """The OSTs' write cost at their protection level (module docstring); `read_weight` is the drives' write rate
    ÷ their read rate (a byte md reads costs that much of a written byte)."""
    osts = spec.lustre.oss.osts
    level, n = ost_level(spec), osts.devices_per_target
    lv = knowledge.load().protection.levels[level]
    if level in ("raid5", "raid6"):
        return md_parity_cost(
            devices=n, parity=lv.parity, chunk_KiB=osts.chunk_KiB, unit_KiB=brw_size_MiB(spec) * 1024,
            read_weight=read_weight,
        )
    if level.startswith(("raidz", "draid")):
        return zfs_parity_cost(level, n, osts.ashift)
    share = data_share(level, n)
    copies = round(share.read / share.write)
    return WriteCost(efficiency=share.write, formula=f"{level}: every block written {copies}×")
