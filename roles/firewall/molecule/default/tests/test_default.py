"""Testinfra checks for the firewall role: the rule set is loaded, an opened port is reachable from the peer
container, a port opened only to another network is not, and the unit restores the rules after a restart."""

from __future__ import annotations

import pytest
import testinfra

INSTANCE = "podman://firewall-instance"
PEER = "podman://firewall-peer"
TABLE = "kiln_firewall"


@pytest.fixture(scope="module")
def instance():
    return testinfra.get_host(INSTANCE)


@pytest.fixture(scope="module")
def peer():
    return testinfra.get_host(PEER)


@pytest.fixture(scope="module")
def listeners(instance):
    """Two TCP listeners on the filtered host: 8333 (opened to the peer) and 8888 (opened elsewhere only)."""
    for port in (8333, 8888):
        instance.run(f"systemctl stop kiln-fw-test-{port} 2>/dev/null; "
                     f"systemd-run --unit kiln-fw-test-{port} python3 -m http.server {port}")
    instance.run("for i in $(seq 1 50); do ss -ltn | grep -q ':8888 ' && ss -ltn | grep -q ':8333 ' && exit 0; "
                 "sleep 0.2; done")
    yield instance.check_output("ip -4 -o route get 1.1.1.1").split(" src ", 1)[1].split()[0]
    for port in (8333, 8888):
        instance.run(f"systemctl stop kiln-fw-test-{port}")


def _connect(peer, addr: str, port: int) -> str:
    script = (f"import socket\ns = socket.socket()\ns.settimeout(3)\n"
              f"try:\n    s.connect(('{addr}', {port})); print('open')\n"
              f"except socket.timeout:\n    print('dropped')\nexcept OSError as e:\n    print('refused', e)")
    return peer.check_output(f"python3 -c \"{script}\"")


def test_unit_enabled_and_active(instance):
    svc = instance.service("kiln-firewall")
    assert svc.is_enabled and svc.is_running


def test_rule_set_is_loaded_with_a_drop_policy(instance):
    out = instance.check_output(f"nft list table inet {TABLE}")
    assert "policy drop;" in out
    assert "tcp dport 8333 accept" in out
    assert "ip saddr 192.0.2.0/24 tcp dport { 8888, 18888 } accept" in out


def test_planned_port_is_reachable_and_others_are_dropped(peer, listeners):
    addr = listeners
    assert _connect(peer, addr, 8333) == "open"
    assert _connect(peer, addr, 8888) == "dropped"  # opened only to 192.0.2.0/24


def test_rules_survive_a_restart_of_the_unit(instance, peer, listeners):
    instance.check_output("systemctl restart kiln-firewall")
    assert _connect(peer, listeners, 8888) == "dropped"
    instance.check_output(f"nft delete table inet {TABLE}")  # behind the role's back
    assert _connect(peer, listeners, 8888) == "open"  # the test itself can fail: the filter was doing it
    instance.check_output("systemctl restart kiln-firewall")
    assert _connect(peer, listeners, 8888) == "dropped"
