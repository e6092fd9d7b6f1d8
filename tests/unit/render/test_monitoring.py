"""Rendered monitoring files: Prometheus config, alert rules and their promtool unit tests, Alertmanager
config and Grafana dashboards. The promtool/amtool tests skip (with the reason) where the Debian packages
prometheus / prometheus-alertmanager are not installed (scripts/host-prereqs.sh installs them)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kiln.cli.common import load, write_files
from kiln.plan import build_plan
from kiln.render.monitoring import _go_float, expand, render_monitoring
from kiln.spec.models import ClusterSpec

STACKS = ("lab", "dev", "prod-h100")
PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool absent (Debian package prometheus)")
needs_amtool = pytest.mark.skipif(AMTOOL is None, reason="amtool absent (Debian package prometheus-alertmanager)")


def _render(stack: str, out: Path) -> dict[str, str]:
    _, plan = load(stack)
    files = render_monitoring(plan)
    write_files(out, files)
    return files


def _tool(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@needs_promtool
@pytest.mark.parametrize("stack", STACKS)
def test_promtool_accepts_config_and_every_rule_passes_its_test(stack: str, tmp_path: Path) -> None:
    _render(stack, tmp_path)
    prom = tmp_path / "prometheus"
    res = _tool(str(PROMTOOL), "check", "config", "prometheus.yml", cwd=prom)
    assert res.returncode == 0, res.stdout + res.stderr
    res = _tool(str(PROMTOOL), "check", "rules", "rules/kiln.rules.yml", cwd=prom)
    assert res.returncode == 0, res.stdout + res.stderr
    res = _tool(str(PROMTOOL), "test", "rules", "rules/kiln.rules.test.yml", cwd=prom)
    assert res.returncode == 0, res.stdout + res.stderr


@needs_promtool
def test_every_alert_has_a_test_and_the_tests_catch_a_wrong_threshold(tmp_path: Path) -> None:
    files = _render("lab", tmp_path)
    rules = yaml.safe_load(files["prometheus/rules/kiln.rules.yml"])
    tests = yaml.safe_load(files["prometheus/rules/kiln.rules.test.yml"])
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    tested = {c["alertname"] for t in tests["tests"] for c in t["alert_rule_test"]}
    assert names == tested
    # flip the sysctl drift comparison: the unit test must now fail
    path = tmp_path / "prometheus" / "rules" / "kiln.rules.yml"
    path.write_text(path.read_text().replace("node_sysctl_net_core_rmem_max != ", "node_sysctl_net_core_rmem_max == "))
    res = _tool(str(PROMTOOL), "test", "rules", "rules/kiln.rules.test.yml", cwd=tmp_path / "prometheus")
    assert res.returncode != 0 and "SysctlDrift" in res.stdout + res.stderr


@needs_promtool
def test_fault_alerts_fire_within_two_scrape_intervals(tmp_path: Path) -> None:
    """The lab's for: 0 makes fire_bound_s two scrape intervals; promtool holds each fault's alert to it, and a
    rule that fires later than the bound (a for: of two scrape intervals) fails its bound test. promtool scrapes
    and evaluates in step, so its alert fires one interval inside the bound: the worst-case phase is the rest."""
    files = _render("lab", tmp_path)
    tests = yaml.safe_load(files["prometheus/rules/kiln.rules.test.yml"])
    onsets = [t["alert_rule_test"] for t in tests["tests"] if len(t["alert_rule_test"]) == 2
              and not t["alert_rule_test"][0]["exp_alerts"] and t["alert_rule_test"][1]["exp_alerts"]]
    bound = {c["alertname"]: c["eval_time"] for evals in onsets for c in evals[1:]}
    assert bound == {"ObjectStoreVolumeServerDown": "20s", "HostFilesystemFilling": "20s", "SysctlDrift": "20s",
                     "ExporterDown": "20s", "DataMoverFailing": "20s"}  # the fault at t0 = 10 s, + 2 × 5 s
    path = tmp_path / "prometheus" / "rules" / "kiln.rules.yml"
    rules = yaml.safe_load(path.read_text())
    for g in rules["groups"]:
        for r in g["rules"]:
            if r.get("alert") == "ExporterDown":
                r["for"] = "10s"
    path.write_text(yaml.safe_dump(rules))
    res = _tool(str(PROMTOOL), "test", "rules", "rules/kiln.rules.test.yml", cwd=tmp_path / "prometheus")
    assert res.returncode != 0 and "ExporterDown" in res.stdout + res.stderr


@needs_promtool
@pytest.mark.parametrize("stack", STACKS)
def test_every_dashboard_query_is_valid_promql(stack: str, tmp_path: Path) -> None:
    files = _render(stack, tmp_path)
    exprs = [
        t["expr"]
        for name, text in files.items() if name.startswith("grafana/")
        for p in json.loads(text)["panels"] for t in p["targets"]
    ]
    assert exprs
    doc = {"groups": [{"name": "panels", "rules": [{"record": f"kiln:panel_{i}", "expr": e}
                                                   for i, e in enumerate(exprs)]}]}
    (tmp_path / "panels.yml").write_text(yaml.safe_dump(doc))
    res = _tool(str(PROMTOOL), "check", "rules", "panels.yml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


@needs_amtool
@pytest.mark.parametrize("receivers", [[], [{"name": "ops", "webhook_url": "https://alerts.example.com/hook",
                                            "severities": ["critical"]}]])
def test_amtool_accepts_alertmanager_config(receivers: list[dict[str, object]], tmp_path: Path) -> None:
    spec, _ = load("lab")
    data = spec.model_dump(mode="json")
    data["monitoring"]["receivers"] = receivers
    files = render_monitoring(build_plan(ClusterSpec.model_validate(data)))
    write_files(tmp_path, files)
    res = _tool(str(AMTOOL), "check-config", "alertmanager/alertmanager.yml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = yaml.safe_load(files["alertmanager/alertmanager.yml"])
    assert [r["name"] for r in doc["receivers"]] == ["kiln-none"] + [r["name"] for r in receivers]  # type: ignore[misc]


def test_prometheus_scrapes_every_planned_target() -> None:
    _, plan = load("lab")
    cfg = yaml.safe_load(render_monitoring(plan)["prometheus/prometheus.yml"])
    got = {(j["job_name"], sc["labels"]["host"], sc["targets"][0]) for j in cfg["scrape_configs"]
           for sc in j["static_configs"]}
    assert got == {(t.job, t.host, t.address) for t in plan.monitoring.scrape_targets}
    assert cfg["global"]["scrape_interval"] == "5s"
    assert cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["10.89.10.9:9093"]


def test_overview_dashboard_draws_the_plans_demand_line() -> None:
    _, plan = load("lab")
    doc = json.loads(render_monitoring(plan)["grafana/dashboards/overview.json"])
    exprs = [t["expr"] for t in doc["panels"][0]["targets"]]
    assert f"vector({plan.sizing.demand_read_GBps * 1e9:.0f})" in exprs


def test_template_expansion_matches_go_formatting() -> None:
    assert _go_float(2.5e10) == "2.5e+10" and _go_float(79.0) == "79" and _go_float(0.95) == "0.95"
    assert expand("{{ $labels.target }} at {{ $value | humanizePercentage }}", {"target": "x"}, 0.95) == "x at 95%"
