"""The manifests builder (kiln.render.manifests): plan → Kubernetes objects per component."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
import yaml

from kiln.knowledge.kubernetes import kubernetes
from kiln.plan import build_plan
from kiln.plan.model import Plan
from kiln.plan.serialize import target_dict
from kiln.plan.sizing import device_figures
from kiln.render.inventory import render_inventory
from kiln.render.manifests import (
    COMPONENT_KINDS,
    CREATE_WITH_ANNOTATION,
    SECRET_SOURCE_ANNOTATION,
    TARGETS_CONFIGMAP,
    Ctx,
    Obj,
    acceptance_jobs,
    build_manifests,
    helm_chart,
    is_builtin,
    object_role,
    rail_resource,
    render_manifests,
    seaweedfs_jwt_string_data,
    secret_string_data,
)
from kiln.render.manifests.dataflow import models_namespace
from kiln.spec import ClusterSpec, load_stack
from kiln.spec.protection import capacity_share
from kiln.yamlio import load_inventory
from tests.conftest import STACKS
from tests.infra import k8s_schemas

CUSTOM_KINDS = {"Kafka", "KafkaNodePool", "KafkaTopic", "KafkaUser",  # Strimzi: tests/infra/test_strimzi_schemas.py
                "HelmRelease", "HelmRepository", "GitRepository", "NicClusterPolicy", "NetworkAttachmentDefinition",
                "MPIJob", "PrometheusRule", "ServiceMonitor", "PodMonitor"}


def _load(stack: str) -> tuple[ClusterSpec, Plan]:
    spec = load_stack(stack)
    return spec, build_plan(spec, stack)


@pytest.fixture(scope="module", params=STACKS)
def built(request: pytest.FixtureRequest) -> tuple[ClusterSpec, Plan, dict[str, tuple[Obj, ...]]]:
    spec, plan = _load(request.param)
    return spec, plan, {c.kind.module: c.objects for c in build_manifests(plan)}


def _all(objs: dict[str, tuple[Obj, ...]]) -> list[Obj]:
    return [o for group in objs.values() for o in group]


def _models(spec: ClusterSpec, plan: Plan) -> int:
    """1 where the stack distributes models in their own namespace (Lustre claim and S3 Secret there too)."""
    return int(models_namespace(Ctx(plan)) is not None)


def _kind(objs: dict[str, tuple[Obj, ...]], kind: str) -> list[Obj]:
    return [o for o in _all(objs) if o["kind"] == kind]


def test_eight_components_in_order_with_type_tokens() -> None:
    _spec, plan = _load("dev")
    comps = build_manifests(plan)
    assert [c.kind.token for c in comps] == ["kiln:gpu:GpuNodeStack", "kiln:nccl:NcclConfig",
                                             "kiln:lustre:LustreClient", "kiln:objectstore:ObjectStore",
                                             "kiln:monitoring:Monitoring", "kiln:acceptance:Acceptance",
                                             "kiln:dataflow:DataMover", "kiln:kafka:TokenStream"]
    assert [c.kind for c in comps] == list(COMPONENT_KINDS)
    assert sorted(render_manifests(plan)) == sorted(k.file for k in COMPONENT_KINDS)


def test_builtin_manifests_validate_against_the_stack_kubernetes_schemas(built: Any) -> None:
    _spec, plan, objs = built
    checked = 0
    for obj in _all(objs):
        if is_builtin(obj):
            k8s_schemas.validate(obj, plan.kubernetes_version)
            checked += 1
        else:
            assert obj["kind"] in CUSTOM_KINDS, obj["kind"]
    assert checked >= 10


def test_schema_version_rule() -> None:
    shipped = ["1.29", "1.30", "1.31", "1.33"]
    assert k8s_schemas.schema_version("1.31", shipped) == "1.31"
    assert k8s_schemas.schema_version("1.32", shipped) == "1.31"  # nearest older
    assert k8s_schemas.schema_version("1.40", shipped) == "1.33"  # newer than all: newest
    with pytest.raises(ValueError, match="older than every schema"):
        k8s_schemas.schema_version("1.20", shipped)
    assert "1.31" in k8s_schemas.shipped_versions()  # the stacks' version ships with kubernetes-validate


def test_custom_resources_are_well_formed(built: Any) -> None:
    _, _, objs = built
    for obj in _all(objs):
        assert set(obj) >= {"apiVersion", "kind", "metadata"}
        assert obj["metadata"]["name"]
        if not is_builtin(obj):
            assert isinstance(obj["spec"], dict)
    roles = [object_role(o) for o in _all(objs)]
    assert len(roles) == len(set(roles)), "child resource names must be unique"


def test_one_rdma_resource_per_rail(built: Any) -> None:
    spec, plan, objs = built
    policies = _kind(objs, "NicClusterPolicy")
    if plan.fabric == "tcp":
        assert policies == [] and _kind(objs, "NetworkAttachmentDefinition") == []
        return
    (ncp,) = policies
    assert ncp["metadata"]["name"] == "nic-cluster-policy"
    config = json.loads(ncp["spec"]["rdmaSharedDevicePlugin"]["config"])["configList"]
    compute = [n for n in plan.hosts[0].nics if n.role == "compute"]
    assert len(config) == len(compute) == spec.compute.pools[0].compute_rails.count
    for i, (entry, nic) in enumerate(zip(config, compute, strict=True)):
        assert entry["resourceName"] == f"rdma_rail{i}"
        assert entry["selectors"] == {"ifNames": [nic.interface]}
    assert "ofedDriver" not in ncp["spec"]  # MOFED stays on the host (Lustre o2ib is built against it)
    affinity = ncp["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert affinity["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == spec.kubernetes.gpu_node_label


def test_secondary_networks_follow_the_plan_interfaces(built: Any) -> None:
    spec, plan, objs = built
    nads = {o["metadata"]["name"]: json.loads(o["spec"]["config"]) for o in _kind(objs, "NetworkAttachmentDefinition")}
    if plan.fabric == "tcp":
        assert nads == {}
        return
    storage = [n for n in plan.hosts[0].nics if n.role == "storage"]
    net = ipaddress.ip_network(spec.networks.storage)
    used = max(int(ipaddress.ip_address(n.address)) for h in plan.hosts for n in h.nics if n.address)
    for nic in storage:
        cfg = nads[f"kiln-storage-{nic.interface}"]
        assert cfg["type"] == "ipoib" and cfg["master"] == nic.interface
        assert cfg["ipam"]["range"] == str(net)
        assert int(ipaddress.ip_address(cfg["ipam"]["range_start"])) > used  # pods never take a planned address
    rails = [n for n in plan.hosts[0].nics if n.role == "compute"]
    for i, nic in enumerate(rails):
        assert nads[f"kiln-rail{i}"]["master"] == nic.interface and "ipam" not in nads[f"kiln-rail{i}"]


def test_gpu_operator_values_follow_the_plan(built: Any) -> None:
    _, plan, objs = built
    releases = {o["metadata"]["name"]: o for o in _kind(objs, "HelmRelease")}
    values = releases["gpu-operator"]["spec"]["values"]
    rdma = plan.fabric != "tcp"
    assert values["driver"]["rdma"]["enabled"] is rdma
    assert values["gds"]["enabled"] is rdma
    assert values["dcgmExporter"]["enabled"] is True
    assert ("network-operator" in releases) is rdma


def test_helm_releases_resolve_to_pinned_charts(built: Any) -> None:
    _, _, objs = built
    k = kubernetes()
    for comp in objs.values():
        for rel in (o for o in comp if o["kind"] == "HelmRelease"):
            chart = helm_chart(rel, comp)  # its source is rendered in the same component
            pin = next(c for c in k.charts.values() if c.release == chart.release_name)
            if pin.repository is not None:
                assert (chart.chart, chart.version) == (pin.chart, pin.version)
                assert chart.repository_url == k.helm_repositories[pin.repository].url
            else:
                assert pin.git_repository is not None
                git = k.git_repositories[pin.git_repository]
                assert (chart.chart, chart.git_url, chart.git_tag) == (pin.path, git.url, git.tag)
            assert chart.values == rel["spec"]["values"]


def test_chart_sources_are_the_pinned_upstream_charts(built: Any) -> None:
    spec, plan, objs = built
    releases = {o["metadata"]["name"]: o for o in _kind(objs, "HelmRelease")}
    lustre = releases["lustre-csi-driver"]["spec"]
    assert lustre["targetNamespace"] == spec.kubernetes.storage_namespace
    assert lustre["values"] == {"deployment": {"image": "ghcr.io/hewlettpackard/lustre-csi-driver", "tag": "0.1.11"}}
    # the chart brings the CSI node DaemonSet and the CSIDriver; kiln's own DaemonSets are kiln-health (Monitoring)
    # and the model distribution ones (DataMover)
    names = [d["metadata"]["name"] for d in _kind(objs, "DaemonSet")]
    assert "kiln-health" in names
    assert all(n == "kiln-health" or n.startswith("kiln-models-") for n in names)
    assert _kind(objs, "CSIDriver") == []
    assert ("seaweedfs" in releases) is (plan.objectstore.backend == "seaweedfs")


def test_lustre_volumes_carry_the_plan_nids_capacity_and_options(built: Any) -> None:
    spec, plan, objs = built
    pvs = _kind(objs, "PersistentVolume")
    pvcs = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in _kind(objs, "PersistentVolumeClaim")}
    # the root and each directory; the root again in the models namespace where models are distributed
    assert len(pvs) == len(plan.layouts) + 1 + _models(spec, plan) == len(pvcs)
    # usable: each OST's drives × capacity × the share its protection keeps (a raid1 pair holds one drive's worth)
    drive_TB = device_figures(spec.lustre.oss.osts.device).capacity_TB
    tb = sum(len(t.drives) * drive_TB * capacity_share(t.protection, len(t.drives))
             for t in plan.lustre_targets if t.kind == "ost")
    nids = ":".join(",".join(server) for server in plan.mgs_nids)
    inv = load_inventory(render_inventory(plan)["group_vars/kiln_lustre_clients.yml"])
    options = [o for o in inv["lustre_client_mounts"][0]["options"] if o not in ("defaults", "_netdev")]
    paths = {"/"} | {lay.path for lay in plan.layouts}
    for pv in pvs:
        assert pv["spec"]["capacity"]["storage"] == f"{max(1, round(tb * 1000))}G"
        csi = pv["spec"]["csi"]
        assert csi["volumeAttributes"]["mgsNids"] == nids
        for server in plan.mgs_nids:
            for nid in server:
                assert nid in csi["volumeHandle"]
        fileset = csi["volumeAttributes"]["fileset"]
        assert fileset in paths
        assert csi["volumeHandle"] == f"{nids}:/{plan.fsname}{'' if fileset == '/' else fileset}"
        assert pv["spec"]["mountOptions"] == options
        claim = pvcs[pv["spec"]["claimRef"]["namespace"], pv["spec"]["claimRef"]["name"]]
        assert claim["spec"]["volumeName"] == pv["metadata"]["name"]
        assert claim["spec"]["resources"]["requests"]["storage"] == pv["spec"]["capacity"]["storage"]


def test_nccl_configmaps_hold_the_plan_env(built: Any) -> None:
    _, plan, objs = built
    cms = {o["metadata"]["name"]: o["data"] for o in objs["nccl"]}
    assert len(cms) == len(plan.nccl)
    for pool in plan.nccl:
        data = cms[f"kiln-nccl-{pool.pool}"]
        assert {k: v for k, v in data.items() if k != "nccl.conf"} == pool.env
        assert data["nccl.conf"].splitlines() == [f"{k}={v}" for k, v in pool.env.items()]


def test_secrets_are_rendered_without_data(built: Any) -> None:
    spec, plan, objs = built
    secrets = _kind(objs, "Secret")
    seaweedfs = plan.objectstore.backend == "seaweedfs"
    # credentials in storage and training (and models); SeaweedFS identities and JWT signing keys
    assert len(secrets) == 2 + _models(spec, plan) + 2 * seaweedfs
    for s in secrets:
        assert "data" not in s and "stringData" not in s
        ann = s["metadata"]["annotations"]
        source = "kiln:seaweedfsJwtKey" if s["metadata"]["name"] == "kiln-seaweedfs-jwt" else \
            plan.objectstore.credentials_secret
        assert ann[SECRET_SOURCE_ANNOTATION] == f"pulumi-config:{source}"
        hint = ann[CREATE_WITH_ANNOTATION]
        # the key is read from a 0600 file, never put on kubectl's argv
        assert "--from-env-file=<0600 file" in hint or "--from-file=seaweedfs_s3_config=<0600 file" in hint
        assert "--from-literal" not in hint and "SECRET_KEY=" not in hint


def test_seaweedfs_identities_secret_holds_the_plan_identity() -> None:
    _spec, plan = _load("prod-h100")
    assert plan.objectstore.backend == "seaweedfs"
    data = secret_string_data(plan, "kiln-seaweedfs-s3-config", "s3cr3t")
    ident = json.loads(data["seaweedfs_s3_config"])["identities"][0]
    assert ident["credentials"] == [{"accessKey": plan.objectstore.access_key_id, "secretKey": "s3cr3t"}]
    assert secret_string_data(plan, "kiln-s3-credentials", "s3cr3t")["AWS_SECRET_ACCESS_KEY"] == "s3cr3t"
    with pytest.raises(KeyError):
        secret_string_data(plan, "other", "x")


def test_seaweedfs_jwt_signing_keys_come_from_a_secret(built: Any) -> None:
    """JWT signing is on in the chart values; the keys are env vars from the data-less JWT Secret, never values."""
    spec, plan, objs = built
    if plan.objectstore.backend != "seaweedfs":
        pytest.skip("not applicable: the stack uses an external object store")
    release = next(o for o in objs["objectstore"] if o["kind"] == "HelmRelease")
    sw = release["spec"]["values"]["global"]["seaweedfs"]
    assert sw["securityConfig"]["jwtSigning"] == {"volumeWrite": True, "volumeRead": False, "filerWrite": True,
                                                  "filerRead": True}
    env = sw["extraEnvironmentVars"]
    assert set(env) == {"WEED_JWT_SIGNING_KEY", "WEED_JWT_FILER_SIGNING_KEY", "WEED_JWT_FILER_SIGNING_READ_KEY"}
    assert all(v == {"secretKeyRef": {"name": "kiln-seaweedfs-jwt", "key": k}} for k, v in env.items())
    jwt = [o for o in objs["objectstore"] if o["kind"] == "Secret" and o["metadata"]["name"] == "kiln-seaweedfs-jwt"]
    assert len(jwt) == 1 and jwt[0]["metadata"]["namespace"] == spec.kubernetes.storage_namespace
    # no key, and nothing that looks like one, anywhere in the rendered release
    assert "secretKeyRef" in json.dumps(release) and "signing.key" not in json.dumps(release)
    data = seaweedfs_jwt_string_data("m" * 32)
    assert set(data) == set(env) and len(set(data.values())) == 3
    assert all(len(v) == 64 and "m" * 32 not in v for v in data.values())
    assert seaweedfs_jwt_string_data("n" * 32) != data  # a different stack secret gives different keys


def test_object_store_is_sized_from_the_plan(built: Any) -> None:
    _spec, plan, objs = built
    jobs = {o["metadata"]["name"]: o for o in objs["objectstore"] if o["kind"] == "Job"}
    script = jobs["kiln-buckets"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    for b in plan.objectstore.buckets:
        assert b.name in script
    releases = {o["metadata"]["name"]: o for o in _kind(objs, "HelmRelease")}
    if plan.objectstore.backend == "external":
        assert "seaweedfs" not in releases
        assert {o["kind"] for o in objs["objectstore"]} == {"Secret", "ConfigMap", "Job"}
        return
    values = releases["seaweedfs"]["spec"]["values"]
    nodes = len(plan.objectstore.hosts)
    assert values["volume"]["replicas"] == nodes == values["s3"]["replicas"]
    per_node = plan.objectstore.raw_capacity_TB / nodes
    assert values["volume"]["dataDirs"][0]["size"] == f"{max(1, round(per_node * 1000))}G"
    assert values["volume"]["nodeSelector"] == "kiln.io/role: objectstore"
    assert values["master"]["replicas"] == (3 if nodes >= 3 else 1)
    assert values["master"]["defaultReplication"] == plan.objectstore.replication
    assert values["s3"]["port"] == plan.objectstore.s3_port
    assert values["s3"]["existingConfigSecret"] == "kiln-seaweedfs-s3-config"


def test_acceptance_runs_the_plan_targets(built: Any) -> None:
    spec, plan, objs = built
    cm = next(o for o in objs["acceptance"] if o["metadata"]["name"] == TARGETS_CONFIGMAP)
    assert json.loads(cm["data"]["targets.json"]) == [target_dict(t) for t in plan.targets]
    # The Jobs print raw tool output and judge nothing: no thresholds reach them, no awk verdicts.
    assert [ref for o in objs["acceptance"] for ref in _configmap_key_refs(o)] == []
    assert "awk" not in yaml.safe_dump(list(objs["acceptance"]))
    names = {o["metadata"]["name"] for o in objs["acceptance"] if o["kind"] in ("Job", "MPIJob")}
    assert names == {jc.job for jc in acceptance_jobs(plan)}
    mpijobs = _kind(objs, "MPIJob")
    for pool in spec.compute.pools:
        group = f"kiln_pool_{pool.name}"
        has_inter = any(t.check == "fabric.nccl_allreduce_inter" and t.group == group for t in plan.targets)
        mine = [m for m in mpijobs if m["metadata"]["name"] == f"kiln-nccl-inter-{pool.name}"]
        assert len(mine) == (1 if pool.nodes > 1 and has_inter else 0)
        for m in mine:
            worker = m["spec"]["mpiReplicaSpecs"]["Worker"]
            assert worker["replicas"] == pool.nodes and m["spec"]["slotsPerWorker"] == pool.gpu.count
    for obj in objs["acceptance"]:
        for pod in _pods(obj):
            for ctr in pod["containers"]:
                limits = ctr.get("resources", {}).get("limits", {})
                if limits.get("nvidia.com/gpu"):
                    pool = pod["nodeSelector"]["kiln.io/pool"]
                    rails = next(p for p in spec.compute.pools if p.name == pool).compute_rails.count
                    want = 0 if plan.fabric == "tcp" else rails
                    assert [k for k in limits if k.startswith("rdma/")] == [rail_resource(i) for i in range(want)]


def _pods(obj: Obj) -> list[dict[str, Any]]:
    if obj["kind"] == "Job":
        return [obj["spec"]["template"]["spec"]]
    if obj["kind"] == "MPIJob":
        return [r["template"]["spec"] for r in obj["spec"]["mpiReplicaSpecs"].values()]
    return []


def _configmap_key_refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        if "configMapKeyRef" in value:
            return [value["configMapKeyRef"]["key"]]
        return [k for v in value.values() for k in _configmap_key_refs(v)]
    if isinstance(value, list):
        return [k for v in value for k in _configmap_key_refs(v)]
    return []


def test_rendered_yaml_round_trips_to_the_builder_objects() -> None:
    _spec, plan = _load("prod-h100")
    files = render_manifests(plan)
    for comp in build_manifests(plan):
        text = files[comp.kind.file]
        assert text.startswith(f"# {comp.kind.type_name} ({comp.kind.token}) of stack prod-h100")
        assert list(yaml.safe_load_all(text)) == list(comp.objects)
