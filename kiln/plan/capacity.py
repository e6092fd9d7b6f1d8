"""Capacity plan: usable OST space after protection and filesystem overhead, against what the workload keeps on
Lustre, judged at the monitoring alerts' fill thresholds; and the MDT inodes and OST objects the files need.

Figures and their sources: kiln/knowledge/capacity.yaml (ldiskfs reserved blocks, journals and inode ratios from
mkfs.lustre; ZFS slop, recordsize and RAID-Z/dRAID rounding from OpenZFS), kiln/knowledge/protection.yaml (the
data share of each protection level). TB = 10^12 bytes. See docs/sizing-model.md, "Capacity".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from kiln import knowledge
from kiln.plan.model import Amount, Capacity
from kiln.plan.sizing import checkpoint_bytes, device_figures, gpu_count
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, TargetGroup
from kiln.spec.protection import capacity_share, data_drives, data_share, default_level

TB = 1e12


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetSpace:
    """One target's bytes: after protection (`data`), what the backing filesystem keeps, and what is left."""

    raw: float
    data: float
    kept: dict[str, float]  # overhead name → bytes

    @property
    def usable(self) -> float:
        return self.data - sum(self.kept.values())


def level_of(spec: ClusterSpec, group: TargetGroup, kind: str) -> str:
    """The protection level behind a target group (the spec's, else the kit's default, else none)."""
    return group.protection or default_level(spec.lustre.backend, kind, group.devices_per_target) or "none"


def zfs_block_bytes(level: str, devices: int, ashift: int, block: int) -> int:
    """Bytes one ZFS block of `block` data bytes occupies on the vdev: data and parity sectors, rounded up to a
    multiple of parity + 1 sectors (RAID-Z) or padded to whole stripes of d data sectors (dRAID); mirrors and
    stripes write the data (copies are the protection share's)."""
    sector = 1 << ashift
    sectors = math.ceil(block / sector)
    levels = knowledge.load().protection.levels
    parity = levels[level].parity
    if level.startswith("raidz"):
        d = devices - parity
        total = sectors + parity * math.ceil(sectors / d)
        return math.ceil(total / (parity + 1)) * (parity + 1) * sector
    if level.startswith("draid"):
        d = data_drives(level, devices)
        stripes = math.ceil(sectors / d)
        return stripes * (d + parity) * sector
    return sectors * sector


def zfs_padding_share(level: str, devices: int, ashift: int, file_bytes: float) -> float:
    """Share of a target's data space lost to block rounding when files average `file_bytes`: full records plus
    one last record, each rounded by the layout (zfs_block_bytes), against the layout's nominal data share."""
    if not level.startswith(("raidz", "draid")):
        return 0.0
    record = knowledge.load().capacity.zfs.recordsize_bytes.value
    full, tail = divmod(max(int(file_bytes), 1), record)
    used = full * zfs_block_bytes(level, devices, ashift, record) + (
        zfs_block_bytes(level, devices, ashift, tail) if tail else 0
    )
    nominal = max(int(file_bytes), 1) / data_share(level, devices).read  # at the layout's d/(d+p)
    return max(0.0, 1 - nominal / used)


def ldiskfs_kept(data: float, kind: str) -> dict[str, float]:
    """What ldiskfs keeps of a target: reserved blocks, the journal (mkfs.lustre's cap), an OST's inode tables."""
    lk = knowledge.load().capacity.ldiskfs
    cap_MiB = lk.ost_journal_MB_max.value if kind == "ost" else lk.mdt_journal_MB_max.value
    kept = {
        "reserved blocks": data * lk.reserved_percent.value / 100,
        "journals": min(data * lk.journal_percent_max.value / 100, cap_MiB * 2**20),
    }
    if kind == "ost":
        kept["inode tables"] = data / lk.ost_bytes_per_inode.at(data) * lk.ost_inode_bytes.value
    return kept


def zfs_kept(data: float, level: str, devices: int, ashift: int, file_bytes: float) -> dict[str, float]:
    """What a ZFS pool keeps: the slop space (1/32, between 128 MiB and 128 GiB) and block-rounding padding."""
    z = knowledge.load().capacity.zfs
    slop = min(max(data / 2**z.slop_shift.value, z.slop_min_bytes.value), z.slop_max_bytes.value)
    return {"zfs slop": slop, "zfs padding": data * zfs_padding_share(level, devices, ashift, file_bytes)}


def target_space(spec: ClusterSpec, group: TargetGroup, kind: str, file_bytes: float) -> TargetSpace:
    """One target of `group`: its drives, the protection's data share and what the backend keeps."""
    level = level_of(spec, group, kind)
    raw = group.devices_per_target * device_figures(group.device).capacity_TB * TB
    data = raw * capacity_share(level, group.devices_per_target)
    if spec.lustre.backend == "zfs":
        kept = zfs_kept(data, level, group.devices_per_target, group.ashift, file_bytes)
    else:
        kept = ldiskfs_kept(data, kind)
    return TargetSpace(raw=raw, data=data, kept=kept)


def ost_protected_TB(spec: ClusterSpec) -> float:
    """What every OST holds after its protection, before the backend's overhead: OSTs × drives × drive capacity ×
    the level's capacity share (kiln.spec.protection.capacity_share). The Lustre PersistentVolumes' capacity
    (LustrePlan.ost_usable_capacity_TB) and the capacity plan's `protection` overhead both come from here."""
    lu = spec.lustre
    one = target_space(spec, lu.oss.osts, "ost", knowledge.load().capacity.files.default_file_bytes.value)
    return lu.oss.nodes * lu.oss.osts.per_node * one.data / TB


def checkpoints_kept(spec: ClusterSpec) -> tuple[int, str]:
    """(checkpoints kept on Lustre, where the number comes from)."""
    if spec.workload.checkpoint.keep is not None:
        return spec.workload.checkpoint.keep, "workload.checkpoint.keep"
    df = spec.dataflow
    if df is not None and df.checkpoints is not None:
        return df.checkpoints.keep_resident, "dataflow.checkpoints.keep_resident"
    return knowledge.load().capacity.files.checkpoints_kept.value, "the kit's default (capacity.yaml)"


def dataset_files(spec: ClusterSpec) -> tuple[int, str]:
    """(files of the staged dataset, how the number was found)."""
    w = spec.workload
    nbytes = w.dataset_TB * TB
    if w.dataset_files is not None:
        return w.dataset_files, "workload.dataset_files"
    if w.samples is not None and w.samples.files_per_sample:
        per_file = w.samples.size_KB * 1e3 / w.samples.files_per_sample
        return max(1, math.ceil(nbytes / per_file)), f"dataset_TB ÷ {per_file / 1e3:g} KB per file (workload.samples)"
    default = knowledge.load().capacity.files.default_file_bytes.value
    return max(1, math.ceil(nbytes / default)), (
        f"dataset_TB ÷ {default / 2**20:g} MiB, mkfs.lustre's assumed mean file size; give workload.dataset_files"
    )


def checkpoint_files(spec: ClusterSpec) -> int:
    """Files one checkpoint writes: one per rank (DCP FileSystemWriter) and the .metadata file, or one file."""
    if not spec.workload.checkpoint.sharded:
        return 1
    return gpu_count(spec) * knowledge.load().capacity.files.checkpoint_files_per_rank.value + 1


def demand(spec: ClusterSpec) -> tuple[Amount, ...]:
    """What the workload keeps on Lustre: the staged dataset, the checkpoints kept, the scratch space."""
    keep, keep_src = checkpoints_kept(spec)
    ck = checkpoint_bytes(spec)
    return (
        Amount(name="dataset", TB=spec.workload.dataset_TB, why="workload.dataset_TB (the lake's share staged in)"),
        Amount(name="checkpoints", TB=ck * keep / TB, why=f"{keep} × {ck / TB:.3g} TB ({keep_src})"),
        Amount(name="scratch", TB=spec.workload.scratch_TB, why="workload.scratch_TB"),
    )


def ost_totals(spec: ClusterSpec, file_bytes: float) -> tuple[float, float, dict[str, float], int]:
    """(raw TB, usable TB, overhead name → TB, OST objects) over every OST of the filesystem."""
    lu = spec.lustre
    n = lu.oss.nodes * lu.oss.osts.per_node
    one = target_space(spec, lu.oss.osts, "ost", file_bytes)
    kept = {k: n * v / TB for k, v in one.kept.items()}
    overheads = {"protection": n * one.raw / TB - ost_protected_TB(spec), **kept}
    if lu.backend == "zfs":
        per_object = knowledge.load().capacity.zfs.bytes_per_inode.value
    else:
        per_object = knowledge.load().capacity.ldiskfs.ost_bytes_per_inode.at(one.data)
    return n * one.raw / TB, n * one.usable / TB, overheads, int(n * one.data // per_object)


def mdt_inodes(spec: ClusterSpec) -> int:
    """Inodes the MDTs hold: ldiskfs formats one per 2560 bytes; ZFS needs at least 4 KiB of space per inode."""
    lu = spec.lustre
    cap = knowledge.load().capacity
    one = target_space(spec, lu.mds.mdts, "mdt", cap.files.default_file_bytes.value)
    per = cap.zfs.bytes_per_inode.value if lu.backend == "zfs" else cap.ldiskfs.mdt_bytes_per_inode.value
    base = one.usable if lu.backend == "zfs" else one.data - one.kept["journals"]
    return int(lu.mds.nodes * lu.mds.mdts.per_node * base // per)


def build_capacity(spec: ClusterSpec) -> tuple[Capacity, list[SpecIssue]]:
    """The capacity plan and its issues: an error when the demand does not fit under the fill warning, when the
    files exceed the MDT inodes or the OST objects; a warning below the manual's twofold inode margin."""
    ds_files, files_src = dataset_files(spec)
    keep, _ = checkpoints_kept(spec)
    files = ds_files + keep * checkpoint_files(spec)
    mean_file = spec.workload.dataset_TB * TB / ds_files
    raw, usable, overheads, objects = ost_totals(spec, mean_file)
    wanted = demand(spec)
    demand_TB = sum(a.TB for a in wanted)
    mon = spec.monitoring
    cap = Capacity(
        raw_TB=raw, usable_TB=usable, demand=wanted, demand_TB=demand_TB,
        overheads=tuple(Amount(name=k, TB=v, why=_OVERHEAD_WHY[k]) for k, v in overheads.items() if v > 0),
        fill_percent=100 * demand_TB / usable if usable > 0 else math.inf,
        fill_warn_percent=mon.fill_warn_percent, fill_critical_percent=mon.fill_critical_percent,
        files=files, mdt_inodes=mdt_inodes(spec), ost_objects=objects,
        why=(f"dataset files: {ds_files:,} ({files_src})",
             f"checkpoint files: {keep} × {checkpoint_files(spec):,} (one per rank and a .metadata file)"),
    )
    return cap, capacity_issues(spec, cap)


_OVERHEAD_WHY = {
    "protection": "parity and mirror copies of the OSTs' protection level (kiln/knowledge/protection.yaml)",
    "reserved blocks": "ldiskfs keeps 5 % reserved (mke2fs default; Lustre manual, Determining Space Requirements)",
    "journals": "ldiskfs journal: 4 % of the target, at most 400 MiB per OST (libmount_utils_ldiskfs.c)",
    "inode tables": "one 512-byte inode per mkfs.lustre's bytes-per-inode step (libmount_utils_ldiskfs.c)",
    "zfs slop": "1/32 of each pool, 128 MiB to 128 GiB (OpenZFS spa_misc.c spa_slop_shift)",
    "zfs padding": "RAID-Z/dRAID block rounding at the mean file size (github.com/openzfs/zfs pull 5931)",
}


def capacity_issues(spec: ClusterSpec, cap: Capacity) -> list[SpecIssue]:
    """An error where the demand sits above the fill warning or the files exceed MDT inodes or OST objects."""
    out: list[SpecIssue] = []
    lu = spec.lustre
    limit = cap.usable_TB * cap.fill_warn_percent / 100
    if cap.demand_TB > limit:
        per_oss = cap.usable_TB / lu.oss.nodes * cap.fill_warn_percent / 100
        need = math.ceil(cap.demand_TB / per_oss - 1e-9)
        need += need % 2 if lu.failover == "pairs" else 0
        terms = ", ".join(f"{a.name} {a.TB:,.1f}" for a in cap.demand if a.TB)
        out.append(SpecIssue(
            "lustre.oss.nodes", lu.oss.nodes,
            f"the filesystem is too small: the workload keeps {cap.demand_TB:,.1f} TB ({terms}) on "
            f"{cap.usable_TB:,.1f} TB usable (of {cap.raw_TB:,.1f} TB raw), {cap.fill_percent:,.0f} % full against "
            f"the fill warning at {cap.fill_warn_percent:g} % (monitoring.fill_warn_percent)",
            f"use at least {need} OSS nodes ({per_oss:,.1f} TB usable each under the warning), larger or more drives "
            "per OST (lustre.oss.osts), or lower workload.dataset_TB / checkpoint.keep / scratch_TB",
        ))
    out += inode_issues(spec, cap)
    return out


def inode_issues(spec: ClusterSpec, cap: Capacity) -> list[SpecIssue]:
    """MDT inodes and OST objects against the files: an error below the files, a warning below twice the files."""
    lu = spec.lustre
    growth = knowledge.load().capacity.files.inode_growth.value
    out: list[SpecIssue] = []
    mdts = lu.mds.nodes * lu.mds.mdts.per_node
    if cap.files > cap.mdt_inodes or cap.files * growth > cap.mdt_inodes:
        per_mdt = cap.mdt_inodes / mdts
        need = math.ceil(cap.files * growth / per_mdt)
        severity: Literal["error", "warning"] = "error" if cap.files > cap.mdt_inodes else "warning"
        out.append(SpecIssue(
            "lustre.mds.mdts", f"{mdts} MDTs",
            f"the MDTs hold {cap.mdt_inodes:,} inodes for {cap.files:,} files"
            + ("" if severity == "error" else f", less than the manual's {growth:g}× margin"),
            f"use at least {need} MDTs ({per_mdt:,.0f} inodes each: lustre.mds.nodes / mdts.per_node) or larger "
            "MDT drives, or give the real workload.dataset_files",
            severity,
        ))
    if cap.files > cap.ost_objects:
        out.append(SpecIssue(
            "lustre.oss.osts", f"{lu.oss.nodes * lu.oss.osts.per_node} OSTs",
            f"the OSTs hold {cap.ost_objects:,} objects (mkfs.lustre's bytes per inode) for {cap.files:,} files",
            "add OSTs, or pack small files into shards (workload.samples.files_per_sample: 0)",
        ))
    return out
