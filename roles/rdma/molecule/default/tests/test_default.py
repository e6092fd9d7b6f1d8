"""Testinfra checks for role rdma in configuration-only mode (no RDMA hardware in these containers)."""

import pathlib
import shlex

import pytest
import yaml

VARS_DIR = pathlib.Path(__file__).parent.parent / "vars"


@pytest.fixture(scope="module")
def contract(host):
    name = host.check_output("hostname")
    return yaml.safe_load((VARS_DIR / f"{name}.yml").read_text())


def test_systemd_is_running(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


def test_no_rdma_devices_here(host):
    # The whole scenario relies on this: nothing fakes /sys/class/infiniband.
    assert not host.file("/sys/class/infiniband").exists


@pytest.mark.parametrize(
    "pkg", ["rdma-core", "ibverbs-providers", "ibverbs-utils", "rdmacm-utils", "infiniband-diags", "perftest"]
)
def test_packages(host, pkg):
    assert host.package(pkg).is_installed


def test_tools_run(host):
    # The verbs library loads and answers; with no RDMA kernel support it says so (ENOSYS) and
    # lists no device.
    out = host.run("ibv_devices")
    assert out.rc == 0 or "Function not implemented" in out.stderr, out.stderr
    assert "mlx5" not in out.stdout
    assert host.exists("ib_write_bw") and host.exists("ibstat") and host.exists("rping")


def test_modules_load_file(host, contract):
    f = host.file("/etc/modules-load.d/kiln-rdma.conf")
    assert f.is_file and f.mode == 0o644
    mods = [line for line in f.content_string.splitlines() if line and not line.startswith("#")]
    base = ["mlx5_ib", "ib_umad", "ib_uverbs", "rdma_ucm"]
    assert mods == (base + ["ib_ipoib"] if contract["rdma_fabric"] == "infiniband" else base)


def test_ipoib_rails(host, contract):
    rails = contract.get("rdma_ipoib_interfaces", [])
    files = host.run("ls /etc/systemd/network/").stdout.split()
    assert sorted(f for f in files if f.startswith("60-kiln-ipoib-")) == sorted(
        f"60-kiln-ipoib-{r['name']}.network" for r in rails
    )
    for i, rail in enumerate(rails):
        text = host.file(f"/etc/systemd/network/60-kiln-ipoib-{rail['name']}.network").content_string
        assert text.startswith("# Managed by kiln")
        assert f"[Match]\nName={rail['name']}\n" in text
        assert f"MTUBytes={rail['mtu']}\n" in text
        assert f"Address={rail['address']}\n" in text
        ip = rail["address"].split("/")[0]
        if len(rails) > 1:  # multi-rail on one subnet: per-rail table and source rule
            table = 200 + i
            assert f"From={ip}/32\nTable={table}\n" in text
            assert f"PreferredSource={ip}\nTable={table}\n" in text
            # dev plan: 10.21.0.x/24 rails
            assert "Destination=10.21.0.0/24\n" in text
    if rails:
        assert host.service("systemd-networkd").is_enabled
        # networkd needs CAP_NET_ADMIN: skipped in a container, so the rails stay unconfigured here.
        assert not host.service("systemd-networkd").is_running


def test_roce_addresses(host, contract):
    # RoCE: every storage NIC and compute rail gets its planned IPv4 address (RoCEv2 GID, LNet o2ib NIDs).
    ifaces = contract.get("rdma_roce_interfaces", [])
    files = host.run("ls /etc/systemd/network/").stdout.split()
    assert sorted(f for f in files if f.startswith("61-kiln-roce-")) == sorted(
        f"61-kiln-roce-{i['name']}.network" for i in ifaces
    )
    for i, iface in enumerate(ifaces):
        text = host.file(f"/etc/systemd/network/61-kiln-roce-{iface['name']}.network").content_string
        assert f"[Match]\nName={iface['name']}\n" in text and f"Address={iface['address']}\n" in text
        ip = iface["address"].split("/")[0]
        assert f"From={ip}/32\nTable={240 + i}\n" in text
    if contract["rdma_fabric"] == "roce":
        assert ifaces, "the RoCE contract must carry addresses"


def test_roce_unit(host, contract):
    unit = host.file("/etc/systemd/system/kiln-roce-qos.service")
    script = host.file("/usr/local/sbin/kiln-roce-qos")
    if contract["rdma_fabric"] != "roce":
        assert not unit.exists and not script.exists
        return
    assert script.mode == 0o755
    text = script.content_string
    # One shell word per device, each quoted as Jinja's quote filter (shlex.quote) writes it.
    devices = " ".join(shlex.quote(d["device"]) for d in contract["rdma_expected_devices"])
    assert f"set -- {devices}\n" in text
    assert "PRIO=3\n" in text and "DSCP=26\n" in text and "TOS=106\n" in text
    assert 'dcb pfc set dev "$nd" prio-pfc all:off "$PRIO":on' in text
    assert host.run("sh -n /usr/local/sbin/kiln-roce-qos").rc == 0
    assert host.service("kiln-roce-qos").is_enabled
    # Conditions skip it in a container: enabled, never run, never failed.
    assert not host.service("kiln-roce-qos").is_running
    assert host.run("systemctl is-failed kiln-roce-qos").stdout.strip() != "failed"
