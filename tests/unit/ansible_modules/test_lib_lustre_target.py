"""kiln.lustre.lustre_target (and lustre_common): tunefs.lustre/blkid parsing, NIDs, mkfs/tunefs commands."""

from __future__ import annotations

import pytest
from kiln_ansible_support import FIXTURES, load_fixture

from kiln.lustre import lustre_common as common
from kiln.lustre import lustre_target as kl


def ost_spec(**overrides: object) -> kl.TargetSpec:
    values: dict[str, object] = {
        "name": "lab-OST0003",
        "kind": "ost",
        "fsname": "lab",
        "index": 3,
        "device": "/dev/sdb",
        "mgsnode": [["10.0.0.1@o2ib0", "10.0.1.1@o2ib0"], ["10.0.0.2@o2ib0", "10.0.1.2@o2ib0"]],
        "servicenode": [["10.0.0.11@o2ib0"], ["10.0.0.12@o2ib0"]],
    }
    values.update(overrides)
    return kl.TargetSpec(**values)  # type: ignore[arg-type]


# -- tunefs.lustre --dryrun ----------------------------------------------------


def test_parses_registered_ost_with_servicenode_and_two_mgs_nodes() -> None:
    target = kl.parse_tunefs_dryrun(load_fixture("tunefs_ldiskfs_ost_servicenode.txt"))
    assert target is not None
    assert target.name == "lab-OST0003"
    assert (target.index, target.fsname, target.mount_type) == (3, "lab", "ldiskfs")
    assert target.kinds == ["ost"]
    assert target.no_primnode
    assert target.flag_words == ["OST", "no_primnode"]
    assert target.mgsnode == [["10.0.0.1@o2ib", "10.0.1.1@o2ib"], ["10.0.0.2@o2ib", "10.0.1.2@o2ib"]]
    assert target.servicenode == [["10.0.0.11@o2ib"], ["10.0.0.12@o2ib"]]
    assert target.params["sys.timeout"] == "40"
    assert target.mount_opts == "errors=remount-ro"


def test_repeated_failover_keys_from_old_failnode_read_as_node_list() -> None:
    target = kl.parse_tunefs_dryrun(load_fixture("tunefs_ldiskfs_mdt_mgs_failnode.txt"))
    assert target is not None
    assert target.kinds == ["mgt", "mdt"]
    assert target.servicenode == [["192.168.10.2@tcp"], ["192.168.10.3@tcp"]]
    assert not target.no_primnode
    assert target.params["mdt.identity_upcall"] == "/usr/sbin/l_getidentity"


def test_real_never_registered_ost_name_with_colon_is_normalised() -> None:
    """Real mkfs.lustre 2.15.4 output of a new ldiskfs OST: the one print_ldd() block tunefs.lustre --dryrun --quiet
    prints for a target never mounted (svname with ':', first_time)."""
    text = load_fixture("mkfs_ldiskfs_ost_2_15_4.txt")
    target = kl.parse_tunefs_dryrun(text)
    assert target is not None
    assert "Target:     DIAS:OST0001" in text
    assert (target.name, target.index, target.fsname, target.mount_type) == ("DIAS-OST0001", 1, "DIAS", "ldiskfs")
    assert target.flags == 0x62 and target.flag_words == ["OST", "first_time", "update"]
    assert target.kinds == ["ost"] and not target.no_primnode
    assert target.mount_opts == ",errors=remount-ro"  # as 2.15.4 prints it for an OST
    assert target.mgsnode == [["192.168.14.121@tcp"]] and target.servicenode == []
    assert set(target.params) == {"mgsnode"}  # no line after the block (mkfs_cmd with "-L DIAS:OST0001") leaks in


def test_never_registered_hex_target_name_and_decimal_index() -> None:
    """server_make_name() prints the index in hex in the name (%04x), print_ldd() in decimal ("Index:      %d"):
    index 10 made from the real 2.15.4 block (no published run of an OST with an index above 9 was found)."""
    text = load_fixture("mkfs_ldiskfs_ost_2_15_4.txt").replace("DIAS:OST0001", "DIAS:OST000a")
    target = kl.parse_tunefs_dryrun(text.replace("Index:      1\n", "Index:      10\n"))
    assert target is not None
    assert (target.name, target.index) == ("DIAS-OST000a", 10)


def test_real_print_ldd_block_of_a_zfs_mdt_with_servicenodes() -> None:
    """Real mkfs.lustre 2.15.5 output: its print_ldd() block is the one tunefs.lustre --dryrun prints."""
    target = kl.parse_tunefs_dryrun(load_fixture("mkfs_zfs_mdt_servicenode.txt"))
    assert target is not None
    assert (target.name, target.index, target.fsname, target.mount_type) == ("demo-MDT0002", 2, "demo", "zfs")
    assert target.flags == 0x1061
    assert target.flag_words == ["MDT", "first_time", "update", "no_primnode"]
    assert target.kinds == ["mdt"] and target.no_primnode
    assert target.mount_opts == ""
    assert target.mgsnode == [["192.168.234.10@tcp"], ["192.168.234.11@tcp"]]
    assert target.servicenode == [["192.168.234.10@tcp"], ["192.168.234.11@tcp"]]
    assert set(target.params) == {"mgsnode", "failover.node"}


def test_real_mgs_has_no_index_and_no_fsname() -> None:
    """Real mkfs.lustre 2.15.4 output of a standalone MGT: "Index:      unassigned" and an empty "Lustre FS:  "."""
    target = kl.parse_tunefs_dryrun(load_fixture("mkfs_ldiskfs_mgs_2_15_4.txt"))
    assert target is not None
    assert (target.name, target.index, target.fsname, target.mount_type) == ("MGS", None, "", "ldiskfs")
    assert target.kinds == ["mgt"]
    assert target.flags == 0x64 and target.flag_words == ["MGS", "first_time", "update"]
    assert target.mount_opts == "user_xattr,errors=remount-ro"
    assert target.params == {} and target.mgsnode == [] and target.servicenode == []


def test_zfs_target() -> None:
    target = kl.parse_tunefs_dryrun(load_fixture("tunefs_zfs_ost.txt"))
    assert target is not None
    assert (target.name, target.mount_type, target.mount_opts) == ("lab-OST0001", "zfs", "")


def test_not_formatted_output_is_no_target_and_is_recognised() -> None:
    text = load_fixture("tunefs_not_formatted.txt")
    assert kl.parse_tunefs_dryrun(text) is None
    assert kl.tunefs_says_not_lustre(19, "")
    assert kl.tunefs_says_not_lustre(1, text)
    assert not kl.tunefs_says_not_lustre(13, "Permission denied")


@pytest.mark.parametrize(
    ("svname", "expected"),
    [
        ("lab:OST0003", "lab-OST0003"),
        ("lab=MDT0000", "lab-MDT0000"),
        ("lab+OST00ff", "lab-OST00ff"),
        ("my-fs-OST0001", "my-fs-OST0001"),
        ("MGS", "MGS"),
    ],
)
def test_normalize_target_name(svname: str, expected: str) -> None:
    assert kl.normalize_target_name(svname) == expected


def test_target_name_uses_hex_index() -> None:
    assert kl.target_name("ost", "lab", 10) == "lab-OST000a"
    assert kl.target_name("mdt", "lab", 0) == "lab-MDT0000"
    assert kl.target_name("mgt", "", None) == "MGS"


# -- blkid -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "signature"),
    [
        ("blkid_ext4.txt", "TYPE=ext4 LABEL=data"),
        ("blkid_xfs.txt", "TYPE=xfs LABEL=scratch"),
        ("blkid_gpt_disk.txt", "PTTYPE=gpt"),
        ("blkid_escaped_label.txt", "TYPE=xfs LABEL=old data"),
        ("blkid_blank_partition.txt", None),
        ("blkid_nothing_found.txt", None),
    ],
)
def test_blkid_signature(fixture: str, signature: str | None) -> None:
    assert kl.blkid_signature(kl.parse_blkid_export(load_fixture(fixture))) == signature


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("blkid_ext4", (kl.CONTENT, "TYPE=ext4 LABEL=data")),
        ("blkid_escaped_label", (kl.CONTENT, "TYPE=xfs LABEL=old data")),
        ("blkid_gpt_disk", (kl.CONTENT, "PTTYPE=gpt")),
        ("blkid_blank_partition", (kl.CONFIRM, "")),
        ("blkid_nothing_found", (kl.CONFIRM, "")),
    ],
)
def test_blank_verdict_on_real_blkid_runs(name: str, verdict: tuple[str, str]) -> None:
    """The whole recorded run (exit status, stdout, stderr of regen-blkid.sh) decides, as in the module."""
    rc = int((FIXTURES / f"{name}.rc").read_text(encoding="utf-8"))
    err = (FIXTURES / f"{name}.stderr").read_text(encoding="utf-8")
    assert kl.blank_verdict((rc, load_fixture(f"{name}.txt"), err), None) == verdict


def test_blkid_nothing_found_output_is_empty() -> None:
    assert kl.blkid_signature(kl.parse_blkid_export("")) is None


# -- NIDs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nid", "expected"),
    [
        ("10.0.0.1@o2ib0", "10.0.0.1@o2ib"),
        ("10.0.0.1@o2ib", "10.0.0.1@o2ib"),
        ("10.0.0.1@o2ib1", "10.0.0.1@o2ib1"),
        ("10.0.0.1@tcp0", "10.0.0.1@tcp"),
        ("10.0.0.1@tcp10", "10.0.0.1@tcp10"),
        (" 10.0.0.1@kfi ", "10.0.0.1@kfi"),
    ],
)
def test_normalize_nid(nid: str, expected: str) -> None:
    assert common.normalize_nid(nid) == expected


def test_nid_groups_round_trip_and_compare_ignoring_order_and_net_zero() -> None:
    groups = common.parse_nid_groups("a@o2ib,b@o2ib:c@o2ib")
    assert groups == [["a@o2ib", "b@o2ib"], ["c@o2ib"]]
    assert common.format_nid_groups(groups) == "a@o2ib,b@o2ib:c@o2ib"
    assert common.nid_groups_key([["c@o2ib0"], ["b@o2ib", "a@o2ib0"]]) == common.nid_groups_key(groups)
    assert common.nid_groups_key([["a@o2ib"], ["b@o2ib", "c@o2ib"]]) != common.nid_groups_key(groups)


def test_coerce_nid_groups_accepts_lists_and_comma_strings() -> None:
    assert common.coerce_nid_groups([["a@tcp", "b@tcp"], "c@tcp, d@tcp"]) == [["a@tcp", "b@tcp"], ["c@tcp", "d@tcp"]]
    with pytest.raises(ValueError):
        common.coerce_nid_groups([[]])
    with pytest.raises(ValueError):
        common.coerce_nid_groups("a@tcp")


# -- spec validation -----------------------------------------------------------


def test_valid_spec_has_no_errors() -> None:
    assert kl.validate_target_spec(ost_spec()) == []


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"name": "lab-OST0004"}, "which make 'lab-OST0003'"),
        ({"name": "lab-OST0010", "index": 10}, "which make 'lab-OST000a'"),
        ({"fsname": "waytoolongname"}, "1-8 characters"),
        ({"index": None}, "needs an index"),
        ({"mgsnode": []}, "needs mgsnode"),
        ({"mgsnode": [["10.0.0.1"]]}, "not a NID"),
        ({"backend": "zfs"}, "pool/dataset"),
        ({"backend": "zfs", "device": "p/ost3", "vdevs": ["mirror", "sdb", "/dev/sdc"]}, "absolute device paths"),
        ({"vdevs": ["/dev/sdc"]}, "only for backend zfs"),
        ({"with_mgs": True}, "with_mgs is only for an MDT"),
    ],
)
def test_invalid_specs_are_explained(overrides: dict[str, object], fragment: str) -> None:
    errors = kl.validate_target_spec(ost_spec(**overrides))
    assert any(fragment in error for error in errors), errors


def test_mgt_takes_no_mgsnode_and_combined_mdt_needs_none() -> None:
    mgt = ost_spec(name="MGS", kind="mgt", fsname="", index=None, servicenode=[])
    assert any("takes no mgsnode" in e for e in kl.validate_target_spec(mgt))
    mgt.mgsnode = []
    assert kl.validate_target_spec(mgt) == []
    combined = ost_spec(name="lab-MDT0000", kind="mdt", index=0, with_mgs=True, mgsnode=[])
    assert kl.validate_target_spec(combined) == []


# -- command builders -----------------------------------------------------------


def test_mkfs_command_for_ost_with_failover() -> None:
    assert kl.build_mkfs_command("mkfs.lustre", ost_spec(), reformat=False) == [
        "mkfs.lustre",
        "--fsname=lab",
        "--ost",
        "--index=3",
        "--mgsnode=10.0.0.1@o2ib0,10.0.1.1@o2ib0",
        "--mgsnode=10.0.0.2@o2ib0,10.0.1.2@o2ib0",
        "--servicenode=10.0.0.11@o2ib0",
        "--servicenode=10.0.0.12@o2ib0",
        "--backfstype=ldiskfs",
        "/dev/sdb",
    ]


def test_mkfs_command_reformat_flag_only_when_asked() -> None:
    assert "--reformat" in kl.build_mkfs_command("mkfs.lustre", ost_spec(), reformat=True)
    assert "--reformat" not in kl.build_mkfs_command("mkfs.lustre", ost_spec(), reformat=False)


def test_mkfs_command_for_mgs_mdt_and_zfs_with_options() -> None:
    mgs = ost_spec(name="MGS", kind="mgt", fsname="", index=None, mgsnode=[], servicenode=[["10.0.0.1@o2ib"]])
    assert kl.build_mkfs_command("m", mgs, False) == [
        "m",
        "--mgs",
        "--servicenode=10.0.0.1@o2ib",
        "--backfstype=ldiskfs",
        "/dev/sdb",
    ]
    mdt = ost_spec(
        name="lab-MDT0000",
        kind="mdt",
        index=0,
        with_mgs=True,
        mgsnode=[],
        servicenode=[],
        backend="zfs",
        device="lab-mdt0/mdt0",
        vdevs=["mirror", "/dev/sdb", "/dev/sdc"],
        mkfs_options=["--param=sys.timeout=40"],
    )
    assert kl.build_mkfs_command("m", mdt, False) == [
        "m",
        "--fsname=lab",
        "--mgs",
        "--mdt",
        "--index=0",
        "--backfstype=zfs",
        "--param=sys.timeout=40",
        "lab-mdt0/mdt0",
        "mirror",
        "/dev/sdb",
        "/dev/sdc",
    ]


def test_tunefs_update_erases_then_rewrites_nids_and_keeps_other_params() -> None:
    current = kl.parse_tunefs_dryrun(load_fixture("tunefs_ldiskfs_ost_servicenode.txt"))
    assert current is not None
    spec = ost_spec(servicenode=[["10.0.0.11@o2ib0"], ["10.0.0.13@o2ib0"]])
    assert kl.build_tunefs_update_command("tunefs.lustre", spec, current) == [
        "tunefs.lustre",
        "--erase-params",
        "--mgsnode=10.0.0.1@o2ib0,10.0.1.1@o2ib0",
        "--mgsnode=10.0.0.2@o2ib0,10.0.1.2@o2ib0",
        "--servicenode=10.0.0.11@o2ib0",
        "--servicenode=10.0.0.13@o2ib0",
        "--param=sys.timeout=40",
        "/dev/sdb",
    ]


# -- identity and drift -------------------------------------------------------------


def test_wanted_target_matches_despite_o2ib0_spelling() -> None:
    current = kl.parse_tunefs_dryrun(load_fixture("tunefs_ldiskfs_ost_servicenode.txt"))
    assert current is not None
    assert kl.target_identity_mismatch(current, ost_spec()) == []
    assert kl.target_param_drift(current, ost_spec()) == []


def test_other_target_is_a_mismatch() -> None:
    current = kl.parse_tunefs_dryrun(load_fixture("tunefs_ldiskfs_ost_servicenode.txt"))
    assert current is not None
    spec = ost_spec(name="lab-OST0004", index=4)
    reasons = kl.target_identity_mismatch(current, spec)
    assert "target name lab-OST0003 (wanted lab-OST0004)" in reasons
    assert "index 3 (wanted 4)" in reasons
    zfs = ost_spec(backend="zfs", device="pool/ost3")
    assert "backend ldiskfs (wanted zfs)" in kl.target_identity_mismatch(current, zfs)


def test_drift_reports_changed_failover_partner() -> None:
    current = kl.parse_tunefs_dryrun(load_fixture("tunefs_ldiskfs_ost_servicenode.txt"))
    assert current is not None
    drift = kl.target_param_drift(current, ost_spec(servicenode=[["10.0.0.11@o2ib"], ["10.0.0.99@o2ib"]]))
    assert drift == [
        {
            "field": "servicenode",
            "current": "10.0.0.11@o2ib:10.0.0.12@o2ib",
            "wanted": "10.0.0.11@o2ib:10.0.0.99@o2ib",
        }
    ]


def test_failnode_style_target_drifts_on_no_primnode_when_servicenode_wanted() -> None:
    current = kl.parse_tunefs_dryrun(load_fixture("tunefs_ldiskfs_mdt_mgs_failnode.txt"))
    assert current is not None
    spec = ost_spec(
        name="lab-MDT0000",
        kind="mdt",
        index=0,
        with_mgs=True,
        mgsnode=[],
        servicenode=[["192.168.10.2@tcp0"], ["192.168.10.3@tcp0"]],
    )
    assert kl.target_identity_mismatch(current, spec) == []
    assert kl.target_param_drift(current, spec) == [{"field": "no_primnode", "current": False, "wanted": True}]


def test_refusal_message_names_target_device_content_and_fix() -> None:
    message = kl.refusal_message(ost_spec(), "TYPE=ext4 LABEL=data")
    assert "lab-OST0003" in message
    assert "/dev/sdb" in message
    assert "TYPE=ext4 LABEL=data" in message
    assert 'add "lab-OST0003" to kiln_lustre_reformat' in message
    assert "destroys its data" in message


def test_zfs_vdev_paths_drop_layout_words() -> None:
    assert kl.zfs_vdev_paths(["mirror", "/dev/sdb", "/dev/sdc", "log", "/dev/nvme0n1"]) == [
        "/dev/sdb",
        "/dev/sdc",
        "/dev/nvme0n1",
    ]


# -- blank proof and device kinds: nothing unreadable passes for blank ---------------------

WIPEFS_EMPTY = (0, '{\n   "signatures": [\n\n   ]\n}\n', "")
WIPEFS_EXT4 = (0, '{"signatures": [{"device": "d", "offset": "0x438", "type": "ext4", "label": "data"}]}', "")


def test_blkid_nothing_found_needs_wipefs_to_confirm() -> None:
    assert kl.blank_verdict((2, "", ""), None) == (kl.CONFIRM, "")
    assert kl.blank_verdict((2, "", ""), WIPEFS_EMPTY) == (kl.BLANK, "")
    assert kl.blank_verdict((2, "", ""), WIPEFS_EXT4) == (kl.CONTENT, "signatures ext4 at 0x438 (LABEL=data) (wipefs)")
    verdict, why = kl.blank_verdict((2, "", ""), (1, "", "wipefs: error: /dev/x: probing initialization failed"))
    assert verdict == kl.UNKNOWN and "probing initialization failed" in why


def test_blkid_errors_are_unknown_not_blank() -> None:
    """blkid exits 2 after a failed open() too; its stderr then says so (lowprobe_device())."""
    verdict, why = kl.blank_verdict((2, "", "blkid: error: /dev/sdx: Permission denied\n"), WIPEFS_EMPTY)
    assert verdict == kl.UNKNOWN and why == "blkid -p exited 2: blkid: error: /dev/sdx: Permission denied"
    assert kl.blank_verdict((4, "", "usage"), WIPEFS_EMPTY)[0] == kl.UNKNOWN
    assert kl.blank_verdict((8, "", "ambivalent"), None)[0] == kl.CONTENT
    assert kl.blank_verdict((0, "DEVNAME=/dev/x\nTYPE=xfs\n", ""), None) == (kl.CONTENT, "TYPE=xfs")
    assert kl.blank_verdict((2, "", ""), (0, "not json", ""))[0] == kl.UNKNOWN


def test_blank_partition_entry_still_needs_wipefs() -> None:
    assert kl.blank_verdict((0, "PART_ENTRY_SCHEME=gpt\nPART_ENTRY_NUMBER=1\n", ""), None) == (kl.CONFIRM, "")


@pytest.mark.parametrize(
    "kind,allow,expected",
    [
        ("block", False, None),
        ("file", True, None),
        ("file", False, "it is a regular file, not a block device"),
        ("missing", True, "does not exist"),
        ("a character device", True, "it is a character device, not a block device"),
    ],
)
def test_device_type_problem(kind: str, allow: bool, expected: str | None) -> None:
    problem = kl.device_type_problem("lab-OST0003", "/dev/x", kind, allow)
    assert problem is None if expected is None else expected in (problem or "")


# mkfs.lustre's own limits (parse_opts in mkfs_lustre.c, append_param/add_param in mount_utils.c,
# ldiskfs_make_lustre in libmount_utils_ldiskfs.c)


def test_mkfs_limits_are_the_registrys() -> None:
    from kiln.knowledge import lustre_params
    from kiln.spec.protection import LDISKFS_BLOCK_BYTES

    limits = {name: limit.value for name, limit in lustre_params.load().mkfs_limits.items()}
    assert limits["index_max"] == kl.MKFS_INDEX_MAX == 0xFFFF - 1
    assert limits["mkfsoptions_length_max"] == kl.MKFS_OPTIONS_MAX
    assert limits["nid_param_value_max"] == kl.MKFS_NID_VALUE_MAX
    assert limits["params_length_max"] == kl.MKFS_PARAMS_MAX
    assert limits["ldiskfs_block_bytes"] == LDISKFS_BLOCK_BYTES


def test_index_range_is_mkfs_lustres() -> None:
    assert kl.validate_target_spec(ost_spec(index=65534, name="lab-OSTfffe")) == []
    assert "between 0 and 65534" in kl.validate_target_spec(ost_spec(index=65535, name="lab-OSTffff"))[0]


def test_mkfsoptions_raid_geometry_and_repeats() -> None:
    assert kl.mkfs_option_problems(["--mkfsoptions=-E stride=32,stripe_width=128"]) == []
    assert kl.mkfs_option_problems(["--mkfsoptions=-E stride=32,stripe_width=100"]) == [
        "-E stripe_width=100 is not a multiple of stride=32 (data drives × stride)"
    ]
    assert kl.mkfs_option_problems(["--mkfsoptions=-E stride=0"]) == [
        "-E stride=0: mke2fs takes a positive block count"
    ]
    two = kl.mkfs_option_problems(["--mkfsoptions=-E stride=32 -E stripe_width=64", "--mkfsoptions=-O ^64bit"])
    assert any("more than one --mkfsoptions" in p for p in two)
    assert any("more than one -E" in p for p in two)
    assert "mkfs.lustre keeps 511" in kl.mkfs_option_problems(["--mkfsoptions=" + "x" * 512])[0]
    # zfs hands --mkfsoptions to zfs create: no ext4 -E rules
    assert kl.mkfs_option_problems(["--mkfsoptions=-o recordsize=1M"], backend="zfs") == []
    spec = ost_spec(mkfs_options=["--mkfsoptions=-E stride=32,stripe_width=100"])
    assert any("not a multiple of stride" in p for p in kl.validate_target_spec(spec))


def test_nid_parameters_fit_the_stored_parameters() -> None:
    nids = [f"10.0.{i // 250}.{i % 250}@o2ib{i % 4}" for i in range(80)]
    assert kl.mkfs_param_problems([nids[:2]], [nids[:8], nids[8:16]]) == []
    problems = kl.mkfs_param_problems([nids[:2]], [nids[:40], nids[40:]])
    assert problems and problems[0].startswith("failover.node= would be ")


# zpool create with pool properties, dRAID words (OpenZFS draid_config_by_type), md arrays (mdadm --create)


def test_draid_words_are_vdev_keywords_and_checked() -> None:
    disks = [f"/dev/disk/by-id/d{n}" for n in range(8)]
    assert kl.zfs_vdev_paths(["draid2:6d:8c:0s", *disks]) == disks
    assert kl.is_vdev_keyword("draid") and kl.is_vdev_keyword("draid3:4d:8c:1s") and not kl.is_vdev_keyword(disks[0])
    assert kl.draid_problems(["draid2:6d:8c:0s", *disks]) == []
    assert kl.draid_problems(["draid", *disks]) == []  # parity 1, data min(8 - 0 - 1, 8) = 7
    assert kl.draid_problems(["draid4:4d:8c:0s", *disks]) == ["draid4:4d:8c:0s: dRAID parity must be 1..3"]
    assert kl.draid_problems(["draid2:6d:8c:1s", *disks]) == [
        "draid2:6d:8c:1s: 6 data + 2 parity do not fit 8 children less 1 spares"
    ]
    assert kl.draid_problems(["draid1:2d:4c:0s", *disks[:4], "draid1:2d:4c:0s", *disks[4:7]]) == [
        "draid1:2d:4c:0s: names 4 children but 3 devices follow it"
    ]
    spec = ost_spec(backend="zfs", device="lab-ost3/ost3", vdevs=["draid2:6d:8c:0s", *disks])
    assert kl.validate_target_spec(spec) == []


def test_zpool_create_carries_the_pool_properties() -> None:
    spec = ost_spec(backend="zfs", device="lab-ost3/ost3", vdevs=["mirror", "/dev/a", "/dev/b"])
    assert kl.build_zpool_create_command("zpool", spec, 12) == [
        "zpool", "create", "-o", "ashift=12", "-o", "multihost=on", "-o", "cachefile=none", "-O", "canmount=off",
        "lab-ost3", "mirror", "/dev/a", "/dev/b",
    ]  # fmt: skip


def test_md_create_arguments() -> None:
    members = ["/dev/a", "/dev/b", "/dev/c", "/dev/d"]
    assert kl.md_problems("raid6", members, 128) == []
    assert kl.md_problems("raid10", members[:3], 64) == []  # md raid10 takes an odd count too
    assert kl.md_problems("raid5", members[:2], 0) == ["raid5 needs at least 3 member devices, got 2"]
    assert kl.md_problems("raid0", members, 0) == ["md_level must be one of raid1, raid5, raid6, raid10, not 'raid0'"]
    assert "absolute device paths: sdb" in kl.md_problems("raid1", ["/dev/a", "sdb"], 0)[0]
    assert kl.md_problems("raid1", ["/dev/a", "/dev/a"], 0) == ["md members are listed more than once"]
    assert kl.build_mdadm_create_command("mdadm", "/dev/md/lab-ost0003", "raid6", members, 128) == [
        "mdadm", "--create", "/dev/md/lab-ost0003", "--run", "--metadata=1.2", "--homehost=<none>",
        "--name=lab-ost0003", "--level=raid6", "--raid-devices=4", "--chunk=128", *members,
    ]  # fmt: skip
    assert "--chunk=128" not in kl.build_mdadm_create_command("mdadm", "/dev/md0", "raid1", members[:2], 128)
