"""Monitoring on Kubernetes: the kube-prometheus-stack chart (pinned) with the plan's scrape interval, retention,
node_exporter collectors and Alertmanager config; the plan's alert rules as a PrometheusRule; ServiceMonitors for
the SeaweedFS chart's metrics Services; the plan's dashboards as ConfigMaps Grafana's sidecar loads; the node
health check's DaemonSet on the GPU nodes (kiln/render/manifests/health.py).

The same rules and dashboards as on bare metal (kiln/render/monitoring.py); what differs is only how they are
installed. Every ServiceMonitor relabels the node name into `host`, the label the rules and dashboards use.
"""

from __future__ import annotations

import json

from kiln.render.manifests.context import MONITORING, Ctx, Obj, obj
from kiln.render.manifests.health import node_health
from kiln.render.manifests.helm import helm_release, helm_source
from kiln.render.monitoring import alertmanager_config, dashboards, rules_file
from kiln.render.networkpolicy import seaweedfs_labels

MONITORING_API = "monitoring.coreos.com/v1"
#: The node name as `host` (Prometheus Operator relabeling of the pod's node; ServiceMonitor endpoints).
HOST_RELABEL: Obj = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "host", "action": "replace"}
#: kube-prometheus-stack 65.8.1 values.yaml prometheus-node-exporter.extraArgs: the chart's own two flags,
#: repeated because a list value replaces the chart's list.
CHART_NODE_EXPORTER_ARGS = (
    "--collector.filesystem.mount-points-exclude=^/(dev|proc|sys|var/lib/docker/.+|var/lib/kubelet/.+)($|/)",
    "--collector.filesystem.fs-types-exclude=^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs"
    "|fusectl|hugetlbfs|iso9660|mqueue|nsfs|overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs"
    "|sysfs|tracefs)$",
)
#: Grafana's dashboard sidecar picks ConfigMaps with this label (values.yaml grafana.sidecar.dashboards.label,
#: labelValue "1").
DASHBOARD_LABEL = "grafana_dashboard"
#: SeaweedFS 4.44 chart Services that carry a `metrics` port (templates/{master,volume,filer,s3}/*-service.yaml,
#: metricsPort 9327 by default), labelled app.kubernetes.io/component=<this>.
SEAWEEDFS_COMPONENTS = ("master", "volume", "filer", "s3")


def kube_prometheus_values(c: Ctx) -> Obj:
    m = c.plan.monitoring
    every = f"{m.scrape_interval_s}s"
    return {
        "prometheus": {"prometheusSpec": {
            "scrapeInterval": every,
            "evaluationInterval": every,
            "retention": f"{m.retention_days}d",
            # select kiln's PrometheusRule and ServiceMonitors, not only the chart's own
            "ruleSelectorNilUsesHelmValues": False,
            "serviceMonitorSelectorNilUsesHelmValues": False,
            "podMonitorSelectorNilUsesHelmValues": False,
        }},
        "prometheus-node-exporter": {
            # the chart's own exclude list keeps /mnt (a flag given twice stops node_exporter)
            "extraArgs": [*CHART_NODE_EXPORTER_ARGS, *(a for a in m.node_exporter_args
                                                       if not a.startswith("--collector.filesystem."))],
            "prometheus": {"monitor": {"relabelings": [HOST_RELABEL]}},
        },
        "alertmanager": {"config": alertmanager_config(m)},
        "grafana": {"sidecar": {"dashboards": {"enabled": True, "label": DASHBOARD_LABEL, "labelValue": "1"}}},
    }


def _service_monitors(c: Ctx) -> list[Obj]:
    if c.plan.objectstore.backend != "seaweedfs":
        return []
    every = f"{c.plan.monitoring.scrape_interval_s}s"
    out = []
    for comp in SEAWEEDFS_COMPONENTS:
        out.append(obj(MONITORING_API, "ServiceMonitor", c.meta(MONITORING, f"seaweedfs-{comp}", c.storage), spec={
            # the job label is the Service name, seaweedfs-<component>: the names the rules use
            "selector": {"matchLabels": seaweedfs_labels(comp)},
            "endpoints": [{"port": "metrics", "interval": every, "relabelings": [HOST_RELABEL]}],
        }))
    return out


def monitoring_stack(c: Ctx) -> list[Obj]:
    objs = [helm_source(c, MONITORING, "kube_prometheus_stack"),
            helm_release(c, MONITORING, "kube_prometheus_stack", kube_prometheus_values(c))]
    objs.append(obj(MONITORING_API, "PrometheusRule", c.meta(MONITORING, "kiln-rules", c.system),
                    spec=rules_file(c.plan.monitoring)))
    objs += _service_monitors(c)
    for path, text in sorted(dashboards(c.plan).items()):
        name = path.rsplit("/", 1)[-1]
        uid = json.loads(text)["uid"]
        objs.append(obj("v1", "ConfigMap", c.meta(MONITORING, f"kiln-dashboard-{name.removesuffix('.json')}",
                                                  c.system, labels={DASHBOARD_LABEL: "1"},
                                                  annotations={"kiln.io/dashboard-uid": uid}),
                        data={name: text}))
    return objs + node_health(c)
