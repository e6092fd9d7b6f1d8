"""kiln-health on Kubernetes (component Monitoring): the node health check as a DaemonSet on the GPU nodes.

The Kubernetes equivalent of roles/monitoring's kiln-health timer: the same checks and fault codes
(kiln/node/health.py), run every `health.interval_s` by `kiln-health --kubernetes`, which cordons and taints a faulty
node (`kiln.io/health=fault-<code>:NoSchedule`, the reason as an annotation and an event) and returns it when
healthy, only if kiln-health cordoned it. Least privilege:

    Namespace           health_namespace, Pod Security `privileged` (Baseline forbids every hostPath volume);
                        the policy pack (kiln-pod-security, hostPathNamespaces) allows there exactly read-only
                        /proc and /sys, no host namespaces, no privilege escalation and every capability dropped
    ServiceAccount      kiln-health; ClusterRole: nodes get/patch; Role (its namespace): events create
    ConfigMap           kiln-health-expect: each compute host's expectations (<host>.json, kiln.node.health.Expect)
    DaemonSet           kiln-health: host /proc and /sys read-only under /host; nvidia-smi from the NVIDIA runtime
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from kiln.knowledge.kubernetes import kubernetes
from kiln.node.health import TAINT_KEY, expectations
from kiln.render.manifests.context import MONITORING, Ctx, Obj, obj, pool_label, role_label

NAME = "kiln-health"
EXPECT_CONFIGMAP = "kiln-health-expect"
EXPECT_DIR = "/etc/kiln/health"
HOST_ROOT = "/host"
#: Host paths the checks read, mounted read-only under HOST_ROOT (kiln/node/health.py: /proc/1/mounts,
#: /proc/fs/lustre, /sys/fs/lustre, /sys/class/infiniband). No check reads /dev.
HOST_PATHS = ("/proc", "/sys")
RBAC_API = "rbac.authorization.k8s.io/v1"


def gpu_pools(c: Ctx) -> list[str]:
    """Compute pools whose hosts have GPUs: where the DaemonSet runs."""
    return sorted({h.pool for h in c.plan.hosts if h.role == "compute" and h.pool and h.gpus > 0})


def health_host_paths(c: Ctx) -> dict[str, list[dict[str, Any]]]:
    """The policy pack's hostPathNamespaces entry: the health namespace → the host paths its pods read."""
    if not gpu_pools(c):
        return {}
    return {c.plan.kubernetes.health_namespace: [{"path": p, "readOnly": True} for p in HOST_PATHS]}


def _expect_data(c: Ctx, pools: list[str]) -> dict[str, str]:
    hosts = [h for h in c.plan.hosts if h.role == "compute" and h.pool in pools]
    return {f"{h.name}.json": json.dumps(asdict(expectations(c.plan, h.name, c.plan.local_nvme_mount(h.pool))),
                                         sort_keys=True)
            for h in hosts}


def _daemonset(c: Ctx, ns: str, pools: list[str]) -> Obj:
    k = kubernetes().health
    container = {
        "name": "health",
        "image": c.plan.kubernetes.health_image,
        "command": ["kiln-health"],
        "args": ["--kubernetes", "--root", HOST_ROOT, "--expect", f"{EXPECT_DIR}/$(NODE_NAME).json",
                 "--every", str(k.interval_s.value)],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        ],
        "volumeMounts": [
            *({"name": f"host{p.replace('/', '-')}", "mountPath": f"{HOST_ROOT}{p}", "readOnly": True}
              for p in HOST_PATHS),
            {"name": "expect", "mountPath": EXPECT_DIR, "readOnly": True},
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": 65534,
                            "runAsGroup": 65534},
    }
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": role_label(), "operator": "In", "values": ["compute"]},
                              {"key": pool_label(), "operator": "In", "values": pools}]}]}}}
    pod = {
        "metadata": {"labels": c.labels(MONITORING, {"app.kubernetes.io/name": NAME})},
        "spec": {
            "serviceAccountName": NAME,
            "runtimeClassName": k.gpu_runtime_class.value,
            "affinity": affinity,
            # its own taint: the pod keeps running on a node it took out, to return it when healthy
            "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
                            {"key": k.gpu_node_taint.value, "operator": "Exists", "effect": "NoSchedule"}],
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container],
            "volumes": [
                *({"name": f"host{p.replace('/', '-')}", "hostPath": {"path": p, "type": "Directory"}}
                  for p in HOST_PATHS),
                {"name": "expect", "configMap": {"name": EXPECT_CONFIGMAP}},
            ],
        },
    }
    return obj("apps/v1", "DaemonSet", c.meta(MONITORING, NAME, ns), spec={
        "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
        "updateStrategy": {"type": "RollingUpdate"},
        "template": pod,
    })


def node_health(c: Ctx) -> list[Obj]:
    """The kiln-health DaemonSet and what it needs; nothing when no compute pool has GPUs."""
    pools = gpu_pools(c)
    if not pools:
        return []
    ns = c.plan.kubernetes.health_namespace
    sa = {"kind": "ServiceAccount", "name": NAME, "namespace": ns}
    return [
        obj("v1", "Namespace", c.meta(MONITORING, ns, labels={"pod-security.kubernetes.io/enforce": "privileged"})),
        obj("v1", "ServiceAccount", c.meta(MONITORING, NAME, ns)),
        obj(RBAC_API, "ClusterRole", c.meta(MONITORING, NAME), rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]),
        obj(RBAC_API, "ClusterRoleBinding", c.meta(MONITORING, NAME), subjects=[sa],
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME}),
        obj(RBAC_API, "Role", c.meta(MONITORING, NAME, ns), rules=[
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]),
        obj(RBAC_API, "RoleBinding", c.meta(MONITORING, NAME, ns), subjects=[sa],
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME}),
        obj("v1", "ConfigMap", c.meta(MONITORING, EXPECT_CONFIGMAP, ns), data=_expect_data(c, pools)),
        _daemonset(c, ns, pools),
    ]
