"""Testinfra checks for the role; `host` is the converged container."""


def test_systemd_is_running(host):
    # The base image boots to `running`; a role that breaks a unit shows here.
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


def test_page_installed(host):
    page = host.file("/srv/kiln-smoke/index.html")
    assert page.is_file
    assert page.mode == 0o644
    assert page.content_string == "kiln smoke test\n"


def test_unit_enabled_and_running(host):
    svc = host.service("kiln-smoke")
    assert svc.is_enabled
    assert svc.is_running


def test_serves_page(host):
    assert host.socket("tcp://127.0.0.1:18931").is_listening
    fetch = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:18931/').read().decode(), end='')"
    assert host.check_output(f'python3 -c "{fetch}"') == "kiln smoke test"
