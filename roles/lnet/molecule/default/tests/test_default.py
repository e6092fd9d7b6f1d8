"""Testinfra checks for the lnet role; `host` is the converged container (no Lustre kernel)."""

import yaml


def test_systemd_is_running(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


def test_lnet_conf_is_multi_rail_import_yaml(host):
    conf = host.file("/etc/lnet.conf")
    assert conf.is_file and conf.mode == 0o644
    assert conf.content_string.startswith("# Managed by kiln (role lnet)")
    data = yaml.safe_load(conf.content_string)
    nets = {n["net type"]: n for n in data["net"]}
    assert [ni["interfaces"][0] for ni in nets["o2ib0"]["local NI(s)"]] == ["ib0", "ib1"]
    assert [ni["interfaces"][0] for ni in nets["tcp0"]["local NI(s)"]] == ["eth0"]
    assert data["global"]["discovery"] == 1
    assert data["route"] == [
        {"net": "o2ib1", "gateway": "10.0.0.11@tcp0"},
        {"net": "o2ib1", "gateway": "10.0.0.12@tcp0"},
    ]
    assert data["routing"] == {"enable": 1}
    # lnetctl imports in document order: the local networks must come before the routes that use them.
    text = conf.content_string
    assert text.index("\nnet:") < text.index("\nroute:") < text.index("\nrouting:")


def test_modprobe_options_with_reasons(host):
    text = host.file("/etc/modprobe.d/kiln-lnet.conf").content_string
    assert "options ko2iblnd concurrent_sends=64 credits=1024 peer_credits=32" in text
    assert "options ksocklnd credits=256" in text
    assert "[lnet.ksocklnd.credits]" in text
    assert "# ko2iblnd peer_credits=32: kiln plan tunable lnet.ko2iblnd.peer_credits" in text
    # modprobe itself accepts the file (parses every options line)
    out = host.run("modprobe --showconfig")
    assert "options ko2iblnd concurrent_sends=64 credits=1024 peer_credits=32" in out.stdout


def test_unit_enabled_and_skipped_without_module(host):
    unit = host.file("/etc/systemd/system/kiln-lnet.service")
    assert "ExecCondition=/sbin/modprobe --dry-run --quiet lnet" in unit.content_string
    assert "ExecStart=/usr/sbin/lnetctl import /etc/lnet.conf" in unit.content_string
    assert host.service("kiln-lnet.service").is_enabled
    # Starting it is harmless: the condition skips it instead of failing the unit.
    start = host.run("systemctl start kiln-lnet.service")
    assert start.rc == 0, start.stderr
    assert host.run("systemctl is-failed kiln-lnet.service").stdout.strip() != "failed"
    result = host.run("systemctl show -p Result --value kiln-lnet.service").stdout.strip()
    assert result in ("success", "exec-condition"), result
    assert not host.service("kiln-lnet.service").is_running


def test_systemd_accepts_the_unit(host):
    out = host.run("systemd-analyze verify /etc/systemd/system/kiln-lnet.service")
    # lnetctl is absent here (no Lustre packages); anything else is a unit error.
    problems = [line for line in out.stderr.splitlines() if line.strip() and "lnetctl" not in line]
    assert not problems, out.stderr
