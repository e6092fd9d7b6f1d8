"""NetworkPolicies for the in-cluster SeaweedFS: only its S3 gateway is reachable from the training namespace.

SeaweedFS's master, volume and filer servers answer anyone who can reach them (reads, writes and deletes of
any object through the volume and filer HTTP APIs); on Kubernetes, without a policy, that is every pod of the
cluster. Two policies in the storage namespace close that:

- `seaweedfs-backend`: master, volume and filer pods accept connections (HTTP and gRPC ports) only from the
  SeaweedFS pods themselves (the S3 gateway reaches the filer, the filer and volumes reach the masters);
- `seaweedfs-s3-gateway`: the S3 gateway pods accept the S3 port from the storage and training namespaces
  (training jobs, the bucket Job) and, where models are distributed, the models namespace; nothing else.

NetworkPolicies are additive allow-lists: once a pod is selected by a policy with `Ingress` in its
policyTypes, every connection no rule allows is dropped (Kubernetes docs, "Network Policies", "Isolation");
enforcing them needs a CNI plugin that implements NetworkPolicy (Cilium, Calico, ...). docs/security.md.
"""

from __future__ import annotations

from typing import Any

from kiln import knowledge
from kiln.knowledge.kubernetes import kubernetes
from kiln.plan.model import Plan

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
COMPONENT_LABEL = "app.kubernetes.io/component"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace by the API server (1.22+)
BACKEND_ROLES = ("master", "volume", "filer")


def seaweedfs_labels(component: str) -> dict[str, str]:
    """The labels the SeaweedFS chart puts on a component's pods and Services: name = the chart's name (no
    nameOverride), instance = the release, component = master, volume, filer or s3 (chart 4.44.0
    k8s/charts/seaweedfs/templates/<component>/*-statefulset.yaml, s3-deployment.yaml and *-service.yaml)."""
    chart = kubernetes().charts["seaweedfs"]
    return {NAME_LABEL: chart.chart, INSTANCE_LABEL: chart.release, COMPONENT_LABEL: component}


def seaweedfs_selector(*components: str) -> dict[str, Any]:
    """A label selector of the chart's pods of these components."""
    labels = seaweedfs_labels(components[0])
    if len(components) == 1:
        return {"matchLabels": labels}
    del labels[COMPONENT_LABEL]
    return {"matchLabels": labels,
            "matchExpressions": [{"key": COMPONENT_LABEL, "operator": "In", "values": list(components)}]}


def _meta(plan: Plan, name: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "kiln", "kiln.io/stack": plan.stack,
                       "kiln.io/component": "objectstore"}}


def network_policies(plan: Plan, s3_clients: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The storage namespace's NetworkPolicies for a SeaweedFS deployed on Kubernetes (none otherwise);
    `s3_clients`: namespaces besides storage and training that reach the S3 gateway (model distribution)."""
    if plan.objectstore.backend != "seaweedfs":
        return []
    storage = plan.kubernetes.storage_namespace
    training = plan.kubernetes.training_namespace
    backend_ports = [{"protocol": "TCP", "port": p} for p in knowledge.load().ports.seaweedfs.backend()]
    backend = {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": _meta(plan, "seaweedfs-backend", storage),
        "spec": {"podSelector": seaweedfs_selector(*BACKEND_ROLES), "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"podSelector": seaweedfs_selector(*BACKEND_ROLES, "s3")}],
                              "ports": backend_ports}]},
    }
    gateway = {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": _meta(plan, "seaweedfs-s3-gateway", storage),
        "spec": {"podSelector": seaweedfs_selector("s3"), "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"namespaceSelector": {"matchExpressions": [
                     {"key": NAMESPACE_NAME_LABEL, "operator": "In",
                      "values": sorted({storage, training, *s3_clients})}]}}],
                     "ports": [{"protocol": "TCP", "port": plan.objectstore.s3_port}]}]},
    }
    return [backend, gateway]
