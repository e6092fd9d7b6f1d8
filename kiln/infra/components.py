"""One ComponentResource per builder component, type token kiln:<module>:<Type>.

Children are parented to their component and named `<component name>-<role>` (role: kind, namespace
and name of the object); `register_outputs` is the last thing each constructor does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pulumi
import pulumi_kubernetes as k8s

from kiln.infra.resources import HELM_RELEASE, instantiate, is_source_only
from kiln.knowledge.kubernetes import kubernetes
from kiln.plan.model import Plan
from kiln.render.manifests import (
    ACCEPTANCE,
    DATAFLOW,
    GPU_NODE_STACK,
    LUSTRE_CLIENT,
    MONITORING,
    NCCL_CONFIG,
    OBJECT_STORE,
    SECRET_SOURCE_ANNOTATION,
    TOKEN_STREAM,
    ComponentKind,
    Obj,
    is_builtin,
    jwt_config_key,
    object_role,
    seaweedfs_jwt_string_data,
    secret_string_data,
)


class KilnComponent(pulumi.ComponentResource):
    """Instantiates a builder component's objects, in order, as children of this component."""

    kind: ClassVar[ComponentKind]
    resources: dict[str, pulumi.CustomResource]
    releases: list[k8s.helm.v3.Release]

    def __init__(
        self,
        name: str,
        objects: Sequence[Obj],
        opts: pulumi.ResourceOptions | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> None:
        super().__init__(self.kind.token, name, None, opts)
        self.resources = {}
        self.releases = []
        self._create(name, list(objects), list(depends_on))
        self._collect()
        self.register_outputs(self._outputs())

    # Hooks for subclasses ---------------------------------------------------------------------------
    def _overrides(self, obj: Obj) -> dict[str, Any] | None:
        return None

    def _extra_opts(self, obj: Obj) -> pulumi.ResourceOptions | None:
        return None

    def _collect(self) -> None:
        """Set the typed attributes callers use (after every child exists)."""

    def _outputs(self) -> dict[str, Any]:
        return {"resources": sorted(self.resources)}

    # ---------------------------------------------------------------------------------------------------
    def _create(self, name: str, objects: list[Obj], depends_on: list[pulumi.Resource]) -> None:
        custom_before: list[pulumi.Resource] = []
        namespaces: list[pulumi.Resource] = []
        for obj in objects:
            if is_source_only(obj):
                continue
            role = object_role(obj)
            deps: list[pulumi.Resource] = [*depends_on, *namespaces]
            if not is_builtin(obj) and obj["kind"] != HELM_RELEASE:
                # A custom resource needs its CRD: the component's charts and earlier custom resources.
                deps += [*self.releases, *custom_before]
            opts = pulumi.ResourceOptions(parent=self, depends_on=deps)
            extra = self._extra_opts(obj)
            if extra is not None:
                opts = pulumi.ResourceOptions.merge(opts, extra)
            res = instantiate(f"{name}-{role}", obj, objects, opts, self._overrides(obj))
            self.resources[role] = res
            if obj["kind"] == "Namespace":
                namespaces.append(res)
            elif obj["kind"] == HELM_RELEASE:
                assert isinstance(res, k8s.helm.v3.Release)
                self.releases.append(res)
            elif not is_builtin(obj):
                custom_before.append(res)

    def of_kind(self, kind: str) -> list[pulumi.CustomResource]:
        return [r for role, r in self.resources.items() if role.startswith(kind.lower() + "-")]


class GpuNodeStack(KilnComponent):
    """Namespaces, the GPU Operator and (RDMA fabrics) the Network Operator, NicClusterPolicy and NADs."""

    kind = GPU_NODE_STACK
    namespaces: list[k8s.core.v1.Namespace]

    def _collect(self) -> None:
        self.namespaces = [r for r in self.of_kind("Namespace") if isinstance(r, k8s.core.v1.Namespace)]


class NcclConfig(KilnComponent):
    """The plan's NCCL environment per pool, as ConfigMaps."""

    kind = NCCL_CONFIG
    config_maps: list[k8s.core.v1.ConfigMap]

    def _collect(self) -> None:
        self.config_maps = [r for r in self.of_kind("ConfigMap") if isinstance(r, k8s.core.v1.ConfigMap)]


class LustreClient(KilnComponent):
    """The Lustre CSI driver (its chart) and static PVs/PVCs for the filesystem and its directories."""

    kind = LUSTRE_CLIENT
    claims: list[k8s.core.v1.PersistentVolumeClaim]

    def _collect(self) -> None:
        self.claims = [r for r in self.of_kind("PersistentVolumeClaim")
                       if isinstance(r, k8s.core.v1.PersistentVolumeClaim)]

    def _outputs(self) -> dict[str, Any]:
        return {"claims": [c.metadata.apply(lambda m: m.name) for c in self.claims]}


class ObjectStore(KilnComponent):
    """SeaweedFS (its chart) or an external endpoint, the S3 credentials Secret from a Pulumi secret, the buckets."""

    kind = OBJECT_STORE
    secrets: list[k8s.core.v1.Secret]

    def __init__(
        self,
        name: str,
        objects: Sequence[Obj],
        plan: Plan,
        secret_key: pulumi.Output[str],
        opts: pulumi.ResourceOptions | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
        jwt_key: pulumi.Output[str] | None = None,
    ) -> None:
        self._plan = plan
        # Output.secret's stub types its argument as Never; the value is an Output[str].
        self._secret_key: pulumi.Output[str] = pulumi.Output.secret(secret_key)  # type: ignore[arg-type]
        self._jwt_key: pulumi.Output[str] | None = (
            None if jwt_key is None else pulumi.Output.secret(jwt_key))  # type: ignore[arg-type]
        super().__init__(name, objects, opts, depends_on)

    def _overrides(self, obj: Obj) -> dict[str, Any] | None:
        annotations = obj["metadata"].get("annotations") or {}
        if obj["kind"] == "Secret" and SECRET_SOURCE_ANNOTATION in annotations:
            plan, secret = self._plan, str(obj["metadata"]["name"])
            if secret == kubernetes().seaweedfs.jwt_secret.value:
                if self._jwt_key is None:
                    raise ValueError(f"Secret {secret} needs the Pulumi config secret {':'.join(jwt_config_key())}")
                return {"stringData": self._jwt_key.apply(seaweedfs_jwt_string_data)}
            return {"stringData": self._secret_key.apply(lambda key: secret_string_data(plan, secret, key))}
        return None

    def _extra_opts(self, obj: Obj) -> pulumi.ResourceOptions | None:
        if obj["kind"] == "Secret":
            return pulumi.ResourceOptions(additional_secret_outputs=["data", "stringData"])
        return None

    def _collect(self) -> None:
        self.secrets = [r for r in self.of_kind("Secret") if isinstance(r, k8s.core.v1.Secret)]


class AcceptanceSuite(KilnComponent):
    """The plan's targets as a ConfigMap, and the Jobs / MPIJobs that run the benchmarks against them.

    Its Pulumi type stays `kiln:acceptance:Acceptance` (a new type would replace deployed resources); the
    class is named apart from kiln.spec.models.Acceptance, the settings model.
    """

    kind = ACCEPTANCE
    jobs: list[pulumi.CustomResource]

    def _collect(self) -> None:
        self.jobs = [*self.of_kind("Job"), *self.of_kind("MPIJob")]


class Monitoring(KilnComponent):
    """kube-prometheus-stack (its chart), the plan's PrometheusRule, SeaweedFS ServiceMonitors, dashboards, and
    the kiln-health DaemonSet on the GPU nodes with its namespace, RBAC and expectations."""

    kind = MONITORING


class DataMover(KilnComponent):
    """The data mover (kiln data): stage Jobs and CronJobs, and the continuous mover's Deployment."""

    kind = DATAFLOW
    workloads: list[pulumi.CustomResource]

    def _collect(self) -> None:
        self.workloads = [*self.of_kind("Job"), *self.of_kind("CronJob"), *self.of_kind("Deployment")]


class TokenStream(KilnComponent):
    """The Kafka token stream: the Strimzi operator, the KRaft node pools, the cluster, its topics and users."""

    kind = TOKEN_STREAM
    topics: list[pulumi.CustomResource]

    def _collect(self) -> None:
        self.topics = self.of_kind("KafkaTopic")
