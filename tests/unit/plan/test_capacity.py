"""Capacity plan: usable space after protection and filesystem overhead against what the workload keeps, judged at
the monitoring fill warning; MDT inodes and OST objects against the files."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kiln import knowledge
from kiln.plan import build_plan
from kiln.plan.capacity import zfs_block_bytes, zfs_padding_share
from kiln.spec import SpecError, validate


def plan_of(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


def test_an_undersized_filesystem_is_refused_with_the_numbers_and_the_fix(stack: Any) -> None:
    data = stack("prod-h100")
    data["workload"]["dataset_TB"] = 2000  # 2 PB of data on ~466 TB usable
    with pytest.raises(SpecError) as e:
        plan_of(data)
    text = str(e.value)
    assert "lustre.oss.nodes" in text and "too small" in text
    assert "2,000.0" in text and "466" in text and "fill warning at 80 %" in text
    usable_per_oss = 466.45 / 4 * 0.8
    need = math.ceil((2000 + 2.94) / usable_per_oss)
    assert f"use at least {need + need % 2} OSS nodes" in text


def test_prod_fits_and_shows_where_the_space_goes(stack: Any) -> None:
    cap = plan_of(stack("prod-h100")).capacity
    kb = knowledge.load()
    raw = 4 * 8 * 2 * 15.36  # OSS × OSTs × drives × TB
    assert cap.raw_TB == pytest.approx(raw)
    over = {a.name: a.TB for a in cap.overheads}
    assert over["protection"] == pytest.approx(raw / 2)  # md raid1 pairs: half the raw
    assert over["reserved blocks"] == pytest.approx(raw / 2 * kb.capacity.ldiskfs.reserved_percent.value / 100)
    assert over["journals"] == pytest.approx(32 * 400 * 2**20 / 1e12)  # 400 MiB cap per OST
    assert cap.usable_TB == pytest.approx(raw - sum(over.values()))
    demand = {a.name: a.TB for a in cap.demand}
    assert demand["checkpoints"] == pytest.approx(3 * 70e9 * 14 / 1e12)  # keep_resident 3 × 980 GB
    assert cap.fill_percent == pytest.approx(100 * cap.demand_TB / cap.usable_TB)
    assert cap.fill_percent < cap.fill_warn_percent


def test_fill_threshold_is_the_monitoring_warning(stack: Any) -> None:
    data = stack("prod-h100")
    cap = plan_of(data).capacity
    data["workload"]["dataset_TB"] = cap.usable_TB * 0.6
    plan_of(data)  # 60 % + checkpoints: under the default 80 % warning
    data.setdefault("monitoring", {})["fill_warn_percent"] = 50
    data["monitoring"]["fill_critical_percent"] = 90
    with pytest.raises(SpecError, match="fill warning at 50 %"):
        plan_of(data)


def test_mdt_inodes_are_planned_from_the_file_count(stack: Any) -> None:
    data = stack("dev")
    data["workload"]["dataset_files"] = 5_000_000_000  # 5e9 files of 4 KB on one 7.68 TB MDT
    with pytest.raises(SpecError) as e:
        plan_of(data)
    text = str(e.value)
    assert "lustre.mds.mdts" in text and "inodes" in text and "5,000,000,002" not in text
    assert "use at least" in text and "MDTs" in text


def test_inodes_below_twice_the_files_warn(stack: Any) -> None:
    data = stack("dev")
    data["lustre"]["mds"]["mdts"]["device"] = {"read_GBps": 6, "write_GBps": 5, "capacity_TB": 0.1}
    inodes = plan_of(data).capacity.mdt_inodes
    assert inodes == pytest.approx((0.1e12 - 4e9) / 2560, rel=1e-3)  # raid1 pair, 4 % journal, 2560 B per inode
    data["workload"]["dataset_files"] = int(inodes * 0.6)
    plan = plan_of(data)
    assert any(w.path == "lustre.mds.mdts" and w.severity == "warning" for w in plan.warnings)


def test_small_files_default_from_the_samples(stack: Any) -> None:
    data = stack("dev")
    data["workload"]["samples"] = {"size_KB": 100, "files_per_sample": 1}
    cap = plan_of(data).capacity
    assert cap.files >= 20e12 / 100e3
    assert "100 KB per file" in cap.why[0]


def test_zfs_slop_and_draid_padding(stack: Any) -> None:
    # dRAID pads every block to whole stripes of d data sectors: a 40 KiB file on draid2 with 8 data drives at
    # ashift 12 takes 10 data sectors -> 2 stripes of (8 + 2) sectors, 80 KiB for 40 KiB.
    assert zfs_block_bytes("draid2", 10, 12, 40 * 1024) == 2 * 10 * 4096
    # RAID-Z rounds to multiples of parity + 1 sectors: 10 data + 2×3 parity = 16 -> 18 sectors on raidz2 of 6.
    assert zfs_block_bytes("raidz2", 6, 12, 40 * 1024) == 18 * 4096
    assert zfs_padding_share("draid2", 10, 12, 40 * 1024) == pytest.approx(1 - (40 * 1024 / 0.8) / (80 * 1024))
    assert zfs_padding_share("mirror", 2, 12, 1) == 0
    data = stack("prod-h100")
    data["lustre"]["backend"] = "zfs"
    data["lustre"]["oss"]["osts"].update(devices_per_target=10, protection="draid2")
    data["lustre"]["mds"]["mdts"].update(protection="mirror")
    cap = plan_of(data).capacity
    over = {a.name: a.TB for a in cap.overheads}
    per_pool = 10 * 15.36e12 * 0.8
    assert over["zfs slop"] == pytest.approx(32 * min(per_pool / 32, 128 * 2**30) / 1e12)
    assert "reserved blocks" not in over


@pytest.mark.parametrize("protection", ["raid1", "raid6"])
def test_the_volumes_and_the_capacity_plan_start_from_the_same_protected_space(stack: Any, protection: str) -> None:
    """The PersistentVolumes' capacity is the capacity plan's raw less its protection overhead (one function)."""
    data = stack("dev")
    data["lustre"]["oss"]["osts"].update(protection=protection, devices_per_target=6 if protection == "raid6" else 2)
    plan = plan_of(data)
    cap = plan.capacity
    protection_TB = next(a.TB for a in cap.overheads if a.name == "protection")
    assert plan.lustre.ost_usable_capacity_TB == pytest.approx(cap.raw_TB - protection_TB)
    assert cap.usable_TB < plan.lustre.ost_usable_capacity_TB  # the backend's overhead comes off after
