"""Testinfra checks for the monitoring role; `host` is the converged container (a monitoring host)."""

import json


def _get(host, url):
    cmd = f"python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen(\"{url}\", timeout=5).read().decode())'"
    res = host.run(cmd)
    assert res.rc == 0, res.stderr
    return res.stdout


def test_systemd_is_running(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


def test_services_run(host):
    for unit in ("prometheus-node-exporter", "prometheus", "prometheus-alertmanager", "kiln-lustre-exporter",
                 "kiln-health.timer"):
        assert host.service(unit).is_running, unit
        assert host.service(unit).is_enabled, unit


def test_node_exporter_serves_the_planned_sysctls(host):
    text = _get(host, "http://127.0.0.1:9100/metrics")
    assert "node_sysctl_net_core_rmem_max " in text
    assert "node_sysctl_net_ipv4_tcp_rmem_max " in text


def test_prometheus_loaded_kiln_rules_and_retention(host):
    rules = json.loads(_get(host, "http://127.0.0.1:9090/api/v1/rules"))
    names = {r["name"] for g in rules["data"]["groups"] for r in g["rules"]}
    assert {"ExporterDown", "SysctlDrift", "LustreTargetNotOnPlannedServer"} <= names
    flags = json.loads(_get(host, "http://127.0.0.1:9090/api/v1/status/flags"))["data"]
    assert flags["storage.tsdb.retention.time"] == "2d"


def test_prometheus_scrapes_the_planned_targets(host):
    targets = json.loads(_get(host, "http://127.0.0.1:9090/api/v1/targets"))["data"]["activeTargets"]
    jobs = {t["labels"]["job"] for t in targets}
    assert {"node", "lustre", "dcgm", "seaweedfs-volume"} <= jobs


def test_alertmanager_is_ready(host):
    assert _get(host, "http://127.0.0.1:9093/-/ready").strip().startswith("OK")


def test_lustre_exporter_says_not_applicable_without_lustre(host):
    text = _get(host, "http://127.0.0.1:9169/metrics")
    assert "lustre_exporter_applicable{" in text and "} 0.0" in text


def test_kiln_health_reports_every_check(host):
    res = host.run("kiln-health --json")
    rows = {r["check"]: r for r in json.loads(res.stdout)}
    assert set(rows) == {"health.gpu", "health.xid", "health.rdma", "health.lustre", "health.lnet", "health.clock",
                         "health.nvme"}
    assert rows["health.lustre"]["status"] == "not_applicable"
    assert rows["health.lustre"]["detail"].startswith("lab stand-in")
    assert rows["health.gpu"]["status"] == "not_applicable" and rows["health.gpu"]["detail"]
    written = json.loads(host.file("/etc/kiln/health.json").content_string)
    assert written["host"] == "monitoring-instance" and written["stand_in"] is True
