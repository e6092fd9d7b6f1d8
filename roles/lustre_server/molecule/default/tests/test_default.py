"""Testinfra checks for lustre_server; `host` is the converged container.

The Lustre tools here are TEST DOUBLES (prepare.yml) that log every call to
/var/lib/kiln-test-doubles/calls.jsonl and keep their world in state.json; blkid is real.
These checks prove the role's wiring and its data-safety path, never Lustre behaviour.
"""

import json

import pytest

UNIT_DIR = "/etc/systemd/system"
MGS_UNIT = "mnt-lustre\\x2dtargets-MGS.mount"
MDT_UNIT = "mnt-lustre\\x2dtargets-lab\\x2dMDT0000.mount"
OST0_UNIT = "mnt-lustre\\x2dtargets-lab\\x2dOST0000.mount"
OST1_UNIT = "mnt-lustre\\x2dtargets-lab\\x2dOST0001.mount"
DEVICES = {
    "MGS": "/var/lib/kiln-test-devices/mgt0.img",
    "lab-MDT0000": "/var/lib/kiln-test-devices/mdt0.img",
    "lab-OST0000": "/var/lib/kiln-test-devices/ost0.img",
    "lab-OST0001": "/var/lib/kiln-test-devices/ost1.img",
}


def calls(host, prog):
    lines = host.file("/var/lib/kiln-test-doubles/calls.jsonl").content_string.splitlines()
    return [c["argv"] for c in map(json.loads, lines) if c["prog"] == prog]


def state(host):
    return json.loads(host.file("/var/lib/kiln-test-doubles/state.json").content_string)


def unit(host, name):
    return host.file(f"{UNIT_DIR}/{name}").content_string


def test_systemd_is_running(host):
    state_ = host.run("systemctl is-system-running").stdout.strip()
    assert state_ == "running", host.run("systemctl --failed --no-legend").stdout


def test_each_target_formatted_exactly_once(host):
    # converge + idempotence ran: a second mkfs.lustre on any device would show here
    mkfs = calls(host, "mkfs.lustre")
    assert sorted(argv[-1] for argv in mkfs) == sorted(DEVICES.values())
    assert not any("--reformat" in argv for argv in mkfs)


def test_mkfs_arguments_come_from_the_plan(host):
    by_device = {argv[-1]: argv for argv in calls(host, "mkfs.lustre")}
    assert by_device[DEVICES["MGS"]][:2] == ["--mgs", "--servicenode=10.89.20.4@tcp0"]
    ost0 = by_device[DEVICES["lab-OST0000"]]
    for word in ("--fsname=lab", "--ost", "--index=0", "--mgsnode=10.89.20.4@tcp0",
                 "--servicenode=10.89.20.4@tcp0", "--servicenode=10.89.20.5@tcp0", "--backfstype=ldiskfs"):
        assert word in ost0


def test_targets_are_recorded_on_their_devices(host):
    targets = state(host)["targets"]
    assert set(targets) == set(DEVICES.values())
    assert targets[DEVICES["lab-OST0001"]]["index"] == 1
    # and tunefs.lustre --dryrun (what the module reads) shows them
    out = host.check_output("tunefs.lustre --dryrun %s", DEVICES["lab-OST0001"])
    assert "Index:      1" in out and "Lustre FS:  lab" in out


@pytest.mark.parametrize("name,what,where", [
    (MGS_UNIT, DEVICES["MGS"], "/mnt/lustre-targets/MGS"),
    (MDT_UNIT, DEVICES["lab-MDT0000"], "/mnt/lustre-targets/lab-MDT0000"),
    (OST0_UNIT, DEVICES["lab-OST0000"], "/mnt/lustre-targets/lab-OST0000"),
    (OST1_UNIT, DEVICES["lab-OST0001"], "/mnt/lustre-targets/lab-OST0001"),
])
def test_mount_units(host, name, what, where):
    text = unit(host, name)
    assert text.startswith("# Managed by kiln (role lustre_server)")
    assert f"What={what}\n" in text and f"Where={where}\n" in text and "Type=lustre\n" in text
    assert "After=kiln-lnet.service" in text
    assert host.file(where).is_directory


def test_mount_order_mgs_then_mdt_then_ost(host):
    assert "Requires=" not in unit(host, MGS_UNIT)
    mdt = unit(host, MDT_UNIT)
    assert f"Requires={MGS_UNIT}" in mdt and f"After={MGS_UNIT}" in mdt
    for ost in (OST0_UNIT, OST1_UNIT):
        text = unit(host, ost)
        assert f"After={MGS_UNIT}" in text and f"After={MDT_UNIT}" in text
        assert f"Requires={MDT_UNIT}" in text
    # systemd itself resolves the same ordering
    deps = host.check_output("systemctl list-dependencies --after --plain --no-legend %s", OST0_UNIT)
    assert MGS_UNIT in deps and MDT_UNIT in deps


def test_units_pass_systemd_analyze(host):
    out = host.run(f"cd {UNIT_DIR} && systemd-analyze verify mnt-lustre*.mount kiln-lustre-server.target")
    assert out.rc == 0, out.stderr


def test_not_started_without_lustre_kernel_modules(host):
    # no osd_ldiskfs here: the role reports "not applicable" and leaves the target disabled
    assert not host.service("kiln-lustre-server.target").is_enabled
    assert calls(host, "mount.lustre") == []


def test_module_options_file(host):
    text = host.file("/etc/modprobe.d/kiln-lustre-server.conf").content_string
    assert "options mdt max_mod_rpcs_per_client=50\n" in text
    assert "options mdt max_mod_rpcs_per_client=50" in host.check_output("modprobe --showconfig")


def test_persistent_params_stored_once_on_the_mgs(host):
    sets = [argv for argv in calls(host, "lctl") if argv[:2] == ["set_param", "-P"]]
    assert [argv[2] for argv in sets] == [
        "obdfilter.*.brw_size=16",
        "osd-ldiskfs.*OST*.read_cache_enable=1",
        "osd-ldiskfs.*OST*.writethrough_cache_enable=0",
        "osd-ldiskfs.*OST*.readcache_max_filesize=32M",
    ]
    log = host.check_output("lctl --device MGS llog_print params")
    assert "parameter: obdfilter.*.brw_size, value: 16" in log


def test_params_record_keeps_the_tunable_ids(host):
    text = host.file("/etc/kiln/lustre-server-params.yml").content_string
    assert "id: server.obdfilter.brw_size" in text and "plan_digest: '0000000000000000'" in text


STANDBY_UNIT = "mnt-lustre\\x2dtargets-lab\\x2dOST0002.mount"


def test_standby_target_has_a_unit_that_nothing_starts(host):
    text = unit(host, STANDBY_UNIT)
    assert "What=/dev/disk/by-id/kiln-ost0002\n" in text and "Standby unit: lab-OST0002 belongs to oss02" in text
    assert "Requires=" not in text and "Before=kiln-lustre-server.target" not in text
    assert STANDBY_UNIT not in unit(host, "kiln-lustre-server.target")
    assert not host.service(STANDBY_UNIT).is_running
    # never formatted here: the primary server formats it
    assert not any(argv[-1] == "/dev/disk/by-id/kiln-ost0002" for argv in calls(host, "mkfs.lustre"))
