"""Plan → Kubernetes objects, per component: the one builder behind `kiln render` and the Pulumi program.

Every object is a plain dict (apiVersion, kind, metadata, ...). `kiln render` writes them as YAML for
GitOps; kiln.infra instantiates the very same dicts as pulumi_kubernetes resources, so the two cannot
disagree. Helm charts are Flux `HelmRelease` + `HelmRepository` objects here; the Pulumi program turns
each HelmRelease into a `kubernetes.helm.v3.Release` with `helm_chart()` — same chart, version and values.

Secrets never carry their value here: the S3 credentials Secret is rendered without data and is
annotated with the config key that holds the value; the Pulumi program fills it from a Pulumi secret
(`s3_secret_string_data`), a GitOps user creates it with the command in the annotation.

Pins and rules the plan does not carry live in kiln/knowledge/kubernetes.yaml.
"""

from __future__ import annotations

import ipaddress
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import urlparse

import yaml

from kiln import yamlio
from kiln.plan.model import Host, Layout, Plan, Target
from kiln.plan.serialize import target_dict
from kiln.plan.sizing import device_figures
from kiln.render.inventory import render_inventory
from kiln.spec.models import ClusterSpec
from kiln.spec.types import dns_name

Obj = dict[str, Any]

SECRET_SOURCE_ANNOTATION = "kiln.io/secret-source"
CREATE_WITH_ANNOTATION = "kiln.io/create-with"
S3_SECRET_NAME = "kiln-s3-credentials"
S3_ENDPOINT_CONFIGMAP = "kiln-s3-endpoint"
TARGETS_CONFIGMAP = "kiln-acceptance-targets"
GPU_RESOURCE = "nvidia.com/gpu"
CSI_SOCKET_DIR = "/var/lib/kubelet/plugins/lustre-csi.hpe.com"

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
COMPONENT_KINDS: tuple[ComponentKind, ...] = (GPU_NODE_STACK, NCCL_CONFIG, LUSTRE_CLIENT, OBJECT_STORE, ACCEPTANCE)


@dataclass(frozen=True, slots=True)
class Component:
    kind: ComponentKind
    objects: tuple[Obj, ...]


@dataclass(frozen=True, slots=True)
class HelmChart:
    """What a Flux HelmRelease (with its HelmRepository) says about a chart: the Pulumi Release's inputs."""

    release_name: str
    namespace: str
    chart: str
    version: str
    repository_url: str
    values: Obj


# --------------------------------------------------------------------------------------------- knowledge


@cache
def knowledge() -> dict[str, Any]:
    """kiln/knowledge/kubernetes.yaml: chart and image pins with source and reason."""
    text = resources.files("kiln.knowledge").joinpath("kubernetes.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict), "kubernetes.yaml must hold a mapping"
    return data


def _k(*path: str) -> Any:
    node: Any = knowledge()
    for part in path:
        node = node[part]
    if isinstance(node, dict) and "value" in node:
        return node["value"]
    return node


# ----------------------------------------------------------------------------------------- plan helpers


def pool_label() -> str:
    return str(_k("labels", "pool"))


def role_label() -> str:
    return str(_k("labels", "role"))


def rdma_enabled(plan: Plan) -> bool:
    return plan.fabric != "tcp"


def rail_resource(index: int) -> str:
    """The extended resource a pod requests for compute rail `index`, e.g. rdma/rdma_rail0."""
    return f"{_k('network_operator', 'rdma_resource_prefix')}/{rail_resource_name(index)}"


def rail_resource_format() -> str:
    """The rail resource with an `{index}` placeholder, e.g. rdma/rdma_rail{index}."""
    return f"{_k('network_operator', 'rdma_resource_prefix')}/{_k('network_operator', 'rail_resource')}"


def rail_resource_name(index: int) -> str:
    return str(_k("network_operator", "rail_resource")).format(index=index)


def _first_host(plan: Plan, pool: str) -> Host:
    return next(h for h in plan.hosts if h.role == "compute" and h.pool == pool)


def pool_rails(plan: Plan, pool: str) -> list[tuple[int, str, str | None]]:
    """(rail index, interface, RDMA device) of a pool's compute rails, in rail order."""
    nics = [n for n in _first_host(plan, pool).nics if n.role == "compute"]
    return [(i, n.interface, n.device) for i, n in enumerate(nics)]


def rails_per_pool(plan: Plan, spec: ClusterSpec) -> dict[str, int]:
    """Compute rails with an RDMA resource, per pool (0 on tcp fabrics)."""
    if not rdma_enabled(plan):
        return {p.name: 0 for p in spec.compute.pools}
    return {p.name: len(pool_rails(plan, p.name)) for p in spec.compute.pools}


def _rail_interfaces(plan: Plan, spec: ClusterSpec) -> dict[int, list[str]]:
    """Rail index → interface names across pools (a pool may name its rails differently)."""
    out: dict[int, list[str]] = {}
    for pool in spec.compute.pools:
        for i, iface, _ in pool_rails(plan, pool.name):
            if iface not in out.setdefault(i, []):
                out[i].append(iface)
    return out


def _storage_interfaces(plan: Plan) -> list[str]:
    out: list[str] = []
    for h in plan.hosts:
        if h.role == "compute":
            for n in h.nics:
                if n.role == "storage" and n.interface not in out:
                    out.append(n.interface)
    return out


def mgs_spec(plan: Plan) -> str:
    """MGS NIDs in mount syntax: NIDs of one server joined by ',', failover servers by ':'."""
    return ":".join(",".join(server) for server in plan.mgs_nids)


def ost_capacity_TB(plan: Plan, spec: ClusterSpec) -> float:
    """Raw OST capacity: OSTs in the plan's target map × drives per OST × drive capacity."""
    osts = sum(1 for t in plan.targets_map if t.kind == "ost")
    group = spec.lustre.oss.osts
    return osts * group.devices_per_target * device_figures(group.device).capacity_TB


def quantity_GB(tb: float) -> str:
    """A Kubernetes quantity in decimal gigabytes (1 TB = 1000G), never below 1G."""
    return f"{max(1, round(tb * 1000))}G"


def client_mount_options(plan: Plan, spec: ClusterSpec) -> list[str]:
    """The roles' Lustre client mount options (lustre_client_mounts), less fstab-only ones.

    Read from the inventory the roles consume so a CSI mount and an Ansible mount use the same options.
    """
    files = render_inventory(plan, spec)
    clients = yamlio.load_inventory(files["group_vars/kiln_lustre_clients.yml"])
    options: list[str] = list(clients["lustre_client_mounts"][0]["options"])
    fstab_only = set(_k("lustre_csi", "fstab_only_options"))
    return [o for o in options if o not in fstab_only]


def s3_endpoint(plan: Plan, spec: ClusterSpec) -> str:
    """Where pods reach S3: the in-cluster SeaweedFS service, or the external endpoint."""
    os_ = plan.objectstore
    if os_.backend == "seaweedfs":
        return f"http://seaweedfs-s3.{spec.kubernetes.storage_namespace}.svc:{os_.s3_port}"
    return os_.endpoint


def s3_secret_string_data(plan: Plan, secret_key: str) -> dict[str, str]:
    """The S3 credentials Secret's data; only the Pulumi program calls this, with a Pulumi secret's value."""
    return {"AWS_ACCESS_KEY_ID": plan.objectstore.access_key_id, "AWS_SECRET_ACCESS_KEY": secret_key}


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


# ---------------------------------------------------------------------------------------- object helpers


@dataclass(frozen=True, slots=True)
class _Ctx:
    plan: Plan
    spec: ClusterSpec

    @property
    def system(self) -> str:
        return self.spec.kubernetes.system_namespace

    @property
    def storage(self) -> str:
        return self.spec.kubernetes.storage_namespace

    @property
    def training(self) -> str:
        return self.spec.kubernetes.training_namespace

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


def _obj(api_version: str, kind: str, metadata: Obj, **fields: Any) -> Obj:
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


def _affinity_exists(key: str) -> Obj:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "Exists"}]}]}}}


def api_group(obj: Obj) -> str:
    api = str(obj["apiVersion"])
    return api.split("/", 1)[0] if "/" in api else ""


def is_builtin(obj: Obj) -> bool:
    """True for kinds built into Kubernetes; False for custom resources (Flux, NVIDIA, Multus, Kubeflow)."""
    return api_group(obj) in BUILTIN_GROUPS


def object_role(obj: Obj) -> str:
    """The `<role>` of a child resource `<component name>-<role>`: kind, namespace and name."""
    meta = obj["metadata"]
    parts = [str(obj["kind"]).lower()]
    if meta.get("namespace"):
        parts.append(str(meta["namespace"]))
    parts.append(str(meta["name"]))
    return "-".join(parts)


def helm_chart(release: Obj, objects: Sequence[Obj]) -> HelmChart:
    """The chart a Flux HelmRelease installs, resolved against its HelmRepository among `objects`."""
    spec = release["spec"]
    chart = spec["chart"]["spec"]
    ref = chart["sourceRef"]
    ns = release["metadata"]["namespace"]
    repo = next(o for o in objects if o["kind"] == "HelmRepository" and o["metadata"]["name"] == ref["name"]
                and o["metadata"].get("namespace") == ref.get("namespace", ns))
    return HelmChart(
        release_name=str(spec.get("releaseName", release["metadata"]["name"])),
        namespace=str(spec.get("targetNamespace", ns)),
        chart=str(chart["chart"]),
        version=str(chart["version"]),
        repository_url=str(repo["spec"]["url"]),
        values=dict(spec.get("values", {})),
    )


# ------------------------------------------------------------------------------------------ GpuNodeStack


def _namespaces(c: _Ctx) -> list[Obj]:
    privileged = {"pod-security.kubernetes.io/enforce": "privileged"}
    out = []
    for ns, extra in ((c.system, privileged), (c.storage, privileged), (c.training, {})):
        out.append(_obj("v1", "Namespace", c.meta(GPU_NODE_STACK, ns, labels=extra)))
    return out


def _helm_repository(c: _Ctx, component: ComponentKind, name: str) -> Obj:
    flux = knowledge()["flux"]
    spec = {"interval": flux["repository_interval"], "url": knowledge()["helm_repositories"][name]["url"]}
    return _obj(flux["helm_repository_api"], "HelmRepository", c.meta(component, name, c.system), spec=spec)


def _helm_release(c: _Ctx, component: ComponentKind, chart_key: str, values: Obj) -> Obj:
    flux = knowledge()["flux"]
    chart = knowledge()["charts"][chart_key]
    spec = {
        "interval": flux["interval"],
        "releaseName": chart["release"],
        "chart": {"spec": {
            "chart": chart["chart"], "version": chart["version"],
            "sourceRef": {"kind": "HelmRepository", "name": chart["repository"], "namespace": c.system},
        }},
        "install": {"crds": "CreateReplace"},
        "upgrade": {"crds": "CreateReplace"},
        "values": values,
    }
    return _obj(flux["helm_release_api"], "HelmRelease", c.meta(component, chart["release"], c.system), spec=spec)


def gpu_operator_values(plan: Plan) -> Obj:
    """GPU Operator chart values from the plan: driver, GPUDirect RDMA, GDS, DCGM exporter."""
    rdma = rdma_enabled(plan)
    return {
        "nfd": {"enabled": bool(_k("gpu_operator", "nfd"))},
        "driver": {
            "enabled": bool(_k("gpu_operator", "driver_enabled")),
            "rdma": {"enabled": rdma, "useHostMofed": bool(_k("gpu_operator", "use_host_mofed"))},
        },
        "gds": {"enabled": rdma and bool(_k("gpu_operator", "gds_on_rdma"))},
        "dcgmExporter": {"enabled": bool(_k("gpu_operator", "dcgm_exporter"))},
    }


def network_operator_values() -> Obj:
    return {
        "deployCR": False,  # the NicClusterPolicy is built below from the plan
        "nfd": {"enabled": not bool(_k("gpu_operator", "nfd"))},
        "sriovNetworkOperator": {"enabled": False},
    }


def rdma_device_plugin_config(plan: Plan, spec: ClusterSpec) -> Obj:
    """rdmaSharedDevicePlugin config: one shared-device resource per compute rail, selected by ifName."""
    hca_max = int(_k("network_operator", "rdma_hca_max"))
    return {"configList": [
        {"resourceName": rail_resource_name(i), "rdmaHcaMax": hca_max, "selectors": {"ifNames": ifaces}}
        for i, ifaces in sorted(_rail_interfaces(plan, spec).items())
    ]}


def _nic_cluster_policy(c: _Ctx) -> Obj:
    imgs = knowledge()["network_operator"]["images"]

    def comp(key: str) -> Obj:
        ref = imgs[key]
        return {"image": ref["image"], "repository": ref["repository"], "version": ref["version"]}

    secondary: Obj = {"multus": comp("multus"), "cniPlugins": comp("cni_plugins")}
    if c.plan.fabric == "infiniband":
        secondary["ipoib"] = comp("ipoib")
    secondary["ipamPlugin"] = comp("whereabouts")
    spec: Obj = {"nodeAffinity": _affinity_exists(c.spec.kubernetes.gpu_node_label)["nodeAffinity"]}
    config = rdma_device_plugin_config(c.plan, c.spec)
    if config["configList"]:
        spec["rdmaSharedDevicePlugin"] = {**comp("rdma_shared_device_plugin"),
                                          "config": json.dumps(config, indent=2)}
    spec["secondaryNetwork"] = secondary
    name = str(_k("network_operator", "nic_cluster_policy_name"))
    return _obj("mellanox.com/v1alpha1", "NicClusterPolicy", c.meta(GPU_NODE_STACK, name), spec=spec)


def _storage_ipam(c: _Ctx) -> Obj:
    """Whereabouts range on the storage subnet, above every address the plan gave a host."""
    net = ipaddress.ip_network(c.spec.networks.storage)
    used = [int(ipaddress.ip_address(n.address)) for h in c.plan.hosts for n in h.nics if n.address]
    start = max(used) + 1 if used else int(net[2])
    end = int(net[-2])
    if start > end:
        raise ValueError(f"storage subnet {net} has no addresses left for pods after the planned hosts")
    addr = type(net.network_address)
    return {"type": "whereabouts", "range": str(net), "range_start": str(addr(start)), "range_end": str(addr(end))}


def _nad(c: _Ctx, name: str, master: str, ipam: Obj | None) -> Obj:
    kind = "ipoib" if c.plan.fabric == "infiniband" else "macvlan"
    config: Obj = {"cniVersion": str(_k("network_operator", "cni_version")), "name": name, "type": kind,
                   "master": master}
    if kind == "macvlan":
        config["mode"] = "bridge"
    if ipam is not None:
        config["ipam"] = ipam
    return _obj("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", c.meta(GPU_NODE_STACK, name, c.training),
                spec={"config": json.dumps(config, indent=2)})


def rail_network_name(index: int) -> str:
    return f"kiln-rail{index}"


def _networks(c: _Ctx) -> list[Obj]:
    """Secondary networks: one per storage interface (addresses on the storage subnet), one per rail.

    Rails carry no addresses in the plan: their NADs have no IPAM (IB verbs need none); RoCE users add
    one (docs/pulumi.md).
    """
    out = []
    ipam = _storage_ipam(c)
    for iface in _storage_interfaces(c.plan):
        out.append(_nad(c, f"kiln-storage-{dns_name(iface)}", iface, ipam))
    for i, ifaces in sorted(_rail_interfaces(c.plan, c.spec).items()):
        out.append(_nad(c, rail_network_name(i), ifaces[0], None))
    return out


def gpu_node_stack(c: _Ctx) -> list[Obj]:
    objs = _namespaces(c)
    objs.append(_helm_repository(c, GPU_NODE_STACK, "nvidia"))
    objs.append(_helm_release(c, GPU_NODE_STACK, "gpu_operator", gpu_operator_values(c.plan)))
    if rdma_enabled(c.plan):
        objs.append(_helm_release(c, GPU_NODE_STACK, "network_operator", network_operator_values()))
        objs.append(_nic_cluster_policy(c))
        objs.extend(_networks(c))
    return objs


# ----------------------------------------------------------------------------------------------- NCCL


def nccl_configmap_name(pool: str) -> str:
    return f"kiln-nccl-{dns_name(pool)}"


def nccl_config(c: _Ctx) -> list[Obj]:
    """One ConfigMap per pool: the plan's NCCL environment as keys (envFrom) and as /etc/nccl.conf."""
    out = []
    for pool in c.plan.nccl:
        data = dict(pool.env)
        data["nccl.conf"] = "".join(f"{k}={v}\n" for k, v in pool.env.items())
        meta = c.meta(NCCL_CONFIG, nccl_configmap_name(pool.pool), c.training, labels={pool_label(): pool.pool})
        out.append(_obj("v1", "ConfigMap", meta, data=data))
    return out


# ------------------------------------------------------------------------------------------------ Lustre


def _csi_driver(c: _Ctx) -> Obj:
    spec = {"attachRequired": False, "podInfoOnMount": False, "volumeLifecycleModes": ["Persistent"]}
    return _obj("storage.k8s.io/v1", "CSIDriver", c.meta(LUSTRE_CLIENT, str(_k("lustre_csi", "driver"))), spec=spec)


def _csi_node(c: _Ctx) -> Obj:
    kb = knowledge()["lustre_csi"]
    sel = {"app.kubernetes.io/name": "lustre-csi-node"}
    port = int(kb["health_port"])
    socket = {"name": "socket-dir", "mountPath": "/csi"}
    pod = {
        "affinity": _affinity_exists(pool_label()),
        "priorityClassName": "system-node-critical",
        "initContainers": [{"name": "init-socket", "image": kb["init_image"],
                            "command": ["sh", "-c", "rm -f /csi/csi.sock"], "volumeMounts": [socket]}],
        "containers": [
            {"name": "csi-node-driver", "image": f"{kb['image']['repository']}:{kb['image']['version']}",
             "args": ["-v=2", "--endpoint=$(CSI_ENDPOINT)", "--nodeid=$(KUBE_NODE_NAME)"],
             "env": [{"name": "CSI_ENDPOINT", "value": "unix:///csi/csi.sock"},
                     {"name": "KUBE_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
             "ports": [{"containerPort": port, "name": "healthz", "protocol": "TCP"}],
             "livenessProbe": {"httpGet": {"path": "/healthz", "port": "healthz"}, "initialDelaySeconds": 60,
                               "periodSeconds": 30, "timeoutSeconds": 10, "failureThreshold": 5},
             # NOTE: privileged for the Bidirectional mount propagation into the kubelet's pod dirs.
             "securityContext": {"privileged": True},
             "volumeMounts": [socket,
                              {"name": "kubelet-dir", "mountPath": "/var/lib/kubelet/",
                               "mountPropagation": "Bidirectional"},
                              {"name": "host-dev", "mountPath": "/dev"}]},
            {"name": "liveness-probe", "image": kb["livenessprobe_image"],
             "args": ["--csi-address=/csi/csi.sock", "--probe-timeout=120s", f"--health-port={port}", "--v=2"],
             "volumeMounts": [socket]},
            {"name": "node-driver-registrar", "image": kb["registrar_image"],
             "args": ["--csi-address=/csi/csi.sock", f"--kubelet-registration-path={CSI_SOCKET_DIR}/csi.sock",
                      "--v=2"],
             "volumeMounts": [socket, {"name": "registration-dir", "mountPath": "/registration"}]},
        ],
        "volumes": [
            {"name": "socket-dir", "hostPath": {"path": CSI_SOCKET_DIR, "type": "DirectoryOrCreate"}},
            {"name": "registration-dir", "hostPath": {"path": "/var/lib/kubelet/plugins_registry/",
                                                      "type": "Directory"}},
            {"name": "kubelet-dir", "hostPath": {"path": "/var/lib/kubelet/", "type": "Directory"}},
            {"name": "host-dev", "hostPath": {"path": "/dev", "type": "Directory"}},
        ],
    }
    spec = {"selector": {"matchLabels": sel},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
            "template": {"metadata": {"labels": c.labels(LUSTRE_CLIENT, sel)}, "spec": pod}}
    return _obj("apps/v1", "DaemonSet", c.meta(LUSTRE_CLIENT, "lustre-csi-node", c.storage, labels=sel), spec=spec)


def lustre_volume_name(plan: Plan, layout: Layout | None) -> str:
    slug = "root" if layout is None else dns_name(layout.path)
    return f"lustre-{dns_name(plan.fsname)}-{slug}"


def lustre_claim_name(layout: Layout | None) -> str:
    return "lustre-root" if layout is None else f"lustre-{dns_name(layout.path)}"


def _lustre_volume(c: _Ctx, layout: Layout | None, capacity: str, options: list[str]) -> list[Obj]:
    path = "" if layout is None else layout.path.rstrip("/")
    handle = f"{mgs_spec(c.plan)}:/{c.plan.fsname}{path}"
    pv_name = lustre_volume_name(c.plan, layout)
    pvc_name = lustre_claim_name(layout)
    purpose = "filesystem" if layout is None else layout.purpose
    annotations = {"kiln.io/lustre-path": path or "/", "kiln.io/mount-path": layout.mount_path if layout else
                   c.plan.mount_point}
    if layout is not None:
        annotations["kiln.io/layout"] = layout.setstripe
    labels = {"kiln.io/purpose": purpose}
    pv_spec = {
        "capacity": {"storage": capacity},
        "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "volumeMode": "Filesystem",
        "mountOptions": list(options),
        "claimRef": {"kind": "PersistentVolumeClaim", "namespace": c.training, "name": pvc_name},
        "csi": {"driver": str(_k("lustre_csi", "driver")), "volumeHandle": handle, "fsType": "lustre",
                "volumeAttributes": {"mgsNids": mgs_spec(c.plan), "fsName": c.plan.fsname, "fileset": path or "/"}},
    }
    pvc_spec = {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv_name,
                "resources": {"requests": {"storage": capacity}}}
    return [
        _obj("v1", "PersistentVolume", c.meta(LUSTRE_CLIENT, pv_name, labels=labels, annotations=annotations),
             spec=pv_spec),
        _obj("v1", "PersistentVolumeClaim", c.meta(LUSTRE_CLIENT, pvc_name, c.training, labels=labels), spec=pvc_spec),
    ]


def lustre_client(c: _Ctx) -> list[Obj]:
    capacity = quantity_GB(ost_capacity_TB(c.plan, c.spec))
    options = client_mount_options(c.plan, c.spec)
    objs = [_csi_driver(c), _csi_node(c)]
    for layout in (None, *c.plan.layouts):
        objs.extend(_lustre_volume(c, layout, capacity, options))
    return objs


# ------------------------------------------------------------------------------------------- ObjectStore


def _s3_secret(c: _Ctx, namespace: str) -> Obj:
    """The credentials Secret, without data: Pulumi fills it from a Pulumi secret; GitOps users create it."""
    ns_key = ":".join(credentials_config_key(c.plan))
    create = (f"kubectl -n {namespace} create secret generic {S3_SECRET_NAME} "
              f"--from-literal=AWS_ACCESS_KEY_ID={c.plan.objectstore.access_key_id} "
              "--from-literal=AWS_SECRET_ACCESS_KEY=\"$KILN_S3_SECRET_KEY\" "
              "--dry-run=client -o yaml | kubectl apply -f -")
    # NOTE: Flux creates the data-less Secret only if it is absent and never updates it, so the data an
    # operator puts in it is kept; Pulumi ignores the annotation.
    meta = c.meta(OBJECT_STORE, S3_SECRET_NAME, namespace,
                  annotations={SECRET_SOURCE_ANNOTATION: f"pulumi-config:{ns_key}", CREATE_WITH_ANNOTATION: create,
                               "kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"})
    return _obj("v1", "Secret", meta, type="Opaque")


def _s3_endpoint_configmap(c: _Ctx, namespace: str) -> Obj:
    os_ = c.plan.objectstore
    data = {"S3_ENDPOINT": s3_endpoint(c.plan, c.spec), "S3_BACKEND": os_.backend,
            "S3_BUCKETS": " ".join(b.name for b in os_.buckets)}
    return _obj("v1", "ConfigMap", c.meta(OBJECT_STORE, S3_ENDPOINT_CONFIGMAP, namespace), data=data)


def _service(c: _Ctx, name: str, selector: dict[str, str], ports: list[tuple[str, int]], headless: bool) -> Obj:
    spec: Obj = {"selector": selector, "ports": [{"name": n, "port": p, "targetPort": p} for n, p in ports]}
    if headless:
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = True
    return _obj("v1", "Service", c.meta(OBJECT_STORE, name, c.storage, labels=selector), spec=spec)


def _statefulset(c: _Ctx, name: str, replicas: int, service: str, container: Obj, storage: str | None,
                 pod_extra: Obj | None = None) -> Obj:
    sel = {"app.kubernetes.io/name": name}
    pod: Obj = {"containers": [container], **(pod_extra or {})}
    spec: Obj = {"serviceName": service, "replicas": replicas, "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": sel},
                 "template": {"metadata": {"labels": c.labels(OBJECT_STORE, sel)}, "spec": pod}}
    if storage is not None:
        pvc: Obj = {"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}}
        if c.spec.kubernetes.storage_class:
            pvc["spec"]["storageClassName"] = c.spec.kubernetes.storage_class
        spec["volumeClaimTemplates"] = [pvc]
        container.setdefault("volumeMounts", []).append({"name": "data", "mountPath": "/data"})
    return _obj("apps/v1", "StatefulSet", c.meta(OBJECT_STORE, name, c.storage, labels=sel), spec=spec)


_POD_ENV = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]


def _weed(name: str, image: str, args: list[str], ports: list[tuple[str, int]]) -> Obj:
    return {"name": name, "image": image, "command": ["weed"], "args": args, "env": list(_POD_ENV),
            "ports": [{"name": n, "containerPort": p} for n, p in ports]}


def _seaweedfs(c: _Ctx) -> list[Obj]:
    """Master, volume, filer and S3 StatefulSets with their Services, sized from the plan's object store."""
    os_ = c.plan.objectstore
    kb = knowledge()["seaweedfs"]
    image = f"{kb['image']}:{os_.version}"
    ports = kb["ports"]
    grpc = int(_k("seaweedfs", "grpc_offset"))
    ns = c.storage
    nodes = len(os_.hosts)
    rule = _k("seaweedfs", "masters")
    masters = int(rule["single"]) if nodes < int(rule["quorum_nodes"]) else int(rule["quorum_nodes"])
    peers = ",".join(f"seaweedfs-master-{i}.seaweedfs-master.{ns}:{ports['master']}" for i in range(masters))
    meta_size = str(_k("seaweedfs", "metadata_volume"))
    per_node = quantity_GB(os_.raw_capacity_TB / nodes)
    filer = f"seaweedfs-filer.{ns}:{ports['filer']}"

    def svc_ports(role: str) -> list[tuple[str, int]]:
        return [("http", ports[role]), ("grpc", ports[role] + grpc)]

    def sel(role: str) -> dict[str, str]:
        return {"app.kubernetes.io/name": f"seaweedfs-{role}"}

    master = _weed("master", image, ["master", f"-ip=$(POD_NAME).seaweedfs-master.{ns}", "-ip.bind=0.0.0.0",
                                     f"-port={ports['master']}", "-mdir=/data", f"-peers={peers}",
                                     f"-defaultReplication={os_.replication}"], svc_ports("master"))
    volume = _weed("volume", image, ["volume", "-dir=/data", "-max=0", f"-mserver={peers}",
                                     f"-port={ports['volume']}", f"-ip=$(POD_NAME).seaweedfs-volume.{ns}",
                                     "-ip.bind=0.0.0.0"], svc_ports("volume"))
    filer_c = _weed("filer", image, ["filer", f"-master={peers}", f"-ip=$(POD_NAME).seaweedfs-filer.{ns}",
                                     "-ip.bind=0.0.0.0", f"-port={ports['filer']}", "-defaultStoreDir=/data"],
                    svc_ports("filer"))
    # One volume server per object-store node of the plan, on nodes labelled with that role.
    spread = {"affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": role_label(), "operator": "In", "values": ["objectstore"]}]}]}},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": sel("volume")}, "topologyKey": "kubernetes.io/hostname"}]},
    }}
    # NOTE: the identity file is written at start from the Secret's env, so the secret never sits in a
    # ConfigMap or an argument; newer SeaweedFS releases also read AWS_* from the environment directly.
    s3_script = (
        'umask 077; printf \'{"identities":[{"name":"kiln","credentials":[{"accessKey":"%s","secretKey":"%s"}],'
        '"actions":["Admin","Read","Write","List","Tagging"]}]}\' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" '
        f"> /tmp/s3.json && exec weed s3 -filer={filer} -port={os_.s3_port} -ip.bind=0.0.0.0 -config=/tmp/s3.json"
    )
    s3 = {"name": "s3", "image": image, "command": ["/bin/sh", "-c"], "args": [s3_script],
          "envFrom": [{"secretRef": {"name": S3_SECRET_NAME}}],
          "ports": [{"name": "s3", "containerPort": os_.s3_port}],
          "readinessProbe": {"tcpSocket": {"port": os_.s3_port}, "periodSeconds": 10}}
    return [
        _service(c, "seaweedfs-master", sel("master"), svc_ports("master"), headless=True),
        _statefulset(c, "seaweedfs-master", masters, "seaweedfs-master", master, meta_size),
        _service(c, "seaweedfs-volume", sel("volume"), svc_ports("volume"), headless=True),
        _statefulset(c, "seaweedfs-volume", nodes, "seaweedfs-volume", volume, per_node, spread),
        _service(c, "seaweedfs-filer", sel("filer"), svc_ports("filer"), headless=False),
        _statefulset(c, "seaweedfs-filer", 1, "seaweedfs-filer", filer_c, meta_size),
        _service(c, "seaweedfs-s3", sel("s3"), [("s3", os_.s3_port)], headless=False),
        _statefulset(c, "seaweedfs-s3", nodes, "seaweedfs-s3", s3, None),
    ]


def _bucket_job(c: _Ctx) -> Obj:
    os_ = c.plan.objectstore
    buckets = " ".join(shlex.quote(b.name) for b in os_.buckets)
    script = (
        "set -eu\n"
        f"for b in {buckets}; do\n"
        '  if aws --endpoint-url "$S3_ENDPOINT" s3api head-bucket --bucket "$b" 2>/dev/null; then\n'
        '    echo "bucket $b exists"\n'
        "  else\n"
        '    aws --endpoint-url "$S3_ENDPOINT" s3api create-bucket --bucket "$b" && echo "bucket $b created"\n'
        "  fi\n"
        "done\n"
    )
    container = {"name": "buckets", "image": str(_k("seaweedfs", "bucket_image")), "command": ["/bin/bash", "-c"],
                 "args": [script],
                 "envFrom": [{"secretRef": {"name": S3_SECRET_NAME}},
                             {"configMapRef": {"name": S3_ENDPOINT_CONFIGMAP}}],
                 "env": [{"name": "AWS_DEFAULT_REGION", "value": "us-east-1"}]}
    spec = {"backoffLimit": 10,
            "template": {"metadata": {"labels": c.labels(OBJECT_STORE, {"app.kubernetes.io/name": "kiln-buckets"})},
                         "spec": {"restartPolicy": "OnFailure", "containers": [container]}}}
    return _obj("batch/v1", "Job", c.meta(OBJECT_STORE, "kiln-buckets", c.storage), spec=spec)


def object_store(c: _Ctx) -> list[Obj]:
    objs: list[Obj] = []
    for ns in (c.storage, c.training):
        objs.append(_s3_secret(c, ns))
        objs.append(_s3_endpoint_configmap(c, ns))
    if c.plan.objectstore.backend == "seaweedfs":
        objs.extend(_seaweedfs(c))
    objs.append(_bucket_job(c))
    return objs


# -------------------------------------------------------------------------------------------- Acceptance


def target_key(t: Target, field: str) -> str:
    """ConfigMap key of one threshold, e.g. kiln_pool_gpu.fabric.nccl_allreduce_intra.fail."""
    return f"{t.group or 'all'}.{t.check}.{field}"


def _targets_configmap(c: _Ctx) -> Obj:
    rows = [json.dumps(target_dict(t), sort_keys=True, ensure_ascii=False) for t in c.plan.targets]
    data = {"targets.json": "[\n" + ",\n".join(rows) + "\n]\n"}
    for t in c.plan.targets:
        for field in ("expected", "warn", "fail"):
            data[target_key(t, field)] = f"{getattr(t, field):g}"
    meta = c.meta(ACCEPTANCE, TARGETS_CONFIGMAP, c.training, annotations={"kiln.io/plan-digest": c.plan.spec_digest})
    return _obj("v1", "ConfigMap", meta, data=data)


def _target(plan: Plan, check: str, group: str) -> Target | None:
    return next((t for t in plan.targets if t.check == check and t.group == group), None)


def _threshold_env(t: Target) -> list[Obj]:
    return [{"name": f"KILN_{field.upper()}",
             "valueFrom": {"configMapKeyRef": {"name": TARGETS_CONFIGMAP, "key": target_key(t, field)}}}
            for field in ("expected", "warn", "fail")]


def _judge(check: str, metric: str, unit: str, value_cmd: str) -> str:
    """Shell lines that print the measured value, the plan's thresholds and a verdict (exit 1 on FAIL)."""
    return (
        f"value=$({value_cmd})\n"
        f'echo "kiln: check={check} {metric}=${{value:-none}} {unit} expected=$KILN_EXPECTED '
        f'warn=$KILN_WARN fail=$KILN_FAIL"\n'
        "awk -v v=\"$value\" -v w=\"$KILN_WARN\" -v f=\"$KILN_FAIL\" 'BEGIN {\n"
        '  if (v == "") { print "kiln: FAIL (no result)"; exit 1 }\n'
        '  if (v + 0 < f + 0) { print "kiln: FAIL"; exit 1 }\n'
        '  if (v + 0 < w + 0) { print "kiln: WARN" } else { print "kiln: PASS" } }\'\n'
    )


def _gpu_pod(c: _Ctx, pool: str, gpus: int, container: Obj) -> tuple[Obj, dict[str, str]]:
    """A GPU pod spec on `pool`: its GPUs and every rail's RDMA resource, NCCL env, shm; and annotations."""
    limits: dict[str, Any] = {GPU_RESOURCE: gpus}
    annotations: dict[str, str] = {}
    if rdma_enabled(c.plan):
        rails = pool_rails(c.plan, pool)
        for i, _, _ in rails:
            limits[rail_resource(i)] = 1
        if rails:
            annotations["k8s.v1.cni.cncf.io/networks"] = ",".join(rail_network_name(i) for i, _, _ in rails)
    container = {**container,
                 "envFrom": [{"configMapRef": {"name": nccl_configmap_name(pool)}}],
                 "resources": {"limits": dict(limits), "requests": dict(limits)},
                 "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
                 "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                                  {"name": "targets", "mountPath": "/etc/kiln", "readOnly": True}]}
    pod = {"nodeSelector": {pool_label(): pool},
           "containers": [container],
           "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}},
                       {"name": "targets", "configMap": {"name": TARGETS_CONFIGMAP}}]}
    return pod, annotations


def _job(c: _Ctx, name: str, pod: Obj, annotations: dict[str, str] | None = None, backoff: int = 0) -> Obj:
    sel = {"app.kubernetes.io/name": name}
    template_meta: Obj = {"labels": c.labels(ACCEPTANCE, sel)}
    if annotations:
        template_meta["annotations"] = annotations
    spec = {"backoffLimit": backoff,
            "template": {"metadata": template_meta, "spec": {"restartPolicy": "Never", **pod}}}
    # NOTE: skipAwait keeps `pulumi up` from blocking on the benchmarks; Flux and kubectl ignore it.
    meta = c.meta(ACCEPTANCE, name, c.training, labels=sel, annotations={"pulumi.com/skipAwait": "true"})
    return _obj("batch/v1", "Job", meta, spec=spec)


def _nccl_intra(c: _Ctx, pool: str, gpus: int, t: Target) -> Obj:
    binary = "/opt/nccl_tests/build/all_reduce_perf"
    args = f"{_k('acceptance', 'nccl_tests_args')} -g {gpus}"
    script = ("set -eu\n"
              f"{binary} {args} | tee /tmp/nccl.log\n"
              + _judge(t.check, t.metric, t.unit, "awk '/Avg bus bandwidth/ {print $NF}' /tmp/nccl.log"))
    container = {"name": "nccl", "image": str(_k("acceptance", "nccl_tests_image")),
                 "command": ["/bin/bash", "-c"], "args": [script], "env": _threshold_env(t)}
    pod, annotations = _gpu_pod(c, pool, gpus, container)
    return _job(c, f"kiln-nccl-intra-{dns_name(pool)}", pod, annotations)


def _nccl_inter(c: _Ctx, pool: str, nodes: int, gpus: int, t: Target) -> Obj:
    """MPIJob across every node of the pool: one worker per node, one rank per GPU."""
    binary = "/opt/nccl_tests/build/all_reduce_perf"
    env_flags = " ".join(f"-x {k}" for k in next(p for p in c.plan.nccl if p.pool == pool).env)
    script = ("set -eu\n"
              f"mpirun --allow-run-as-root -np {nodes * gpus} -npernode {gpus} --bind-to none {env_flags} "
              f"{binary} {_k('acceptance', 'nccl_tests_args')} -g 1 | tee /tmp/nccl.log\n"
              + _judge(t.check, t.metric, t.unit, "awk '/Avg bus bandwidth/ {print $NF}' /tmp/nccl.log"))
    image = str(_k("acceptance", "nccl_tests_image"))
    sel = {"app.kubernetes.io/name": f"kiln-nccl-inter-{dns_name(pool)}"}
    launcher = {"name": "launcher", "image": image, "command": ["/bin/bash", "-c"], "args": [script],
                "envFrom": [{"configMapRef": {"name": nccl_configmap_name(pool)}}], "env": _threshold_env(t)}
    worker, annotations = _gpu_pod(c, pool, gpus, {"name": "worker", "image": image,
                                                    "command": ["/usr/sbin/sshd", "-De"]})
    worker["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": sel}, "topologyKey": "kubernetes.io/hostname"}]}}
    worker_meta: Obj = {"labels": c.labels(ACCEPTANCE, sel)}
    if annotations:
        worker_meta["annotations"] = annotations
    spec = {
        "slotsPerWorker": gpus,
        "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"metadata": {"labels": c.labels(ACCEPTANCE)},
                                                     "spec": {"restartPolicy": "Never", "containers": [launcher]}}},
            "Worker": {"replicas": nodes, "template": {"metadata": worker_meta, "spec": worker}},
        },
    }
    return _obj("kubeflow.org/v2beta1", "MPIJob",
                c.meta(ACCEPTANCE, f"kiln-nccl-inter-{dns_name(pool)}", c.training, labels=sel), spec=spec)


def _fio_claim(plan: Plan) -> str:
    """The PVC fio writes into: a scratch directory, else checkpoints, else the filesystem root."""
    for purpose in ("scratch", "checkpoints"):
        layout = next((lay for lay in plan.layouts if lay.purpose == purpose), None)
        if layout is not None:
            return lustre_claim_name(layout)
    return lustre_claim_name(None)


def _fio_lustre(c: _Ctx) -> Obj | None:
    """Single-client Lustre read and write (fio), judged against storage.fio_lustre_{write,read}."""
    write = _target(c.plan, "storage.fio_lustre_write", "kiln_lustre_clients")
    read = _target(c.plan, "storage.fio_lustre_read", "kiln_lustre_clients")
    if write is None or read is None:
        return None
    pool = c.spec.compute.pools[0]
    jobs = int(_k("acceptance", "fio_numjobs"))
    size = max(float(_k("acceptance", "fio_min_size_GiB")),
               c.spec.acceptance.fio_size_factor * pool.ram_GiB / jobs)
    common = (f"--directory=/data/kiln-acceptance/$HOSTNAME --numjobs={jobs} --size={int(size)}G "
              f"--bs={_k('acceptance', 'fio_block_size')} --ioengine=libaio --direct=0 --group_reporting --minimal "
              "--filename_format='kiln.$jobnum'")  # NOTE: the read pass reads the files the write pass wrote
    # NOTE: terse v3 fields: 7 = read bandwidth (KiB/s), 48 = write bandwidth (KiB/s).
    to_gbps = "awk -F';' '{{printf \"%.3f\", ${field} * 1024 / 1e9}}' /tmp/fio-{op}.log"
    script = "set -eu\nmkdir -p /data/kiln-acceptance/$HOSTNAME\nrc=0\n"
    for op, t, field in (("write", write, 48), ("read", read, 7)):
        script += (f"fio --name=kiln-{op} --rw={op} {common} > /tmp/fio-{op}.log\n"
                   + "(\n"
                   + "".join(f"KILN_{f.upper()}=$KILN_{op.upper()}_{f.upper()}\n" for f in ("expected", "warn", "fail"))
                   + _judge(t.check, t.metric, t.unit, to_gbps.format(field=field, op=op))
                   + ") || rc=1\n")
    script += "rm -rf /data/kiln-acceptance/$HOSTNAME\nexit $rc\n"
    env = [{"name": f"KILN_{op.upper()}_{f.upper()}",
            "valueFrom": {"configMapKeyRef": {"name": TARGETS_CONFIGMAP, "key": target_key(t, f)}}}
           for op, t in (("write", write), ("read", read)) for f in ("expected", "warn", "fail")]
    container = {"name": "fio", "image": str(_k("acceptance", "fio_image")), "command": ["/bin/sh", "-c"],
                 "args": [script], "env": env,
                 "volumeMounts": [{"name": "lustre", "mountPath": "/data"},
                                  {"name": "targets", "mountPath": "/etc/kiln", "readOnly": True}]}
    pod = {"nodeSelector": {pool_label(): pool.name}, "containers": [container],
           "volumes": [{"name": "lustre", "persistentVolumeClaim": {"claimName": _fio_claim(c.plan)}},
                       {"name": "targets", "configMap": {"name": TARGETS_CONFIGMAP}}]}
    return _job(c, "kiln-fio-lustre", pod)


def warp_bucket(plan: Plan) -> str:
    """warp's own bucket (it creates it and deletes only what it wrote), never a data bucket of the plan."""
    return f"kiln-warp-{dns_name(plan.stack)}"[:63]


def _warp(c: _Ctx) -> list[Obj]:
    """S3 GET and PUT throughput (warp); the image has no shell, `kiln verify` judges the logs."""
    out = []
    endpoint = urlparse(s3_endpoint(c.plan, c.spec))
    tls = endpoint.scheme == "https"
    host = endpoint.netloc if endpoint.port else f"{endpoint.hostname}:{443 if tls else 80}"
    bucket = warp_bucket(c.plan)
    for op, check in (("put", "objectstore.s3_put"), ("get", "objectstore.s3_get")):
        t = next((x for x in c.plan.targets if x.check == check), None)
        if t is None:
            continue
        args = [op, f"--bucket={bucket}", f"--duration={_k('acceptance', 'warp_duration')}", "--autoterm"]
        if tls:
            args.append("--tls")
        env = [{"name": "WARP_HOST", "value": host},
               {"name": "WARP_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": S3_SECRET_NAME,
                                                                         "key": "AWS_ACCESS_KEY_ID"}}},
               {"name": "WARP_SECRET_KEY", "valueFrom": {"secretKeyRef": {"name": S3_SECRET_NAME,
                                                                         "key": "AWS_SECRET_ACCESS_KEY"}}},
               *_threshold_env(t)]
        container = {"name": "warp", "image": str(_k("acceptance", "warp_image")), "args": args, "env": env}
        pod = {"containers": [container]}
        job = _job(c, f"kiln-s3-{op}", pod)
        job["metadata"]["annotations"].update({"kiln.io/check": t.check,
                                               "kiln.io/judged-by": "kiln verify (no shell in the image)"})
        out.append(job)
    return out


def acceptance(c: _Ctx) -> list[Obj]:
    objs = [_targets_configmap(c)]
    for pool in c.spec.compute.pools:
        group = f"kiln_pool_{pool.name.replace('-', '_')}"
        intra = _target(c.plan, "fabric.nccl_allreduce_intra", group)
        if intra is not None and pool.gpu.count > 1:
            objs.append(_nccl_intra(c, pool.name, pool.gpu.count, intra))
        inter = _target(c.plan, "fabric.nccl_allreduce_inter", group)
        if inter is not None and pool.nodes > 1:
            objs.append(_nccl_inter(c, pool.name, pool.nodes, pool.gpu.count, inter))
    fio = _fio_lustre(c)
    if fio is not None:
        objs.append(fio)
    objs.extend(_warp(c))
    return objs


# --------------------------------------------------------------------------------------------- entry points


def build_manifests(plan: Plan, spec: ClusterSpec) -> tuple[Component, ...]:
    """Every component's Kubernetes objects, in apply order within each component."""
    c = _Ctx(plan, spec)
    return (
        Component(GPU_NODE_STACK, tuple(gpu_node_stack(c))),
        Component(NCCL_CONFIG, tuple(nccl_config(c))),
        Component(LUSTRE_CLIENT, tuple(lustre_client(c))),
        Component(OBJECT_STORE, tuple(object_store(c))),
        Component(ACCEPTANCE, tuple(acceptance(c))),
    )


def policy_config(plan: Plan, spec: ClusterSpec) -> dict[str, Any]:
    """Configuration of the kiln policy pack (policy/) for this stack: namespaces, rails per pool."""
    k8s = spec.kubernetes
    return {
        "kiln-privileged-namespaces": {"allowedNamespaces": [k8s.storage_namespace, k8s.system_namespace]},
        "kiln-gpu-pods-request-rails": {"poolLabel": pool_label(), "gpuResource": GPU_RESOURCE,
                                        "railResourceFormat": rail_resource_format(),
                                        "railsPerPool": rails_per_pool(plan, spec)},
        "kiln-no-secrets-in-configmaps": {},
    }


def _header(plan: Plan, kind: ComponentKind) -> str:
    lines = [
        f"# {kind.type_name} ({kind.token}) of stack {plan.stack}, plan {plan.spec_digest}.",
        f"# Generated by `kiln render {plan.stack}` from stacks/Pulumi.{plan.stack}.yaml. Do not edit.",
    ]
    if kind is OBJECT_STORE:
        lines.append(f"# The Secret {S3_SECRET_NAME} is rendered without data: create it with the command in its")
        lines.append(f"# {CREATE_WITH_ANNOTATION} annotation (KILN_S3_SECRET_KEY holds the key; see docs/pulumi.md).")
    if kind is GPU_NODE_STACK:
        labels = sorted({f"{k}={v}" for lab in node_labels(plan).values() for k, v in lab.items()})
        lines.append(f"# Nodes are selected by labels the plan names: {', '.join(labels)} (stack output node_labels).")
    return "\n".join(lines) + "\n"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (scripts, JSON configs) as literal blocks, so the YAML reads like the source."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data and not any(line != line.rstrip() for line in data.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def dump_objects(objects: Sequence[Obj]) -> str:
    """Multi-document YAML of Kubernetes objects (keys in builder order)."""
    return yaml.dump_all(list(objects), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def render_manifests(plan: Plan, spec: ClusterSpec) -> dict[str, str]:
    """File name → multi-document YAML, one file per component (for GitOps: Flux, Argo CD, kubectl)."""
    files: dict[str, str] = {}
    for comp in build_manifests(plan, spec):
        body = dump_objects(comp.objects)
        files[comp.kind.file] = _header(plan, comp.kind) + "---\n" + body
    return files
