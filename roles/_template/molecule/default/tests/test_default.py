"""Testinfra checks for the role; `host` is the converged container."""


def test_systemd_is_running(host):
    # The base image boots to `running`; a role that breaks a unit shows here.
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout
