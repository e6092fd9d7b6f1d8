"""The Kubernetes monitoring component: kube-prometheus-stack values, the plan's rules, ServiceMonitors, dashboards."""

from __future__ import annotations

import json

from kiln.plan import build_plan
from kiln.render.manifests import MONITORING, build_manifests
from kiln.render.monitoring import dashboards, rules_file
from kiln.spec import load_stack


def _objects(stack: str) -> tuple[object, list[dict]]:  # type: ignore[type-arg]
    spec = load_stack(stack)
    plan = build_plan(spec, stack)
    comp = next(c for c in build_manifests(plan, spec) if c.kind == MONITORING)
    return plan, list(comp.objects)


def test_chart_values_follow_the_plan() -> None:
    plan, objs = _objects("lab")
    (release,) = [o for o in objs if o["kind"] == "HelmRelease"]
    assert release["spec"]["chart"]["spec"]["chart"] == "kube-prometheus-stack"
    assert release["spec"]["chart"]["spec"]["version"] == "65.8.1"
    spec = release["spec"]["values"]["prometheus"]["prometheusSpec"]
    assert spec["scrapeInterval"] == "5s" and spec["retention"] == "2d"
    assert spec["ruleSelectorNilUsesHelmValues"] is False
    args = release["spec"]["values"]["prometheus-node-exporter"]["extraArgs"]
    planned = [a for a in plan.monitoring.node_exporter_args  # type: ignore[attr-defined]
               if not a.startswith("--collector.filesystem.")]
    assert args[2:] == planned and "--collector.sysctl" in planned
    assert len([a for a in args if a.startswith("--collector.filesystem.mount-points-exclude")]) == 1


def test_rules_dashboards_and_service_monitors() -> None:
    plan, objs = _objects("lab")
    (rule,) = [o for o in objs if o["kind"] == "PrometheusRule"]
    assert rule["spec"] == rules_file(plan.monitoring)  # type: ignore[attr-defined]
    monitors = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ServiceMonitor"}
    assert set(monitors) == {"seaweedfs-master", "seaweedfs-volume", "seaweedfs-filer", "seaweedfs-s3"}
    ep = monitors["seaweedfs-volume"]["spec"]["endpoints"][0]
    assert ep["port"] == "metrics" and ep["interval"] == "5s"
    assert ep["relabelings"][0]["targetLabel"] == "host"
    boards = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ConfigMap"}
    assert len(boards) == len(dashboards(plan))  # type: ignore[arg-type]
    for cm in boards.values():
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        (text,) = cm["data"].values()
        assert json.loads(text)["panels"]
