"""Testinfra checks for lustre_client; `host` is the converged container.

lctl/mount.lustre here are TEST DOUBLES (prepare.yml) whose world says a client of `lab` is
mounted; they log calls to /var/lib/kiln-test-doubles/calls.jsonl. Nothing is really mounted.
"""

import json

MOUNT_UNIT = "/etc/systemd/system/lustre.mount"
SOURCE = "10.89.20.4@tcp0,10.89.21.4@tcp0:10.89.20.8@tcp0,10.89.21.8@tcp0:/lab"
PARAMS_FILE = "/etc/kiln/lustre-client-params.conf"


def calls(host, prog):
    lines = host.file("/var/lib/kiln-test-doubles/calls.jsonl").content_string.splitlines()
    return [c["argv"] for c in map(json.loads, lines) if c["prog"] == prog]


def params(host):
    return json.loads(host.file("/var/lib/kiln-test-doubles/state.json").content_string)["params"]


def test_systemd_is_running(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


def test_mount_unit(host):
    text = host.file(MOUNT_UNIT).content_string
    assert text.startswith("# Managed by kiln (role lustre_client)")
    assert f"What={SOURCE}\n" in text
    assert "Where=/lustre\nType=lustre\nOptions=defaults,_netdev,flock,user_xattr,noatime\n" in text
    assert "After=kiln-lnet.service network-online.target" in text
    assert host.file("/lustre").is_directory
    out = host.run("systemd-analyze verify %s", MOUNT_UNIT)
    assert out.rc == 0, out.stderr


def test_not_mounted_or_enabled_without_lustre_module(host):
    assert not host.service("lustre.mount").is_enabled
    assert not host.service("kiln-lustre-client-tune.service").is_enabled
    assert not host.mount_point("/lustre").exists
    assert calls(host, "mount.lustre") == []


def test_params_file_keeps_ids_and_values(host):
    text = host.file(PARAMS_FILE).content_string
    assert "# client.osc.max_pages_per_rpc\nosc.*.max_pages_per_rpc=16M\n" in text
    assert "mdc.*.max_mod_rpcs_in_flight=50\n" in text
    assert sum(1 for line in text.splitlines() if line and not line.startswith("#")) == 9  # the plan leaves max_dirty_mb to the kernel


def test_tune_unit_runs_after_the_mount(host):
    text = host.file("/etc/systemd/system/kiln-lustre-client-tune.service").content_string
    assert "RequiresMountsFor=/lustre\n" in text
    assert f"ExecStart=/usr/local/sbin/kiln-lustre-client-tune {PARAMS_FILE}\n" in text


def test_tunables_applied_once_by_lustre_param(host):
    sets = [argv for argv in calls(host, "lctl") if argv[0] == "set_param"]
    # each drifted parameter was set exactly once over converge + idempotence; checksums
    # (already 1) and osc max_rpcs_in_flight (already 8) were left alone
    names = sorted(argv[1].split("=")[0] for argv in sets)
    assert names == sorted([
        "osc.*.max_pages_per_rpc", "llite.*.max_read_ahead_mb",
        "llite.*.max_read_ahead_per_file_mb", "llite.*.statahead_max", "mdc.*.max_rpcs_in_flight",
        "mdc.*.max_mod_rpcs_in_flight", "ldlm.namespaces.*.lru_max_age",
    ])
    p = params(host)
    assert p["osc.lab-OST0001-osc-ffff9a2b.max_pages_per_rpc"] == "4096"  # 16M in 4 KiB pages
    assert p["mdc.lab-MDT0000-mdc-ffff9a2b.max_mod_rpcs_in_flight"] == "50"
    assert p["ldlm.namespaces.lab-OST0000-osc-ffff9a2b.lru_max_age"] == "600000"


def test_boot_script_applies_the_file(host):
    out = host.run("/usr/local/sbin/kiln-lustre-client-tune %s", PARAMS_FILE)
    assert out.rc == 0, out.stderr
    assert "set osc.*.max_pages_per_rpc=16M" in out.stdout
    host.run("printf 'osc.*.no_such_param=1\\n' > /tmp/bad.conf")
    bad = host.run("/usr/local/sbin/kiln-lustre-client-tune /tmp/bad.conf")
    assert bad.rc == 1 and "FAILED: lctl set_param osc.*.no_such_param=1" in bad.stderr
