"""Configuration of the kiln policy pack (policy/) for one stack."""

from __future__ import annotations

from typing import Any

from kiln.plan.model import Plan
from kiln.render.manifests.context import GPU_RESOURCE, Ctx, pool_label, rail_resource_format, rails_per_pool
from kiln.render.manifests.dataflow import models_host_paths
from kiln.render.manifests.health import health_host_paths


def policy_config(plan: Plan) -> dict[str, Any]:
    """Configuration of the kiln policy pack (policy/) for this stack: namespaces, rails per pool."""
    k8s = plan.kubernetes
    c = Ctx(plan)
    return {
        "kiln-privileged-namespaces": {"allowedNamespaces": [k8s.storage_namespace, k8s.system_namespace]},
        "kiln-pod-security": {"allowedNamespaces": [k8s.storage_namespace, k8s.system_namespace],
                              "allowedCapabilities": ["IPC_LOCK"],
                              # kiln-health reads /proc and /sys; the model receivers write their NVMe directory
                              "hostPathNamespaces": {**health_host_paths(c), **models_host_paths(c)}},
        "kiln-gpu-pods-request-rails": {"poolLabel": pool_label(), "gpuResource": GPU_RESOURCE,
                                        "railResourceFormat": rail_resource_format(),
                                        "railsPerPool": rails_per_pool(plan)},
        "kiln-no-secrets-in-configmaps": {},
    }
