"""Plan → Kubernetes objects, per component: the one builder behind `kiln render` and the Pulumi program.

Every object is a plain dict (apiVersion, kind, metadata, ...). `kiln render` writes them as YAML for
GitOps; kiln.infra instantiates the very same dicts as pulumi_kubernetes resources, so the two cannot
disagree. Upstream charts (GPU Operator, Network Operator, HPE Lustre CSI driver, SeaweedFS) are Flux
`HelmRelease` objects with their `HelmRepository` / `GitRepository` source; the Pulumi program turns
each HelmRelease into a `kubernetes.helm.v3.Release` with `helm_chart()` — same chart, version and values.

One module per component, sharing `context` (kinds, the build context, plan and object helpers) and
`helm` (chart objects):

    gpu          GpuNodeStack: namespaces, GPU Operator (+ network: Network Operator, NicClusterPolicy, NADs)
    nccl         NcclConfig: the plan's NCCL environment per pool
    lustre       LustreClient: Lustre CSI chart, static PVs/PVCs
    objectstore  ObjectStore: S3 credentials, SeaweedFS chart, buckets
    acceptance   Acceptance: benchmark Jobs whose logs `kiln verify --from-jobs` judges
    dataflow     DataMover: the data mover's stage Jobs/CronJobs and its Deployment (kiln data)
    kafka        TokenStream: the Strimzi operator and the Kafka token stream (pipeline.kafka, strimzi mode)
    output       YAML files of `kiln render`;  policy: the policy pack's configuration

A new component (e.g. `networkpolicy`: NetworkPolicies per namespace) is one more module with a
`<name>(c: Ctx) -> list[Obj]` builder, a ComponentKind in context.COMPONENT_KINDS, and one line in
BUILDERS below; kiln.infra.components gives it a ComponentResource class.

Pins and rules the plan does not carry live in kiln/knowledge/kubernetes.yaml (kiln.knowledge.kubernetes).
"""

from __future__ import annotations

from collections.abc import Callable

from kiln.plan.acceptance_jobs import JobCheck, acceptance_jobs
from kiln.plan.model import Plan
from kiln.render.manifests.acceptance import acceptance, warp_bucket
from kiln.render.manifests.context import (
    ACCEPTANCE,
    BUILTIN_GROUPS,
    COMPONENT_KINDS,
    CREATE_WITH_ANNOTATION,
    DATAFLOW,
    GPU_NODE_STACK,
    GPU_RESOURCE,
    LUSTRE_CLIENT,
    MONITORING,
    NCCL_CONFIG,
    OBJECT_STORE,
    S3_ENDPOINT_CONFIGMAP,
    S3_SECRET_NAME,
    SECRET_SOURCE_ANNOTATION,
    TARGETS_CONFIGMAP,
    TOKEN_STREAM,
    Component,
    ComponentKind,
    Ctx,
    Obj,
    api_group,
    client_mount_options,
    credentials_config_key,
    is_builtin,
    mgs_spec,
    node_labels,
    object_role,
    pool_label,
    pool_rails,
    quantity_GB,
    rail_network_name,
    rail_resource,
    rail_resource_format,
    rail_resource_name,
    rails_per_pool,
    rdma_enabled,
    role_label,
    s3_endpoint,
)
from kiln.render.manifests.dataflow import dataflow
from kiln.render.manifests.gpu import gpu_node_stack, gpu_operator_values
from kiln.render.manifests.helm import GIT_REPOSITORY, HELM_REPOSITORY, SOURCE_KINDS, HelmChart, helm_chart
from kiln.render.manifests.kafka import token_stream
from kiln.render.manifests.lustre import lustre_claim_name, lustre_client, lustre_csi_values, lustre_volume_name
from kiln.render.manifests.monitoring import kube_prometheus_values, monitoring_stack
from kiln.render.manifests.nccl import nccl_config, nccl_configmap_name
from kiln.render.manifests.network import network_operator_values, rdma_device_plugin_config
from kiln.render.manifests.objectstore import (
    jwt_config_key,
    object_store,
    s3_secret_string_data,
    seaweedfs_jwt_string_data,
    seaweedfs_s3_config,
    seaweedfs_values,
    secret_string_data,
)
from kiln.render.manifests.output import dump_objects, render_files
from kiln.render.manifests.policy import policy_config
from kiln.spec.types import dns_name

# Component kind → builder, in apply order.
BUILDERS: dict[ComponentKind, Callable[[Ctx], list[Obj]]] = {
    GPU_NODE_STACK: gpu_node_stack,
    NCCL_CONFIG: nccl_config,
    LUSTRE_CLIENT: lustre_client,
    OBJECT_STORE: object_store,
    MONITORING: monitoring_stack,
    ACCEPTANCE: acceptance,
    DATAFLOW: dataflow,
    TOKEN_STREAM: token_stream,
}


def build_manifests(plan: Plan) -> tuple[Component, ...]:
    """Every component's Kubernetes objects, in apply order within each component."""
    c = Ctx(plan)
    return tuple(Component(kind, tuple(BUILDERS[kind](c))) for kind in COMPONENT_KINDS)


def render_manifests(plan: Plan) -> dict[str, str]:
    """File name → multi-document YAML, one file per component (for GitOps: Flux, Argo CD, kubectl)."""
    return render_files(plan, build_manifests(plan))


__all__ = [
    "ACCEPTANCE",
    "BUILDERS",
    "BUILTIN_GROUPS",
    "COMPONENT_KINDS",
    "CREATE_WITH_ANNOTATION",
    "DATAFLOW",
    "GIT_REPOSITORY",
    "GPU_NODE_STACK",
    "GPU_RESOURCE",
    "HELM_REPOSITORY",
    "LUSTRE_CLIENT",
    "MONITORING",
    "NCCL_CONFIG",
    "OBJECT_STORE",
    "S3_ENDPOINT_CONFIGMAP",
    "S3_SECRET_NAME",
    "SECRET_SOURCE_ANNOTATION",
    "SOURCE_KINDS",
    "TARGETS_CONFIGMAP",
    "TOKEN_STREAM",
    "Component",
    "ComponentKind",
    "Ctx",
    "HelmChart",
    "JobCheck",
    "Obj",
    "acceptance_jobs",
    "api_group",
    "build_manifests",
    "client_mount_options",
    "credentials_config_key",
    "dns_name",
    "dump_objects",
    "gpu_operator_values",
    "helm_chart",
    "is_builtin",
    "jwt_config_key",
    "kube_prometheus_values",
    "lustre_claim_name",
    "lustre_csi_values",
    "lustre_volume_name",
    "mgs_spec",
    "monitoring_stack",
    "nccl_configmap_name",
    "network_operator_values",
    "node_labels",
    "object_role",
    "policy_config",
    "pool_label",
    "pool_rails",
    "quantity_GB",
    "rail_network_name",
    "rail_resource",
    "rail_resource_format",
    "rail_resource_name",
    "rails_per_pool",
    "rdma_device_plugin_config",
    "rdma_enabled",
    "render_manifests",
    "role_label",
    "s3_endpoint",
    "s3_secret_string_data",
    "seaweedfs_jwt_string_data",
    "seaweedfs_s3_config",
    "seaweedfs_values",
    "secret_string_data",
    "warp_bucket",
]
