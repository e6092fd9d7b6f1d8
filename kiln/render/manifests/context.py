"""Shared pieces of every component module: component kinds, the build context, object and plan helpers.

Every object is a plain dict (apiVersion, kind, metadata, ...); `Ctx` carries the plan (the builders' only
input) and stamps the kit's labels on each object's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiln.knowledge.kubernetes import kubernetes
from kiln.plan.model import Host, Plan
from kiln.render.inventory import lustre_client_mount_options

Obj = dict[str, Any]

SECRET_SOURCE_ANNOTATION = "kiln.io/secret-source"
CREATE_WITH_ANNOTATION = "kiln.io/create-with"
S3_SECRET_NAME = "kiln-s3-credentials"
S3_ENDPOINT_CONFIGMAP = "kiln-s3-endpoint"
TARGETS_CONFIGMAP = "kiln-acceptance-targets"
GPU_RESOURCE = "nvidia.com/gpu"

# API groups whose kinds are built into Kubernetes (validated against the API's JSON schemas).
BUILTIN_GROUPS = frozenset({"", "apps", "batch", "storage.k8s.io", "rbac.authorization.k8s.io", "policy",
                            "networking.k8s.io", "scheduling.k8s.io"})


@dataclass(frozen=True, slots=True)
class ComponentKind:
    module: str  # kiln:<module>:<Type>
    type_name: str
    file: str  # kiln render output file

    @property
    def token(self) -> str:
        return f"kiln:{self.module}:{self.type_name}"


GPU_NODE_STACK = ComponentKind("gpu", "GpuNodeStack", "gpu-node-stack.yaml")
NCCL_CONFIG = ComponentKind("nccl", "NcclConfig", "nccl-config.yaml")
LUSTRE_CLIENT = ComponentKind("lustre", "LustreClient", "lustre-client.yaml")
OBJECT_STORE = ComponentKind("objectstore", "ObjectStore", "object-store.yaml")
ACCEPTANCE = ComponentKind("acceptance", "Acceptance", "acceptance.yaml")
MONITORING = ComponentKind("monitoring", "Monitoring", "monitoring.yaml")
DATAFLOW = ComponentKind("dataflow", "DataMover", "dataflow.yaml")
TOKEN_STREAM = ComponentKind("kafka", "TokenStream", "token-stream.yaml")
COMPONENT_KINDS: tuple[ComponentKind, ...] = (
    GPU_NODE_STACK, NCCL_CONFIG, LUSTRE_CLIENT, OBJECT_STORE, MONITORING, ACCEPTANCE, DATAFLOW, TOKEN_STREAM,
)


@dataclass(frozen=True, slots=True)
class Component:
    kind: ComponentKind
    objects: tuple[Obj, ...]


@dataclass(frozen=True, slots=True)
class Ctx:
    plan: Plan

    @property
    def system(self) -> str:
        return self.plan.kubernetes.system_namespace

    @property
    def storage(self) -> str:
        return self.plan.kubernetes.storage_namespace

    @property
    def training(self) -> str:
        return self.plan.kubernetes.training_namespace

    def labels(self, component: ComponentKind, extra: dict[str, str] | None = None) -> dict[str, str]:
        base = {"app.kubernetes.io/part-of": "kiln", "kiln.io/stack": self.plan.stack,
                "kiln.io/component": component.module}
        return {**base, **(extra or {})}

    def meta(self, component: ComponentKind, name: str, namespace: str | None = None,
             labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Obj:
        out: Obj = {"name": name}
        if namespace is not None:
            out["namespace"] = namespace
        out["labels"] = self.labels(component, labels)
        if annotations:
            out["annotations"] = dict(annotations)
        return out


def obj(api_version: str, kind: str, metadata: Obj, **fields: Any) -> Obj:
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


def affinity_exists(key: str) -> Obj:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "Exists"}]}]}}}


def api_group(o: Obj) -> str:
    api = str(o["apiVersion"])
    return api.split("/", 1)[0] if "/" in api else ""


def is_builtin(o: Obj) -> bool:
    """True for kinds built into Kubernetes; False for custom resources (Flux, NVIDIA, Multus, Kubeflow)."""
    return api_group(o) in BUILTIN_GROUPS


def object_role(o: Obj) -> str:
    """The `<role>` of a child resource `<component name>-<role>`: kind, namespace and name."""
    meta = o["metadata"]
    parts = [str(o["kind"]).lower()]
    if meta.get("namespace"):
        parts.append(str(meta["namespace"]))
    parts.append(str(meta["name"]))
    return "-".join(parts)


# ----------------------------------------------------------------------------------------- plan helpers


def pool_label() -> str:
    return kubernetes().labels.pool.value


def role_label() -> str:
    return kubernetes().labels.role.value


def rdma_enabled(plan: Plan) -> bool:
    return plan.fabric != "tcp"


def rail_resource_name(index: int) -> str:
    return kubernetes().network_operator.rail_resource.value.format(index=index)


def rail_resource(index: int) -> str:
    """The extended resource a pod requests for compute rail `index`, e.g. rdma/rdma_rail0."""
    return f"{kubernetes().network_operator.rdma_resource_prefix.value}/{rail_resource_name(index)}"


def rail_resource_format() -> str:
    """The rail resource with an `{index}` placeholder, e.g. rdma/rdma_rail{index}."""
    no = kubernetes().network_operator
    return f"{no.rdma_resource_prefix.value}/{no.rail_resource.value}"


def rail_network_name(index: int) -> str:
    return f"kiln-rail{index}"


def _first_host(plan: Plan, pool: str) -> Host:
    return next(h for h in plan.hosts if h.role == "compute" and h.pool == pool)


def pool_rails(plan: Plan, pool: str) -> list[tuple[int, str, str | None]]:
    """(rail index, interface, RDMA device) of a pool's compute rails, in rail order."""
    nics = [n for n in _first_host(plan, pool).nics if n.is_rail]
    return [(i, n.interface, n.device) for i, n in enumerate(nics)]


def rails_per_pool(plan: Plan) -> dict[str, int]:
    """Compute rails with an RDMA resource, per pool (0 on tcp fabrics)."""
    if not rdma_enabled(plan):
        return {p.name: 0 for p in plan.compute_pools}
    return {p.name: len(pool_rails(plan, p.name)) for p in plan.compute_pools}


def rail_interfaces(plan: Plan) -> dict[int, list[str]]:
    """Rail index → interface names across pools (a pool may name its rails differently)."""
    out: dict[int, list[str]] = {}
    for pool in plan.compute_pools:
        for i, iface, _ in pool_rails(plan, pool.name):
            if iface not in out.setdefault(i, []):
                out[i].append(iface)
    return out


def storage_interfaces(plan: Plan) -> list[str]:
    out: list[str] = []
    for h in plan.hosts:
        if h.role == "compute":
            for n in h.nics:
                if n.carries_storage and n.interface not in out:
                    out.append(n.interface)
    return out


def mgs_spec(plan: Plan) -> str:
    """MGS NIDs in mount syntax: NIDs of one server joined by ',', failover servers by ':'."""
    return ":".join(",".join(server) for server in plan.mgs_nids)


def quantity_GB(tb: float) -> str:
    """A Kubernetes quantity in decimal gigabytes (1 TB = 1000G), never below 1G."""
    return f"{max(1, round(tb * 1000))}G"


def client_mount_options(plan: Plan) -> list[str]:
    """The roles' Lustre client mount options (lustre_client_mounts), less fstab-only ones.

    The list the inventory gives the roles (inventory.lustre_client_mount_options), so a CSI mount and an
    Ansible mount use the same options.
    """
    options = lustre_client_mount_options(plan)
    fstab_only = set(kubernetes().lustre_csi.fstab_only_options.value)
    return [o for o in options if o not in fstab_only]


def s3_endpoint(plan: Plan) -> str:
    """Where pods reach S3: the in-cluster SeaweedFS service, or the external endpoint."""
    os_ = plan.objectstore
    if os_.backend == "seaweedfs":
        return f"http://seaweedfs-s3.{plan.kubernetes.storage_namespace}.svc:{os_.s3_port}"
    return os_.endpoint


def credentials_config_key(plan: Plan) -> tuple[str, str]:
    """(Pulumi config namespace, key) of the S3 secret named by the spec, e.g. ('kiln', 's3SecretKey')."""
    ns, sep, key = plan.objectstore.credentials_secret.partition(":")
    return (ns, key) if sep else ("kiln", ns)


def node_labels(plan: Plan) -> dict[str, dict[str, str]]:
    """Labels each planned Kubernetes node needs for the builder's node selection."""
    out: dict[str, dict[str, str]] = {}
    for h in plan.hosts:
        if h.role == "compute" and h.pool:
            out[h.name] = {pool_label(): h.pool, role_label(): "compute"}
        elif h.role == "objectstore" and plan.objectstore.backend == "seaweedfs":
            out[h.name] = {role_label(): "objectstore"}
    return out
