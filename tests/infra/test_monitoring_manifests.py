"""The Kubernetes monitoring component: kube-prometheus-stack values, the plan's rules, ServiceMonitors, dashboards."""

from __future__ import annotations

import json
from typing import Any

from kiln.knowledge.kubernetes import kubernetes
from kiln.node.health import TAINT_KEY, Expect
from kiln.plan import build_plan
from kiln.render.manifests import MONITORING, build_manifests
from kiln.render.monitoring import dashboards, rules_file
from kiln.spec import load_stack


def _objects(stack: str) -> tuple[object, list[dict]]:  # type: ignore[type-arg]
    spec = load_stack(stack)
    plan = build_plan(spec, stack)
    comp = next(c for c in build_manifests(plan) if c.kind == MONITORING)
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
    boards = {o["metadata"]["name"]: o for o in objs
              if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("kiln-dashboard-")}
    assert len(boards) == len(dashboards(plan))  # type: ignore[arg-type]
    for cm in boards.values():
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        (text,) = cm["data"].values()
        assert json.loads(text)["panels"]


def _health(stack: str) -> dict[tuple[str, str], dict[str, Any]]:
    _, objs = _objects(stack)
    return {(o["kind"], o["metadata"]["name"]): o for o in objs if o["metadata"].get("namespace") == "kiln-health"
            or o["metadata"]["name"].startswith("kiln-health")}


def test_health_daemonset_runs_kiln_health_on_the_gpu_nodes_with_least_privilege() -> None:
    objs = _health("dev")
    assert set(objs) == {("Namespace", "kiln-health"), ("ServiceAccount", "kiln-health"),
                         ("ClusterRole", "kiln-health"), ("ClusterRoleBinding", "kiln-health"),
                         ("Role", "kiln-health"), ("RoleBinding", "kiln-health"),
                         ("ConfigMap", "kiln-health-expect"), ("DaemonSet", "kiln-health")}
    ns = objs[("Namespace", "kiln-health")]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"  # Baseline: no hostPath
    # RBAC: nodes get/patch cluster-wide, events create in its own namespace, nothing else
    assert objs[("ClusterRole", "kiln-health")]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    assert objs[("Role", "kiln-health")]["rules"] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        assert objs[(kind, "kiln-health")]["subjects"] == [
            {"kind": "ServiceAccount", "name": "kiln-health", "namespace": "kiln-health"}]
    pod = objs[("DaemonSet", "kiln-health")]["spec"]["template"]["spec"]
    (ctr,) = pod["containers"]
    assert ctr["image"] == kubernetes().health.image.value
    assert ctr["args"][:3] == ["--kubernetes", "--root", "/host"] and "--every" in ctr["args"]
    assert {(v["hostPath"]["path"]) for v in pod["volumes"] if "hostPath" in v} == {"/proc", "/sys"}
    assert all(m["readOnly"] for m in ctr["volumeMounts"])
    sc = ctr["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert not any(pod.get(k) for k in ("hostPID", "hostNetwork", "hostIPC"))
    assert {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "kiln.io/pool", "operator": "In", "values": ["gpu"]} in terms[0]["matchExpressions"]
    # one expectations file per planned compute host, as kiln-health reads it
    data = objs[("ConfigMap", "kiln-health-expect")]["data"]
    assert set(data) == {"gpu001.json", "gpu002.json"}
    e = Expect(**json.loads(data["gpu001.json"]))
    assert e.host == "gpu001" and e.gpus == 8 and e.nvme_mount and e.server_nids
