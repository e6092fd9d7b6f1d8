"""Testinfra checks for role common: the converged container's real state against the contract."""

import json
import pathlib

import pytest
import yaml

VARS = yaml.safe_load((pathlib.Path(__file__).parent.parent / "vars" / "inventory-lab.yml").read_text())
SYSCTLS = VARS["common_sysctls"]
STATE_FILE = "/etc/kiln/host-settings.json"
NA = "not applicable on this host"


@pytest.fixture(scope="module")
def state(host):
    return json.loads(host.file(STATE_FILE).content_string)


def test_systemd_is_running(host):
    # The base image boots to `running`; a role that breaks a unit shows here.
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


@pytest.mark.parametrize("pkg", ["chrony", "numactl", "hwloc-nox", "ethtool", "pciutils"])
def test_base_packages_installed(host, pkg):
    assert host.package(pkg).is_installed


def test_one_time_daemon(host):
    assert not host.package("systemd-timesyncd").is_installed
    assert host.service("chrony").is_enabled


def test_chrony_not_started_in_a_container(host, state):
    # The clock is not namespaced: a container must leave it to the host.
    assert not host.service("chrony").is_running
    assert state["time_sync"]["applied"] is False
    assert "container" in state["time_sync"]["not_applicable"]


def test_sysctl_file_has_every_setting_with_its_reason(host):
    f = host.file("/etc/sysctl.d/90-kiln.conf")
    assert f.is_file and f.user == "root" and f.mode == 0o644
    text = f.content_string
    assert text.splitlines()[0].startswith("# Managed by kiln")
    settings = {}
    comments = " ".join(line[2:] for line in text.splitlines() if line.startswith("# "))
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    assert settings == {s["name"]: str(s["value"]) for s in SYSCTLS}
    for s in SYSCTLS:
        assert " ".join(s["reason"].split()) in " ".join(comments.split()), s["name"]


@pytest.mark.parametrize("sysctl", [s for s in SYSCTLS if s["namespaced"]], ids=lambda s: s["name"])
def test_namespaced_sysctl_applied_where_writable(host, state, sysctl):
    path = "/proc/sys/" + sysctl["name"].replace(".", "/")
    rec = next(r for r in state["sysctls"] if r["name"] == sysctl["name"])
    if host.run(f"test -w {path}").rc == 0:
        # Read back from the container's own network namespace.
        assert host.file(path).content_string.split() == str(sysctl["value"]).split()
        assert rec["applied"] is True and rec["not_applicable"] == ""
    else:
        # podman's default: /proc/sys is read-only, so nothing was applied and the record says why.
        assert rec["applied"] is False
        assert "/proc/sys is read-only in this container" in rec["not_applicable"]


@pytest.mark.parametrize("sysctl", [s for s in SYSCTLS if not s["namespaced"]], ids=lambda s: s["name"])
def test_host_only_sysctl_not_applied_in_a_container(host, state, sysctl):
    rec = next(r for r in state["sysctls"] if r["name"] == sysctl["name"])
    assert rec["applied"] is False
    assert "is not namespaced" in rec["not_applicable"]


def test_memlock_for_login_sessions(host):
    f = host.file("/etc/security/limits.d/90-kiln-memlock.conf")
    lines = [line.split() for line in f.content_string.splitlines() if line and not line.startswith("#")]
    value = str(VARS["common_memlock"])
    assert sorted(lines) == sorted(
        [[who, kind, "memlock", value] for who in ("*", "root") for kind in ("soft", "hard")]
    )


def test_memlock_for_services(host, state):
    want = "infinity" if VARS["common_memlock"] == "unlimited" else f"{int(VARS['common_memlock']) * 1024}"
    assert host.check_output("systemctl show --property DefaultLimitMEMLOCK --value") == want
    # What a service started now really gets. The container runtime's hard limit caps it here
    # (podman cannot raise memlock on this machine), and then the role must say so.
    got = host.check_output("systemd-run --quiet --wait --pipe --collect /bin/sh -c 'ulimit -l'").strip()
    assert state["memlock"]["effective_for_services"] == got
    if got == str(VARS["common_memlock"]):
        assert state["memlock"]["applied"] is True
    else:
        assert state["memlock"]["applied"] is False
        assert f"caps locked memory at {got} KiB" in state["memlock"]["not_applicable"]


def test_cpu_governor_unit(host, state):
    unit = host.file("/etc/systemd/system/kiln-cpu-governor.service")
    assert f"echo {VARS['common_cpu_governor']} >" in unit.content_string
    assert host.service("kiln-cpu-governor").is_enabled
    # No cpufreq in a container: the unit is skipped by its conditions and reported as not applicable.
    assert not host.file("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").exists
    assert not host.service("kiln-cpu-governor").is_running
    assert state["cpu_governor"]["applied"] is False
    assert "no cpufreq interface" in state["cpu_governor"]["not_applicable"]


def test_thp_unit(host, state):
    unit = host.file("/etc/systemd/system/kiln-transparent-hugepages.service")
    assert f"echo {VARS['common_transparent_hugepages']} > /sys/kernel/mm/transparent_hugepage/enabled" in (
        unit.content_string
    )
    assert host.service("kiln-transparent-hugepages").is_enabled
    assert not host.service("kiln-transparent-hugepages").is_running
    kernel = host.file("/sys/kernel/mm/transparent_hugepage/enabled").content_string
    assert f"[{state['transparent_hugepages']['kernel_policy']}]" in kernel
    assert state["transparent_hugepages"]["applied"] is False
    assert "kernel-wide" in state["transparent_hugepages"]["not_applicable"]


def test_the_deployed_plan_record_is_the_inventory_s(host):
    record = yaml.safe_load((pathlib.Path(__file__).parent.parent / "vars" / "record-lab.yml").read_text())
    f = host.file("/etc/kiln/deployed-plan.json")
    assert f.user == "root" and f.mode == 0o644  # root_only is false: it names no credential
    assert json.loads(f.content_string) == record["common_molecule_record"]
