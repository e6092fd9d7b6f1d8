"""DataMover: kiln's data mover (`kiln data`, docs/dataflow.md) as Kubernetes workloads on the Lustre CSI volume.

The Kubernetes equivalent of the datamover role's units:

    Job        kiln-stage-<link>   `kiln data stage` once, for each preload link not imported continuously
    CronJob    kiln-stage-<link>   `kiln data stage` on the link's cron schedule (import_trigger: schedule)
    Deployment kiln-datamover      `kiln data run`: continuous links and checkpoint write-back (one replica),
                                   and the metrics endpoint of every status file in the shared state directory
    DaemonSet  kiln-models-<i>     `kiln data models` for dataflow.models[i] (filer-subscribe), on the receiver
                                   pool's nodes, in the models namespace (below)

Every pod mounts the filesystem root's static claim (component LustreClient) at the plan's mount point, so a
link's directory is where the plan puts it, and keeps the mover's manifests and status files on Lustre
(STATE_DIR below), where the Jobs, CronJobs, DaemonSets and the Deployment share them: the Deployment's
`--metrics-port` endpoint serves every status file there, so a short-lived stage Job's progress is scraped
from the file it leaves behind (the same metric names and labels as the bare-metal textfile). The stack's spec
comes from a ConfigMap (without the S3 access key id and the secret's config name); the S3 access key and
secret come from the S3 credentials Secret (component ObjectStore) by reference, never inline.

Model distribution writes each receiver node's local NVMe, so its pods need a hostPath: they run in a namespace
of their own (kubernetes.models_namespace), where the policy pack admits exactly the planned receiver
directories as hostPath volumes (policy_config) and nothing else the training namespace forbids. One relay on
Lustre serves every receiver: the pods stage a new object into it one at a time (a lock in the shared state
directory, kiln.dataflow.model_distribution.distribute), so the lake serves each model once, whatever the pool's size.
"""

from __future__ import annotations

import posixpath
from typing import Any

import yaml

from kiln import knowledge
from kiln.knowledge.kubernetes import Resources, kubernetes
from kiln.plan.model import ModelFlowPlan
from kiln.render.manifests.context import (
    DATAFLOW,
    S3_ENDPOINT_CONFIGMAP,
    S3_SECRET_NAME,
    Ctx,
    Obj,
    obj,
    pool_label,
)
from kiln.render.manifests.lustre import lustre_claim_name, lustre_root_volume
from kiln.render.manifests.workload import NO_API, POD_SECURITY, RESTRICTED, finished_after, resources
from kiln.render.networkpolicy import NAMESPACE_NAME_LABEL, seaweedfs_selector
from kiln.spec.loader import CONFIG_KEY
from kiln.spec.types import dns_name

SPEC_CONFIGMAP = "kiln-dataflow-spec"
SPEC_DIR = "/etc/kiln"
STATE_SUBDIR = ".kiln-datamover"  # under the mount point: the mover's manifests and status files, on Lustre
RELAY_SUBDIR = ".kiln-models-relay"  # under the mount point: the models relay (the datamover role's default)
MOVER = "kiln-datamover"
MODELS = "kiln-models"
MONITORING_API = "monitoring.coreos.com/v1"
#: Pods of kube-prometheus-stack's Prometheus carry app.kubernetes.io/name=prometheus (set by the Prometheus
#: Operator on the StatefulSet it creates, with app.kubernetes.io/managed-by=prometheus-operator).
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus"}


def metrics_port() -> int:
    """The mover's metrics port (`kiln data run --metrics-port`, kiln/knowledge/ports.yaml); the Service,
    ServiceMonitor and NetworkPolicy follow."""
    return knowledge.load().ports.kubernetes.datamover_metrics.value


def spec_document(c: Ctx) -> str:
    """The stack's spec as a stack file the mover loads (`kiln data ... /etc/kiln/Pulumi.<stack>.yaml`)."""
    return yaml.safe_dump({"config": {CONFIG_KEY: c.plan.kubernetes.mover_spec}}, sort_keys=False, width=120)


def _spec_file(c: Ctx) -> str:
    return posixpath.join(SPEC_DIR, f"Pulumi.{c.plan.stack}.yaml")


def _state_dir(c: Ctx) -> str:
    return posixpath.join(c.plan.mount_point, STATE_SUBDIR)


def _pod(c: Ctx, name: str, args: list[str], restart: str, ports: list[Obj] | None = None,
         mounts: list[Obj] | None = None, volumes: list[Obj] | None = None, size: Resources | None = None) -> Obj:
    """The mover's pod template: kiln with the plan's tuning, the Lustre root claim, the S3 Secret by reference."""
    image = c.plan.kubernetes.mover_image
    env = [
        {"name": "KILN_S3_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": S3_SECRET_NAME,
                                                                      "key": "AWS_ACCESS_KEY_ID"}}},
        {"name": "KILN_S3_SECRET_KEY", "valueFrom": {"secretKeyRef": {"name": S3_SECRET_NAME,
                                                                      "key": "AWS_SECRET_ACCESS_KEY"}}},
        {"name": "KILN_S3_ENDPOINT", "valueFrom": {"configMapKeyRef": {"name": S3_ENDPOINT_CONFIGMAP,
                                                                       "key": "S3_ENDPOINT"}}},
        {"name": "KILN_DATA_STATE_DIR", "value": _state_dir(c)},
    ]
    container = {
        "name": "mover",
        "image": image,
        "command": ["kiln", "data"],
        "args": [*args, "--endpoint", "$(KILN_S3_ENDPOINT)"],
        "env": env,
        "volumeMounts": [{"name": "lustre", "mountPath": c.plan.mount_point},
                         {"name": "spec", "mountPath": SPEC_DIR, "readOnly": True}, *(mounts or [])],
        "resources": resources(size or kubernetes().workloads.mover.value),
        "securityContext": dict(RESTRICTED),
    }
    if ports:
        container["ports"] = ports
        # ready once the metrics server answers (`kiln data run --metrics-port`, prometheus_client)
        container["readinessProbe"] = {"httpGet": {"path": "/metrics", "port": ports[0]["name"]}, "periodSeconds": 30}
    return {
        "metadata": {"labels": c.labels(DATAFLOW, {"app.kubernetes.io/name": name})},
        "spec": {
            "restartPolicy": restart,
            "securityContext": dict(POD_SECURITY),
            **NO_API,
            "containers": [container],
            "volumes": [
                {"name": "lustre", "persistentVolumeClaim": {"claimName": lustre_claim_name(None)}},
                {"name": "spec", "configMap": {"name": SPEC_CONFIGMAP}},
                *(volumes or []),
            ],
        },
    }


def _stage_args(c: Ctx, link: str) -> list[str]:
    return ["stage", _spec_file(c), link]


def dataflow(c: Ctx) -> list[Obj]:
    """The mover's workloads; nothing when the stack has no dataflow section."""
    flow = c.plan.dataflow
    if flow is None:
        return []
    ns = c.training
    objs: list[Obj] = [obj("v1", "ConfigMap", c.meta(DATAFLOW, SPEC_CONFIGMAP, ns), data={
        f"Pulumi.{c.plan.stack}.yaml": spec_document(c)})]
    for link in flow.links:
        name = f"kiln-stage-{dns_name(link.name)}"
        annotations = {"kiln.io/link": f"{link.bucket}/{link.prefix} -> {link.mount_path}",
                       "kiln.io/layout": link.setstripe}
        if link.schedule is not None:
            # The CronJob's history limits, not a TTL on its Jobs, remove finished runs (both would race).
            job: dict[str, Any] = {"backoffLimit": 3, "template": _pod(c, name, _stage_args(c, link.name), "Never")}
            kept = kubernetes().workloads.cron_jobs_kept.value
            objs.append(obj("batch/v1", "CronJob", c.meta(DATAFLOW, name, ns, annotations=annotations), spec={
                "schedule": link.schedule, "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 3600,
                "successfulJobsHistoryLimit": kept, "failedJobsHistoryLimit": kept, "jobTemplate": {"spec": job}}))
        elif link.import_policy == "preload" and link.import_trigger != "continuous":
            job = finished_after({"backoffLimit": 6, "template": _pod(c, name, _stage_args(c, link.name), "OnFailure")},
                                 kubernetes().workloads.job_ttl_s.value)
            objs.append(obj("batch/v1", "Job", c.meta(DATAFLOW, name, ns, annotations=annotations), spec=job))
    # Always: besides continuous links and checkpoint write-back it serves every status file on Lustre (the
    # stage Jobs' and the model pods') to Prometheus; with neither it only serves.
    pod = _pod(c, MOVER, ["run", _spec_file(c), "--metrics-port", str(metrics_port())], "Always",
               ports=[{"name": "metrics", "containerPort": metrics_port(), "protocol": "TCP"}])
    objs.append(obj("apps/v1", "Deployment", c.meta(DATAFLOW, MOVER, ns), spec={
        # One replica: two `kiln data run` loops on one state directory would race on its manifests.
        "replicas": 1, "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": {"app.kubernetes.io/name": MOVER}}, "template": pod}))
    objs += mover_metrics(c)
    objs += model_distribution(c)
    return objs


def mover_metrics(c: Ctx) -> list[Obj]:
    """Service + ServiceMonitor for the mover Deployment's endpoint, and the NetworkPolicy that admits Prometheus
    (and nothing else) to the mover's pods. The job label is the Service name; the node becomes `host`, as the
    bare-metal textfile's series get it from node_exporter's target, so the rules and dashboards match both."""
    ns = c.training
    sel = {"app.kubernetes.io/name": MOVER}
    port = {"name": "metrics", "port": metrics_port(), "targetPort": "metrics", "protocol": "TCP"}
    every = f"{c.plan.monitoring.scrape_interval_s}s"
    host = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "host", "action": "replace"}
    return [
        obj("v1", "Service", c.meta(DATAFLOW, MOVER, ns, labels=sel), spec={"selector": sel, "ports": [port]}),
        obj(MONITORING_API, "ServiceMonitor", c.meta(DATAFLOW, MOVER, ns), spec={
            "selector": {"matchLabels": sel},
            "endpoints": [{"port": "metrics", "interval": every, "relabelings": [host]}]}),
        obj("networking.k8s.io/v1", "NetworkPolicy", c.meta(DATAFLOW, f"{MOVER}-metrics", ns), spec={
            "podSelector": {"matchLabels": sel}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: c.system}},
                                   "podSelector": {"matchLabels": PROMETHEUS_POD}}],
                         "ports": [{"protocol": "TCP", "port": metrics_port()}]}]}),
    ]


# ------------------------------------------------------------------------------------- model distribution


def model_entries(c: Ctx) -> list[tuple[int, ModelFlowPlan]]:
    """(index, entry) of the dataflow.models entries rendered as DaemonSets: filer-subscribe on the in-cluster
    SeaweedFS (the planner refuses filer-subscribe on another backend; `poll` entries are a scheduled stage)."""
    flow = c.plan.dataflow
    if flow is None or c.plan.objectstore.backend != "seaweedfs":
        return []
    return [(i, m) for i, m in enumerate(flow.models) if m.events == "filer-subscribe"]


def models_namespace(c: Ctx) -> str | None:
    """The model distribution's namespace, when the stack renders any (None otherwise)."""
    return c.plan.kubernetes.models_namespace if model_entries(c) else None


def models_host_paths(c: Ctx) -> dict[str, list[dict[str, Any]]]:
    """The policy pack's hostPathNamespaces entry: the models namespace → the receiver directories its pods write
    on their node, exactly the planned targets, type Directory (nothing is created on the node)."""
    ns = models_namespace(c)
    if ns is None:
        return {}
    return {ns: [{"path": t, "readOnly": False, "type": "Directory"}
                 for t in sorted({m.target for _, m in model_entries(c)})]}


def filer_address(c: Ctx) -> str:
    """The in-cluster filer as `host:port.grpcPort` (weed's ServerAddress form with an explicit gRPC port,
    weed/pb/server_address.go ToGrpcAddress): filer.meta.tail connects to the gRPC port only."""
    sw = knowledge.load().ports.seaweedfs
    return f"seaweedfs-filer.{c.storage}.svc:{sw.filer.value}.{sw.filer_grpc}"


def _model_daemonset(c: Ctx, ns: str, index: int, m: ModelFlowPlan) -> Obj:
    name = f"{MODELS}-{index}"
    relay = posixpath.join(c.plan.mount_point, RELAY_SUBDIR)
    args = ["models", _spec_file(c), "--index", str(index), "--filer", filer_address(c),
            "--weed", "/usr/local/bin/weed", "--relay", relay, "--target", m.target]
    pod = _pod(c, MODELS, args, "Always", mounts=[{"name": "receiver", "mountPath": m.target}],
               volumes=[{"name": "receiver", "hostPath": {"path": m.target, "type": "Directory"}}],
               size=kubernetes().workloads.models.value)
    pod["metadata"]["labels"]["kiln.io/models-index"] = str(index)
    # root (uid 0) without any capability: the receiver directory on the node and the relay and state directory
    # on Lustre belong to root (the node's preparation and the other mover pods); no other privilege
    pod["spec"]["nodeSelector"] = {pool_label(): m.pool}
    annotations = {"kiln.io/models": f"{m.bucket}/{m.prefix} -> {m.target} on pool {m.pool} ({m.receivers} nodes)"}
    return obj("apps/v1", "DaemonSet", c.meta(DATAFLOW, name, ns, annotations=annotations), spec={
        "selector": {"matchLabels": {"app.kubernetes.io/name": MODELS, "kiln.io/models-index": str(index)}},
        "template": pod})


def _models_network_policies(c: Ctx, ns: str) -> list[Obj]:
    """The model pods accept no connection and reach only the filer's gRPC port, the S3 gateway and DNS; the
    filer admits them on its gRPC port (its other policy, seaweedfs-backend, admits only SeaweedFS's own pods)."""
    ports = knowledge.load().ports
    grpc, dns = ports.seaweedfs.filer_grpc, ports.kubernetes.dns.value
    pods = {"matchLabels": {"app.kubernetes.io/name": MODELS}}
    in_storage = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: c.storage}}}
    net = "networking.k8s.io/v1"
    return [
        obj(net, "NetworkPolicy", c.meta(DATAFLOW, MODELS, ns), spec={
            "podSelector": pods, "policyTypes": ["Ingress", "Egress"], "ingress": [],
            "egress": [
                {"to": [{**in_storage, "podSelector": seaweedfs_selector("filer")}],
                 "ports": [{"protocol": "TCP", "port": grpc}]},
                {"to": [{**in_storage, "podSelector": seaweedfs_selector("s3")}],
                 "ports": [{"protocol": "TCP", "port": c.plan.objectstore.s3_port}]},
                {"to": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}},
                         "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                 "ports": [{"protocol": "UDP", "port": dns}, {"protocol": "TCP", "port": dns}]},
            ]}),
        obj(net, "NetworkPolicy", c.meta(DATAFLOW, "seaweedfs-filer-models", c.storage), spec={
            "podSelector": seaweedfs_selector("filer"), "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: ns}},
                                   "podSelector": pods}],
                         "ports": [{"protocol": "TCP", "port": grpc}]}]}),
    ]


def model_distribution(c: Ctx) -> list[Obj]:
    """The models namespace's Lustre claim, spec ConfigMap, one DaemonSet per filer-subscribe entry, and their
    NetworkPolicies (the namespace itself and its S3 Secret come with GpuNodeStack and ObjectStore)."""
    ns = models_namespace(c)
    if ns is None:
        return []
    objs = lustre_root_volume(c, ns, DATAFLOW)
    objs.append(obj("v1", "ConfigMap", c.meta(DATAFLOW, SPEC_CONFIGMAP, ns), data={
        f"Pulumi.{c.plan.stack}.yaml": spec_document(c)}))
    objs += [_model_daemonset(c, ns, i, m) for i, m in model_entries(c)]
    objs += _models_network_policies(c, ns)
    return objs
