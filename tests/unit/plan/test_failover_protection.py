"""Failover pairs address each target by one device name on both servers; targets are redundant."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.spec.loader import load_stack, validate
from kiln.spec.protection import data_share, ext4_raid_options, zfs_vdevs
from tests.unit.refusals import DROP, Refusal, refusal, refused


def _data(name: str) -> dict[str, Any]:
    return copy.deepcopy(load_stack(name).model_dump(mode="json", exclude_none=True))


def _plan(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "t"), "t")


def test_every_target_has_its_own_device_across_partners() -> None:
    plan = build_plan(load_stack("prod-h100"))
    devices = [t.device for t in plan.lustre_targets]
    assert len(devices) == len(set(devices))
    drives = [d for t in plan.lustre_targets for d in t.drives]
    assert len(drives) == len(set(drives))
    ost8 = next(t for t in plan.lustre_targets if t.name == "prod-OST0008")
    assert ost8.device == "/dev/md/prod-ost0008" and ost8.failover_host == "oss01"


def test_zfs_pairs_get_distinct_pools_and_redundant_vdevs() -> None:
    data = _data("prod-h100")
    data["lustre"]["backend"] = "zfs"
    plan = _plan(data)
    pools = [t.device.split("/")[0] for t in plan.lustre_targets]
    assert len(pools) == len(set(pools))
    ost = next(t for t in plan.lustre_targets if t.kind == "ost")
    assert ost.vdevs[0] == "mirror" and ost.protection == "mirror" and ost.ashift == 12
    mdt = next(t for t in plan.lustre_targets if t.kind == "mdt")
    assert mdt.vdevs.count("mirror") == 2  # four drives: two mirrored pairs


def test_mgt_is_mirrored() -> None:
    mgt = build_plan(load_stack("prod-h100")).lustre_targets[0]
    assert mgt.kind == "mgt" and mgt.protection == "raid1" and len(mgt.drives) == 2
    data = _data("prod-h100")
    data["lustre"]["backend"] = "zfs"
    mgt = _plan(data).lustre_targets[0]
    assert mgt.vdevs == ("mirror", "/dev/disk/by-id/kiln-mgt-0", "/dev/disk/by-id/kiln-mgt-1")


def _level(backend: str, level: str, devices: int) -> dict[str, Any]:
    osts = "lustre.oss.osts"
    return {"lustre.backend": backend, f"{osts}.protection": level, f"{osts}.devices_per_target": devices}


REFUSALS = [
    refusal("paths shared by two targets", "dev", {"lustre.oss.osts.paths": ["/dev/mapper/ost-a"] * 8},
            "lustre.oss.osts.paths[1]", plan=True, problem="two targets on one device"),
    refusal("paths must name every target", "dev",
            {"lustre.oss.osts.paths": ["/dev/mapper/a", "/dev/mapper/b", "/dev/mapper/c", "/dev/mapper/d"]},
            "lustre.oss.osts.paths", plan=True, problem="4 paths for 8 targets"),
    refusal("one drive needs a named level", "dev", {"lustre.oss.osts.devices_per_target": 1},
            "lustre.oss.osts.protection", plan=True, problem="no redundancy"),
    refusal("raidz2 on ldiskfs", "dev", _level("ldiskfs", "raidz2", 4), "lustre.oss.osts.protection", plan=True,
            problem="not a ldiskfs protection level"),
    refusal("raid6 on zfs", "dev", _level("zfs", "raid6", 4), "lustre.oss.osts.protection", plan=True,
            problem="not a zfs protection level"),
    refusal("raid6 on 3 drives", "dev", _level("ldiskfs", "raid6", 3), "lustre.oss.osts.protection", plan=True,
            problem="at least 4"),
    refusal("mirror on 3 drives", "dev", _level("zfs", "mirror", 3), "lustre.oss.osts.protection", plan=True,
            problem="odd"),
    refusal("external on 2 drives", "dev", _level("ldiskfs", "external", 2), "lustre.oss.osts.protection",
            plan=True, problem="one device"),
    refusal("failover pairs require fencing", "prod-h100", {"lustre.ha.fencing": DROP}, "lustre.ha.fencing",
            plan=True, problem="without fencing"),
]


@pytest.mark.parametrize("row", REFUSALS)
def test_refused(row: Refusal) -> None:
    refused(row)


def test_a_lab_fence_agent_is_a_warning() -> None:
    data = _data("prod-h100")
    data["lustre"]["ha"]["fencing"] = {"agent": "none-lab"}
    assert any("none-lab" in w.line() for w in _plan(data).warnings)


def test_sizing_write_factor_follows_protection() -> None:
    assert data_share("mirror", 2).write == 0.5 and data_share("mirror", 2).read == 1.0
    assert data_share("raidz2", 6).write == pytest.approx(4 / 6)
    assert data_share("raid1", 3).write == pytest.approx(1 / 3)
    assert data_share("draid2", 12).read == pytest.approx(8 / 10)
    plan = build_plan(load_stack("prod-h100"))
    layers = {layer.name: layer for layer in plan.sizing.layers}
    assert layers["ost_devices"].write_GBps == pytest.approx(64 * 6.6 * 0.75)
    assert layers["protection"].write_GBps == pytest.approx(64 * 6.6 * 0.75 * 0.5)  # raid1 writes twice
    assert layers["protection"].read_GBps == pytest.approx(64 * 13 * 0.85)


def test_layout_words() -> None:
    assert zfs_vdevs("mirror", ("a", "b", "c", "d")) == ("mirror", "a", "b", "mirror", "c", "d")
    assert zfs_vdevs("draid2", tuple("abcdefghijkl"))[0] == "draid2:8d:12c:0s"
    # mke2fs(8): stride = chunk ÷ 4 KiB block; stripe_width = stride × data drives.
    assert ext4_raid_options("raid6", 6, 128) == ("--mkfsoptions=-E stride=32,stripe_width=128",)
    assert ext4_raid_options("raid10", 4, 512) == ("--mkfsoptions=-E stride=128,stripe_width=256",)
    assert ext4_raid_options("raid1", 2, 128) == ()


def test_inventory_gives_the_partner_standby_units_and_pacemaker_resources() -> None:
    from kiln.render.inventory import hostid, render_inventory
    from kiln.yamlio import load_inventory

    spec = load_stack("prod-h100")
    files = render_inventory(build_plan(spec))
    oss01 = load_inventory(files["host_vars/oss01.yml"])
    oss02 = load_inventory(files["host_vars/oss02.yml"])
    standby = {t["name"] for t in oss01["lustre_server_standby_targets"]}
    assert standby == {t["name"] for t in oss02["lustre_server_targets"]}
    assert oss01["lustre_server_standby_targets"][0]["device"] == oss02["lustre_server_targets"][0]["device"]
    assert oss01["lustre_ha_cluster_name"] == oss02["lustre_ha_cluster_name"] == "prod-oss01-oss02"
    resources = {r["name"]: r for r in oss01["lustre_ha_resources"]}
    assert len(resources) == 16 and resources["prod-OST0008"]["node"] == "oss02"
    assert resources["prod-OST0008"]["agent"] == "ocf:lustre:Lustre"
    assert resources["prod-OST0008"]["params"]["target"] == "/dev/md/prod-ost0008"
    mds01 = load_inventory(files["host_vars/mds01.yml"])
    assert [r["tier"] for r in mds01["lustre_ha_resources"]] == [0, 1, 1]  # MGS, then MDTs
    servers = load_inventory(files["group_vars/kiln_lustre_servers.yml"])
    assert servers["lustre_server_manage_mounts"] is False
    fencing = servers["lustre_ha_fencing"]
    assert fencing["agent"] == "fence_ipmilan" and fencing["password_env"] == "KILN_FENCE_PASSWORD"
    assert "password" not in fencing
    assert hostid("10.100.0.12") == "0a64000c" and hostid("10.100.0.12") != hostid("10.100.0.13")
