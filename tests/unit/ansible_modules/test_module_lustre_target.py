"""lustre_target run end to end (in process; the first test through ``ansible -m``) with the fake Lustre tools.

The data-safety tests at the bottom use the REAL blkid (and wipefs) from
util-linux on a real ext4 filesystem in a regular file; only mkfs.lustre and
tunefs.lustre are doubles there.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kiln_ansible_support import Doubles, ModuleRunner, real_tool

MGS = [["10.0.0.1@o2ib0", "10.0.1.1@o2ib0"], ["10.0.0.2@o2ib0", "10.0.1.2@o2ib0"]]
SERVICE = [["10.0.0.11@o2ib0"], ["10.0.0.12@o2ib0"]]


def blank_device(tmp_path: Path, name: str = "ost3.img") -> Path:
    device = tmp_path / name
    device.write_bytes(b"\0" * 65536)
    return device


def ost_args(doubles: Doubles, device: Path | str, **overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "name": "lab-OST0003",
        "kind": "ost",
        "fsname": "lab",
        "index": 3,
        "device": str(device),
        "mgsnode": MGS,
        "servicenode": SERVICE,
        "mkfs_lustre": doubles.tool("mkfs.lustre"),
        "tunefs_lustre": doubles.tool("tunefs.lustre"),
        "blkid": doubles.tool("blkid"),
        "wipefs": doubles.tool("wipefs"),
        "allow_file_device": True,  # the test devices are regular files
    }
    args.update(overrides)
    return args


def wipes(doubles: Doubles) -> list[list[str]]:
    """The wipefs calls that erase (not the read-only ``--no-act --json`` listings)."""
    return [call for call in doubles.calls("wipefs") if "-a" in call]


def preformat(doubles: Doubles, device: Path, *options: str) -> None:
    """Put a Lustre target on the (fake) device the way an earlier run would have."""
    cmd = [doubles.tool("mkfs.lustre"), *options, "--backfstype=ldiskfs", str(device)]
    subprocess.run(cmd, env={**doubles.env(), "PATH": "/usr/bin:/bin"}, check=True, capture_output=True)
    doubles.log_path.unlink()


# -- blank devices ----------------------------------------------------------------


def test_blank_device_is_formatted_once(run_module_ansible: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    device = blank_device(tmp_path)
    result = run_module_ansible("lustre_target", ost_args(doubles, device))
    assert result["changed"] is True
    assert result["operation"] == "format"
    assert doubles.calls("mkfs.lustre") == [
        [
            "--fsname=lab",
            "--ost",
            "--index=3",
            "--mgsnode=10.0.0.1@o2ib0,10.0.1.1@o2ib0",
            "--mgsnode=10.0.0.2@o2ib0,10.0.1.2@o2ib0",
            "--servicenode=10.0.0.11@o2ib0",
            "--servicenode=10.0.0.12@o2ib0",
            "--backfstype=ldiskfs",
            str(device),
        ]
    ]
    assert "content: blank" in result["diff"]["before"]
    assert "target: lab-OST0003" in result["diff"]["after"]

    again = run_module_ansible("lustre_target", ost_args(doubles, device))
    assert again["changed"] is False
    assert again["operation"] == "none"
    assert again["drift"] == []
    assert again["target"]["name"] == "lab-OST0003"
    assert len(doubles.calls("mkfs.lustre")) == 1


def test_check_mode_reports_the_format_but_never_calls_mkfs(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    device = blank_device(tmp_path)
    result = run_module("lustre_target", ost_args(doubles, device), check=True)
    assert result["changed"] is True
    assert result["operation"] == "format"
    assert result["commands"][0][0].endswith("mkfs.lustre")
    assert "--reformat" not in result["commands"][0]
    assert doubles.calls("mkfs.lustre") == []
    assert wipes(doubles) == []
    assert doubles.state().get("targets", {}) == {}


def test_mgs_and_combined_mdt(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    mgt = blank_device(tmp_path, "mgt.img")
    args = ost_args(doubles, mgt, name="MGS", kind="mgt", fsname="", index=None, mgsnode=[])
    assert run_module("lustre_target", args)["changed"] is True
    assert run_module("lustre_target", args)["changed"] is False
    assert doubles.calls("mkfs.lustre")[0][:2] == ["--mgs", "--servicenode=10.0.0.11@o2ib0"]

    mdt = blank_device(tmp_path, "mdt.img")
    args = ost_args(doubles, mdt, name="lab-MDT0000", kind="mdt", index=0, with_mgs=True, mgsnode=[])
    assert run_module("lustre_target", args)["changed"] is True
    again = run_module("lustre_target", args)
    assert again["changed"] is False
    assert again["target"]["kinds"] == ["mgt", "mdt"]


def test_missing_device_is_refused_before_any_probe(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    result = run_module("lustre_target", ost_args(doubles, tmp_path / "nope"))
    assert result["failed"] is True
    assert f"device {tmp_path / 'nope'} for lab-OST0003 does not exist" in result["msg"]
    assert doubles.calls() == []


def test_invalid_arguments_are_explained(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    result = run_module("lustre_target", ost_args(doubles, blank_device(tmp_path), index=4))
    assert result["failed"] is True
    assert "name 'lab-OST0003' does not match kind/fsname/index, which make 'lab-OST0004'" in result["msg"]
    assert doubles.calls() == []


# -- existing content ------------------------------------------------------------------


def test_foreign_filesystem_is_refused_even_in_check_mode(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    device = blank_device(tmp_path)
    doubles.set_state(signatures={str(device): {"LABEL": "scratch", "TYPE": "xfs", "USAGE": "filesystem"}})
    for check in (True, False):
        result = run_module("lustre_target", ost_args(doubles, device), check=check)
        assert result["failed"] is True
        assert "TYPE=xfs LABEL=scratch" in result["msg"]
        assert result["found"] == "TYPE=xfs LABEL=scratch"
    assert doubles.calls("mkfs.lustre") == []


def test_partition_table_and_ambivalent_probe_are_content(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    gpt = blank_device(tmp_path, "disk.img")
    both = blank_device(tmp_path, "both.img")
    doubles.set_state(signatures={str(gpt): {"PTUUID": "x", "PTTYPE": "gpt"}, str(both): "AMBIVALENT"})
    assert "PTTYPE=gpt" in run_module("lustre_target", ost_args(doubles, gpt))["msg"]
    assert "several signatures" in run_module("lustre_target", ost_args(doubles, both))["msg"]
    assert doubles.calls("mkfs.lustre") == []


def test_blank_partition_entry_is_not_content(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    device = blank_device(tmp_path)
    doubles.set_state(signatures={str(device): {"PART_ENTRY_SCHEME": "gpt", "PART_ENTRY_NUMBER": "1"}})
    result = run_module("lustre_target", ost_args(doubles, device))
    assert result["changed"] is True
    assert result["operation"] == "format"


def test_another_lustre_target_is_refused_and_reformatted_only_when_named(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    device = blank_device(tmp_path)
    preformat(doubles, device, "--fsname=lab", "--ost", "--index=1", "--mgsnode=10.0.0.1@o2ib")

    refused = run_module("lustre_target", ost_args(doubles, device, reformat=["lab-OST0001"]))
    assert refused["failed"] is True
    assert "refusing to format lab-OST0003" in refused["msg"]
    assert "Lustre target lab-OST0001 (fsname lab, index 1, ldiskfs)" in refused["msg"]
    assert refused["target"]["name"] == "lab-OST0001"
    assert doubles.calls("mkfs.lustre") == []

    result = run_module("lustre_target", ost_args(doubles, device, reformat=["lab-OST0003"]))
    assert result["changed"] is True
    assert result["operation"] == "reformat"
    assert "--reformat" in doubles.calls("mkfs.lustre")[0]
    assert wipes(doubles) == []
    assert "target: lab-OST0001" in result["diff"]["before"]
    assert "target: lab-OST0003" in result["diff"]["after"]


def test_reformat_list_never_reformats_the_wanted_target(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    device = blank_device(tmp_path)
    run_module("lustre_target", ost_args(doubles, device))
    result = run_module("lustre_target", ost_args(doubles, device, reformat=["lab-OST0003"]))
    assert result["changed"] is False
    assert len(doubles.calls("mkfs.lustre")) == 1


# -- device kinds and blkid errors: none passes for a blank device ---------------------


def test_regular_file_is_refused_unless_allowed(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    device = blank_device(tmp_path)
    result = run_module("lustre_target", ost_args(doubles, device, allow_file_device=False))
    assert result["failed"] is True
    assert f"refusing to use {device} for lab-OST0003: it is a regular file, not a block device" in result["msg"]
    assert "allow_file_device: true" in result["msg"] and "/dev/disk/by-id" in result["msg"]
    assert doubles.calls("blkid") == [] and doubles.calls("mkfs.lustre") == []


def test_character_device_and_directory_are_refused(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    for path, kind in (("/dev/null", "a character device"), (str(tmp_path), "a directory")):
        result = run_module("lustre_target", ost_args(doubles, path))
        assert result["failed"] is True
        assert f"refusing to use {path} for lab-OST0003: it is {kind}, not a block device" in result["msg"]
    assert doubles.calls("mkfs.lustre") == []


def test_zfs_vdev_must_be_a_block_device(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    disk = str(blank_device(tmp_path, "a.img"))
    result = run_module("lustre_target", zfs_args(doubles, ["mirror", disk], allow_file_device=False))
    assert result["failed"] is True
    assert f"refusing to use {disk} for lab-OST0003: it is a regular file, not a block device" in result["msg"]
    assert "vdev's block device" in result["msg"]
    assert doubles.calls("mkfs.lustre") == []


def test_blkid_nothing_found_is_confirmed_with_wipefs(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    device = blank_device(tmp_path)
    doubles.set_state(quirks={"wipefs_fail": {"rc": 1, "message": f"error: {device}: probing initialization failed"}})
    result = run_module("lustre_target", ost_args(doubles, device))
    assert result["failed"] is True
    assert "cannot prove the device is blank: blkid found nothing, but wipefs could not probe it" in result["msg"]
    assert ["--no-act", "--json", str(device)] in doubles.calls("wipefs")
    assert doubles.calls("mkfs.lustre") == []


def test_blkid_exit_2_with_an_error_is_not_blank(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    """blkid exits 2 when it cannot open the device, as when it finds nothing: that must not read as blank."""
    device = blank_device(tmp_path)
    doubles.set_state(quirks={"blkid_fail": {"rc": 2, "message": f"error: {device}: Permission denied"}})
    result = run_module("lustre_target", ost_args(doubles, device))
    assert result["failed"] is True
    assert f"refusing to format lab-OST0003 on {device}: cannot prove the device is blank" in result["msg"]
    assert "Permission denied" in result["msg"] and f"blkid -p {device}" in result["msg"]
    assert result["unknown"] == {str(device): f"blkid -p exited 2: blkid: error: {device}: Permission denied"}
    assert doubles.calls("mkfs.lustre") == []


@pytest.mark.parametrize("tool", ["tunefs_fail", "blkid_fail"])
def test_probe_errors_stop_the_run(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path, tool: str) -> None:
    device = blank_device(tmp_path)
    doubles.set_state(quirks={tool: {"rc": 13, "message": "Permission denied"}})
    result = run_module("lustre_target", ost_args(doubles, device))
    assert result["failed"] is True
    assert ("cannot tell what" if tool == "tunefs_fail" else "cannot prove the device is blank") in result["msg"]
    assert "Permission denied" in result["msg"]
    assert doubles.calls("mkfs.lustre") == []


# -- stored parameters ----------------------------------------------------------------


def test_drifted_servicenode_is_reported_not_rewritten(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    device = blank_device(tmp_path)
    run_module("lustre_target", ost_args(doubles, device))
    moved = [["10.0.0.11@o2ib0"], ["10.0.0.13@o2ib0"]]

    result = run_module("lustre_target", ost_args(doubles, device, servicenode=moved))
    assert result["changed"] is False
    assert result["drift"] == [
        {
            "field": "servicenode",
            "current": "10.0.0.11@o2ib:10.0.0.12@o2ib",
            "wanted": "10.0.0.11@o2ib0:10.0.0.13@o2ib0",
        }
    ]
    assert any("update_params" in warning for warning in result.get("warnings", []))
    assert all("--dryrun" in argv for argv in doubles.calls("tunefs.lustre"))


def test_update_params_rewrites_nids_and_keeps_other_params(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    device = blank_device(tmp_path)
    run_module("lustre_target", ost_args(doubles, device, mkfs_options=["--param=sys.timeout=40"]))
    moved = [["10.0.0.11@o2ib0"], ["10.0.0.13@o2ib0"]]
    args = ost_args(doubles, device, servicenode=moved, update_params=True)

    planned = run_module("lustre_target", args, check=True)
    assert planned["changed"] is True
    assert planned["operation"] == "update_params"
    assert all("--dryrun" in argv for argv in doubles.calls("tunefs.lustre"))

    result = run_module("lustre_target", args)
    assert result["changed"] is True
    writes = [argv for argv in doubles.calls("tunefs.lustre") if "--dryrun" not in argv]
    assert writes == [
        [
            "--erase-params",
            "--mgsnode=10.0.0.1@o2ib0,10.0.1.1@o2ib0",
            "--mgsnode=10.0.0.2@o2ib0,10.0.1.2@o2ib0",
            "--servicenode=10.0.0.11@o2ib0",
            "--servicenode=10.0.0.13@o2ib0",
            "--param=sys.timeout=40",
            str(device),
        ]
    ]
    assert "servicenode: 10.0.0.11@o2ib:10.0.0.12@o2ib" in result["diff"]["before"]
    assert "servicenode: 10.0.0.11@o2ib:10.0.0.13@o2ib" in result["diff"]["after"]
    settled = run_module("lustre_target", args)
    assert settled["changed"] is False
    assert settled["drift"] == []
    assert settled["target"]["params"]["sys.timeout"] == "40"


# -- ZFS ------------------------------------------------------------------------------


def zfs_args(doubles: Doubles, vdevs: list[str], **overrides: Any) -> dict[str, Any]:
    return ost_args(
        doubles,
        "lab-ost3/ost3",
        backend="zfs",
        vdevs=vdevs,
        zpool=doubles.tool("zpool"),
        zfs=doubles.tool("zfs"),
        **overrides,
    )


def test_zfs_pool_from_blank_vdevs(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    disks = [str(blank_device(tmp_path, "a.img")), str(blank_device(tmp_path, "b.img"))]
    result = run_module("lustre_target", zfs_args(doubles, ["mirror", *disks]))
    assert result["changed"] is True
    assert doubles.calls("mkfs.lustre")[0][-4:] == ["lab-ost3/ost3", "mirror", *disks]
    assert "--backfstype=zfs" in doubles.calls("mkfs.lustre")[0]
    assert run_module("lustre_target", zfs_args(doubles, ["mirror", *disks]))["changed"] is False


def test_zfs_vdev_with_content_and_missing_pool_are_refused(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    disk = str(blank_device(tmp_path, "a.img"))
    doubles.set_state(signatures={disk: {"TYPE": "zfs_member", "LABEL": "oldpool"}})
    refused = run_module("lustre_target", zfs_args(doubles, [disk]))
    assert f"{disk}: TYPE=zfs_member LABEL=oldpool" in refused["msg"]

    no_pool = run_module("lustre_target", zfs_args(doubles, []))
    assert "ZFS pool lab-ost3 for lab-OST0003 does not exist" in no_pool["msg"]
    assert doubles.calls("mkfs.lustre") == []


# -- DATA SAFETY with the real blkid ----------------------------------------------------------

REAL_BLKID = real_tool("blkid")
REAL_WIPEFS = real_tool("wipefs")
MKFS_EXT4 = real_tool("mkfs.ext4")
needs_util_linux = pytest.mark.skipif(
    not (REAL_BLKID and REAL_WIPEFS and MKFS_EXT4), reason="needs blkid, wipefs (util-linux) and mkfs.ext4"
)


def ext4_file(tmp_path: Path) -> Path:
    """A real 64 MiB ext4 filesystem labelled "data" in a regular file."""
    image = tmp_path / "data.img"
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True)
    subprocess.run([str(MKFS_EXT4), "-q", "-F", "-L", "data", str(image)], check=True, capture_output=True)
    return image


def real_probe(image: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REAL_BLKID), "-p", "-o", "export", str(image)], capture_output=True, text=True, check=False
    )


def safety_args(doubles: Doubles, image: Path, **overrides: Any) -> dict[str, Any]:
    return ost_args(doubles, image, **{"blkid": REAL_BLKID, "wipefs": REAL_WIPEFS, **overrides})


@needs_util_linux
def test_real_ext4_is_refused_with_a_message_that_says_what_and_how(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    image = ext4_file(tmp_path)
    result = run_module("lustre_target", safety_args(doubles, image))
    assert result["failed"] is True
    message = result["msg"]
    assert "lab-OST0003" in message
    assert str(image) in message
    assert "TYPE=ext4" in message
    assert "LABEL=data" in message
    assert 'add "lab-OST0003" to kiln_lustre_reformat' in message
    assert "destroys its data" in message
    assert doubles.calls("mkfs.lustre") == []
    assert "TYPE=ext4" in real_probe(image).stdout


@needs_util_linux
@pytest.mark.parametrize("allowed", [["lab-OST0004"], ["lab-ost0003"], ["lab-OST0003x", "OST0003"]])
def test_real_ext4_is_still_refused_when_only_other_names_are_allowed(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path, allowed: list[str]
) -> None:
    image = ext4_file(tmp_path)
    result = run_module("lustre_target", safety_args(doubles, image, reformat=allowed))
    assert result["failed"] is True
    assert "TYPE=ext4 LABEL=data" in result["msg"]
    assert doubles.calls("mkfs.lustre") == []
    assert "TYPE=ext4" in real_probe(image).stdout


@needs_util_linux
def test_real_ext4_check_mode_with_reformat_allowed_touches_nothing(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    image = ext4_file(tmp_path)
    result = run_module("lustre_target", safety_args(doubles, image, reformat=["lab-OST0003"]), check=True)
    assert result["changed"] is True
    assert result["operation"] == "reformat"
    assert [cmd[0] for cmd in result["commands"]] == [REAL_WIPEFS, doubles.tool("mkfs.lustre")]
    assert "--reformat" in result["commands"][1]
    assert doubles.calls("mkfs.lustre") == []
    assert "TYPE=ext4" in real_probe(image).stdout


@needs_util_linux
def test_real_ext4_is_wiped_and_formatted_when_its_exact_name_is_allowed(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    image = ext4_file(tmp_path)
    result = run_module("lustre_target", safety_args(doubles, image, reformat=["lab-OST0003"]))
    assert result["changed"] is True
    assert result["operation"] == "reformat"
    assert result["found"] == "TYPE=ext4 LABEL=data"
    assert "content: TYPE=ext4 LABEL=data" in result["diff"]["before"]
    mkfs_calls = doubles.calls("mkfs.lustre")
    assert len(mkfs_calls) == 1
    assert "--reformat" in mkfs_calls[0]
    assert mkfs_calls[0][-1] == str(image)
    assert real_probe(image).returncode == 2, "the real wipefs should have left no signature"


@needs_util_linux
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run blkid as another user")
def test_real_ext4_that_blkid_cannot_open_is_refused(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    """The real blkid, unable to reach a root-only ext4 image, exits 2 like "nothing found": still refused."""
    image = ext4_file(tmp_path)
    image.chmod(0o600)
    blkid = doubles.tool("blkid-unprivileged")
    probe = subprocess.run([blkid, "-p", "-o", "export", str(image)], capture_output=True, text=True, check=False)
    # blkid cannot stat() the root-only path, skips it silently and exits 2 with no output: "nothing found",
    # what the old code took for blank (misc-utils/blkid.c main()).
    assert probe.returncode == 2 and probe.stdout == ""
    result = run_module("lustre_target", safety_args(doubles, image, blkid=blkid))
    assert result["failed"] is True  # blkid's silent exit 2 is checked with wipefs, which sees the ext4
    assert f"refusing to format lab-OST0003 on {image}: the device already holds signatures ext4 at 0x438" in result[
        "msg"
    ]
    assert "LABEL=data" in result["msg"]
    assert doubles.calls("mkfs.lustre") == []
    assert "TYPE=ext4" in real_probe(image).stdout


# -- zfs pools with ashift, dRAID words -------------------------------------------------


def test_zfs_pool_with_ashift_is_created_before_mkfs(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    disks = [str(blank_device(tmp_path, f"{n}.img")) for n in "abcd"]
    vdevs = ["draid2:1d:4c:0s", *disks]
    args = zfs_args(doubles, vdevs, ashift=12)
    planned = run_module("lustre_target", args, check=True)
    assert planned["changed"] is True
    assert planned["commands"][0][1:] == [
        "create", "-o", "ashift=12", "-o", "multihost=on", "-o", "cachefile=none", "-O", "canmount=off",
        "lab-ost3", *vdevs,
    ]  # fmt: skip
    assert [c for c in doubles.calls("zpool") if c[0] == "create"] == []

    assert run_module("lustre_target", args)["changed"] is True
    assert doubles.state()["zpool_props"]["lab-ost3"]["ashift"] == "12"
    mkfs = doubles.calls("mkfs.lustre")[0]
    assert mkfs[-1] == "lab-ost3/ost3" and not set(disks) & set(mkfs)  # the pool exists: no vdevs
    assert run_module("lustre_target", args)["changed"] is False
    assert len([c for c in doubles.calls("zpool") if c[0] == "create"]) == 1


def test_bad_draid_word_and_ashift_are_refused_before_any_command(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    disks = [str(blank_device(tmp_path, f"{n}.img")) for n in "abc"]
    result = run_module("lustre_target", zfs_args(doubles, ["draid2:2d:4c:0s", *disks], ashift=17))
    assert result["failed"] is True
    assert "draid2:2d:4c:0s: names 4 children but 3 devices follow it" in result["msg"]
    assert "draid2:2d:4c:0s: 2 data + 2 parity do not fit 3 children less 0 spares" in result["msg"]
    assert "ashift 17" in result["msg"]
    ldiskfs = run_module("lustre_target", ost_args(doubles, blank_device(tmp_path), ashift=12))
    assert "ashift 12: only for backend zfs" in ldiskfs["msg"]
    assert doubles.calls("zpool") == [] and doubles.calls("mkfs.lustre") == []


# -- md arrays for ldiskfs RAID ----------------------------------------------------------


def md_args(doubles: Doubles, device: Path, members: list[str], **overrides: Any) -> dict[str, Any]:
    md = {"md_create": True, "md_level": "raid6", "md_members": members, "md_chunk_KiB": 128}
    return ost_args(doubles, device, mdadm=doubles.tool("mdadm"), **{**md, **overrides})


def test_md_array_created_from_blank_members_then_formatted(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    members = [str(blank_device(tmp_path, f"d{n}.img")) for n in range(4)]
    device = tmp_path / "md-lab-ost0003"
    args = md_args(doubles, device, members)

    planned = run_module("lustre_target", args, check=True)
    assert planned["changed"] is True and planned["operation"] == "create_md"
    assert doubles.calls("mdadm") == [] and not device.exists()

    assert run_module("lustre_target", args)["changed"] is True
    assert doubles.calls("mdadm") == [[
        "--create", str(device), "--run", "--metadata=1.2", "--homehost=<none>", f"--name={device.name}",
        "--level=raid6", "--raid-devices=4", "--chunk=128", *members,
    ]]  # fmt: skip
    assert doubles.calls("mkfs.lustre")[0][-1] == str(device)
    assert run_module("lustre_target", args)["changed"] is False
    assert len(doubles.calls("mdadm")) == 1


def test_md_member_with_content_is_refused_unless_named(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    members = [str(blank_device(tmp_path, f"d{n}.img")) for n in range(4)]
    doubles.set_state(signatures={members[2]: {"TYPE": "ext4", "LABEL": "home"}})
    device = tmp_path / "md-lab-ost0003"
    refused = run_module("lustre_target", md_args(doubles, device, members))
    assert refused["failed"] is True
    assert f"{members[2]}: TYPE=ext4 LABEL=home" in refused["msg"]
    assert doubles.calls("mdadm") == [] and wipes(doubles) == []

    allowed = run_module("lustre_target", md_args(doubles, device, members, reformat=["lab-OST0003"]))
    assert allowed["changed"] is True
    assert wipes(doubles) == [["-a", members[2]]]
    assert len(doubles.calls("mdadm")) == 1


def test_md_arguments_are_checked(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    members = [str(blank_device(tmp_path, f"d{n}.img")) for n in range(3)]
    result = run_module("lustre_target", md_args(doubles, tmp_path / "md0", members, md_chunk_KiB=96))
    assert result["failed"] is True
    assert "raid6 needs at least 4 member devices, got 3" in result["msg"]
    assert "md chunk 96 KiB" in result["msg"]
    assert doubles.calls("mdadm") == []
