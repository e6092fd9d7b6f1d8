"""Failover of a resource between the two nodes of a pair: real Corosync, Pacemaker and pcs, the real
ocf:heartbeat:Dummy agent (standing in for ocf:lustre:Lustre, which needs a Lustre server) and the lab's
healthLNET stand-in (a TEST DOUBLE of Lustre's agent, kiln/lab/doubles/healthLNET)."""

import time

import pytest

TIMEOUT_S = 90


@pytest.fixture(scope="module")
def ha1():
    import testinfra

    return testinfra.get_host("podman://lustre_ha-a")


@pytest.fixture(scope="module")
def ha2():
    import testinfra

    return testinfra.get_host("podman://lustre_ha-b")


def locate(host, resource):
    out = host.run(f"crm_resource --locate --resource {resource}")
    return out.stdout.strip()


def wait_running_on(host, resource, node):
    deadline = time.monotonic() + TIMEOUT_S
    seen = ""
    while time.monotonic() < deadline:
        seen = locate(host, resource)
        if seen.endswith(f"is running on: {node}"):
            return seen
        time.sleep(2)
    raise AssertionError(f"{resource} not running on {node} within {TIMEOUT_S} s; last: {seen!r}")


def test_pair_is_online(ha1):
    out = ha1.check_output("crm_mon -1 --output-as=xml")
    assert out.count('online="true"') == 2


def test_stonith_disabled_only_because_lab(ha1):
    assert ha1.check_output("crm_attribute --type crm_config --name stonith-enabled --query --quiet") == "false"


def test_resources_start_on_preferred_nodes(ha1):
    wait_running_on(ha1, "lab-OST0000", "lustre_ha-a")
    wait_running_on(ha1, "lab-MDT0000", "lustre_ha-b")


def test_pcsd_is_off(ha1):
    for unit in ("pcsd", "pcsd-ruby"):  # masked before pcs was installed: the package's install never started it
        service = ha1.service(unit)
        assert service.is_masked and not service.is_running, unit


def test_lnet_check_runs_on_each_node_and_sets_its_attribute(ha1):
    deadline = time.monotonic() + TIMEOUT_S
    seen = {}
    while time.monotonic() < deadline:
        seen = {n: ha1.run(f"attrd_updater --query --name lnet_eth0 --node {n}").stdout for n in ("lustre_ha-a", "lustre_ha-b")}
        if all('value="1"' in v for v in seen.values()):
            break
        time.sleep(2)
    assert all('value="1"' in v for v in seen.values()), seen
    assert locate(ha1, "lnet-lustre_ha-a-eth0").endswith("is running on: lustre_ha-a")


def test_targets_are_banned_where_lnet_is_bad(ha1):
    cfg = ha1.check_output("cibadmin --query --scope constraints")
    assert 'id="lab-OST0000-lnet"' in cfg and 'score="-INFINITY"' in cfg
    assert 'attribute="#uname" value="lustre_ha-a"' in cfg and 'attribute="#uname" value="lustre_ha-b"' in cfg
    assert 'operation="lt" attribute="lnet_eth0" type="integer" value="1"' in cfg


def test_no_fence_device_without_fencing(ha1):
    # none-lab: no fence devices at all (the lab stack's pair has real ones, see kiln verify's ha.fencing)
    assert "stonith" not in ha1.check_output("cibadmin --query --scope resources")


def test_ordering_mdt_before_ost(ha1):
    cfg = ha1.check_output("cibadmin --query --scope constraints")
    assert 'first="lab-MDT0000"' in cfg and 'then="lab-OST0000"' in cfg


def test_standby_moves_resource_to_partner(ha1, ha2):
    wait_running_on(ha1, "lab-OST0000", "lustre_ha-a")
    ha1.check_output("crm_attribute --node lustre_ha-a --name standby --update on --lifetime forever")
    try:
        start = time.monotonic()
        wait_running_on(ha2, "lab-OST0000", "lustre_ha-b")
        print(f"lab-OST0000 moved ha1 -> ha2 in {time.monotonic() - start:.1f} s")
        # The Dummy agent's state file exists only where the resource runs.
        assert ha2.file("/run/kiln-lab-OST0000.state").exists
        assert not ha1.file("/run/kiln-lab-OST0000.state").exists
    finally:
        ha1.check_output("crm_attribute --node lustre_ha-a --name standby --update off --lifetime forever")
