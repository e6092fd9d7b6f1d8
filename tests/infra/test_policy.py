"""The policy pack (policy/kiln_policies.py): its checks as plain functions, and every stack passing them."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pulumi.runtime import rpc
from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs

from kiln.plan import build_plan
from kiln.render.manifests import build_manifests, policy_config
from kiln.spec import load_stack
from tests.conftest import STACKS
from tests.infra.conftest import SECRET, Run

ROOT = Path(__file__).resolve().parents[2]


def _load_policies() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kiln_policies", ROOT / "policy" / "kiln_policies.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kiln_policies"] = module
    spec.loader.exec_module(module)
    return module


P = _load_policies()
JOB = "kubernetes:batch/v1:Job"
CM = "kubernetes:core/v1:ConfigMap"
RAILS = {"poolLabel": "kiln.io/pool", "gpuResource": "nvidia.com/gpu", "railResourceFormat": "rdma/rdma_rail{index}",
         "railsPerPool": {"gpu": 2, "cpu": 0}}


def job(namespace: str = "training", privileged: bool = False, gpus: int = 0, rails: int = 0,
        pool: str | None = "gpu") -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    for i in range(rails):
        limits[f"rdma/rdma_rail{i}"] = 1
    ctr: dict[str, Any] = {"name": "main", "image": "x", "resources": {"limits": limits}}
    if privileged:
        ctr["securityContext"] = {"privileged": True}
    pod: dict[str, Any] = {"containers": [ctr]}
    if pool:
        pod["nodeSelector"] = {"kiln.io/pool": pool}
    return {"metadata": {"name": "j", "namespace": namespace}, "spec": {"template": {"spec": pod}}}


def test_privileged_containers_only_in_storage_and_system_namespaces() -> None:
    cfg = {"allowedNamespaces": ["kiln-storage", "kiln-system"]}
    assert P.check_privileged(JOB, job("kiln-storage", privileged=True), cfg) == []
    assert P.check_privileged(JOB, job("training", privileged=False), cfg) == []
    (msg,) = P.check_privileged(JOB, job("training", privileged=True), cfg)
    assert "'training'" in msg and "kiln-storage" in msg
    assert P.check_privileged(JOB, job("default", privileged=True), {}) != []  # defaults apply without config
    init = job("training")
    init["spec"]["template"]["spec"]["initContainers"] = [{"name": "i", "securityContext": {"privileged": True}}]
    assert P.check_privileged(JOB, init, cfg) != []
    pod = job(privileged=True)["spec"]["template"]["spec"]
    ds = {"metadata": {"namespace": "training"}, "spec": {"template": {"spec": pod}}}
    assert P.check_privileged("kubernetes:apps/v1:DaemonSet", ds, cfg) != []


def test_gpu_pods_request_every_rail_of_their_pool() -> None:
    assert P.check_gpu_rails(JOB, job(gpus=8, rails=2), RAILS) == []
    (msg,) = P.check_gpu_rails(JOB, job(gpus=8, rails=1), RAILS)
    assert "rdma/rdma_rail1" in msg
    assert P.check_gpu_rails(JOB, job(gpus=0, rails=0), RAILS) == []  # not a GPU pod
    assert P.check_gpu_rails(JOB, job(gpus=1, rails=0, pool="cpu"), RAILS) == []  # a pool without rails
    assert "does not have" in P.check_gpu_rails(JOB, job(gpus=1, pool="nope"), RAILS)[0]
    assert "selects no pool" in P.check_gpu_rails(JOB, job(gpus=1, pool=None), RAILS)[0]
    # without per-stack config: any GPU pod must request at least one rail
    assert P.check_gpu_rails(JOB, job(gpus=8, rails=1), {}) == []
    assert P.check_gpu_rails(JOB, job(gpus=8, rails=0), {}) != []


def test_gpu_rails_apply_to_every_mpijob_replica() -> None:
    worker = job(gpus=8, rails=1)["spec"]["template"]
    replicas = {"Launcher": {"template": job()["spec"]["template"]}, "Worker": {"template": worker}}
    mpi = {"metadata": {"namespace": "training"}, "spec": {"mpiReplicaSpecs": replicas}}
    (msg,) = P.check_gpu_rails("kubernetes:kubeflow.org/v2beta1:MPIJob", mpi, RAILS)
    assert "Worker" in msg


@pytest.mark.parametrize(("data", "bad"), [
    ({"NCCL_IB_HCA": "=mlx5_0,mlx5_1", "nccl.conf": "NCCL_IB_HCA==mlx5_0\n"}, False),
    ({"S3_ENDPOINT": "http://seaweedfs-s3.kiln-storage.svc:8333", "S3_BUCKETS": "datasets checkpoints"}, False),
    ({"AWS_SECRET_ACCESS_KEY": "abc"}, True),
    ({"dbPassword": "hunter2"}, True),
    ({"apiToken": ""}, False),  # a secret-named key with no value is only a placeholder
    ({"config.json": '{"secretKey": "abc123"}'}, True),
    ({"env": "AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP"}, True),
    ({"blob": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}, True),  # AWS's documented example secret shape
    ({"tls.pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIE..."}, True),
    ({"path": "/var/lib/kubelet/plugins/lustre/socketdirs"}, False),
    ({"stack.yaml": "consumers: {tokens_per_s_per_node: 4800}\ntokens_per_message: 2048\n"}, False),  # counts
    ({"stack.yaml": "api_token: 4800abc\n"}, True),  # a value that only starts with digits is not a count
])
def test_configmaps_hold_no_secrets(data: dict[str, str], bad: bool) -> None:
    props = {"metadata": {"name": "cm"}, "data": data}
    assert bool(P.check_configmap_secrets(CM, props, {})) is bad
    assert P.check_configmap_secrets(JOB, props, {}) == []  # only ConfigMaps


def test_policy_objects_report_through_pulumi_policy() -> None:
    policy = next(p for p in P.POLICIES if p.name == "kiln-privileged-namespaces")
    reported: list[str] = []
    opts = PolicyResourceOptions(False, [], False, [], PolicyCustomTimeouts(0, 0, 0), [])
    args = ResourceValidationArgs(JOB, job("training", privileged=True), "urn:x", "j", opts, None, {})
    policy.validate(args, lambda message, urn=None: reported.append(message))
    assert reported and "privileged" in reported[0]
    assert {p.name for p in P.POLICIES} == set(P.CHECKS)


def _type_token(obj: dict[str, Any]) -> str:
    api = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    return f"kubernetes:{api}:{obj['kind']}"


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_object_passes_the_policies(stack: str) -> None:
    spec = load_stack(stack)
    plan = build_plan(spec, stack)
    config = policy_config(plan)
    assert set(config) == set(P.CHECKS)
    for comp in build_manifests(plan):
        for obj in comp.objects:
            for name, check in P.CHECKS.items():
                assert check(_type_token(obj), obj, config[name]) == [], (stack, obj["metadata"]["name"])


def test_every_program_resource_passes_the_policies(runs: dict[str, Run]) -> None:
    """As the policy pack sees them in `pulumi preview`: the recorded inputs (secrets unwrapped)."""
    for stack, run in runs.items():
        spec = load_stack(stack)
        config = policy_config(build_plan(spec, stack))
        for rec in run.records:
            props = _unwrap(rec.inputs)
            for name, check in P.CHECKS.items():
                assert check(rec.type, props, config[name]) == [], (stack, rec.name)


def test_the_policies_catch_a_leaked_secret_and_a_railless_gpu_pod() -> None:
    spec = load_stack("dev")
    plan = build_plan(spec, "dev")
    config = policy_config(plan)
    objs = {o["metadata"]["name"]: o for c in build_manifests(plan) for o in c.objects}
    leaked = copy.deepcopy(objs["kiln-s3-endpoint"])
    leaked["data"]["AWS_SECRET_ACCESS_KEY"] = SECRET
    assert P.check_configmap_secrets(CM, leaked, config["kiln-no-secrets-in-configmaps"])
    railless = copy.deepcopy(objs["kiln-nccl-intra-gpu"])
    resources = railless["spec"]["template"]["spec"]["containers"][0]["resources"]
    del resources["limits"]["rdma/rdma_rail3"], resources["requests"]["rdma/rdma_rail3"]
    (msg,) = P.check_gpu_rails(JOB, railless, config["kiln-gpu-pods-request-rails"])
    assert "rdma/rdma_rail3" in msg


def _unwrap(value: Any) -> Any:
    if rpc.is_rpc_secret(value):
        return _unwrap(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


# ------------------------------------------------------------------------ host access and escalation (pod security)

SEC = {"allowedNamespaces": ["kiln-storage", "kiln-system"], "allowedCapabilities": ["IPC_LOCK"]}
NS = "kubernetes:core/v1:Namespace"


def _pod(j: dict[str, Any]) -> dict[str, Any]:
    return j["spec"]["template"]["spec"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("change", "words"), [
    (lambda pod: pod.update(hostNetwork=True), "hostNetwork: true"),
    (lambda pod: pod.update(hostPID=True), "hostPID: true"),
    (lambda pod: pod.update(hostIPC=True), "hostIPC: true"),
    (lambda pod: pod.update(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), "hostPath '/'"),
    (lambda pod: pod["containers"][0].update(securityContext={"allowPrivilegeEscalation": True}),
     "allowPrivilegeEscalation: true"),
    (lambda pod: pod.update(securityContext={"allowPrivilegeEscalation": True}), "allowPrivilegeEscalation: true"),
    (lambda pod: pod["containers"][0].update(securityContext={"capabilities": {"add": ["IPC_LOCK", "SYS_ADMIN"]}}),
     "adds capabilities SYS_ADMIN"),
    (lambda pod: pod["containers"][0].update(securityContext={"capabilities": {"add": ["CAP_NET_ADMIN"]}}),
     "adds capabilities CAP_NET_ADMIN"),
])
def test_pod_security_rules(change: Any, words: str) -> None:
    j = job("training")
    assert P.check_pod_security(JOB, j, SEC) == []
    change(_pod(j))
    (msg,) = P.check_pod_security(JOB, j, SEC)
    assert words in msg and "'training'" in msg
    j["metadata"]["namespace"] = "kiln-storage"  # the CSI node plugin's namespace may
    assert P.check_pod_security(JOB, j, SEC) == []
    j["metadata"]["namespace"] = "default"
    assert P.check_pod_security(JOB, j, {}) != []  # defaults apply without config


def test_allowed_capabilities_pass() -> None:
    j = job("training")
    _pod(j)["containers"][0]["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]},
                                                    "allowPrivilegeEscalation": False}
    assert P.check_pod_security(JOB, j, SEC) == []


def test_privileged_pod_security_labels_only_where_needed() -> None:
    def ns(name: str, level: str, mode: str = "enforce") -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {f"pod-security.kubernetes.io/{mode}": level}}}

    assert P.check_pod_security(NS, ns("kiln-system", "privileged"), SEC) == []
    assert P.check_pod_security(NS, ns("training", "baseline"), SEC) == []
    (msg,) = P.check_pod_security(NS, ns("training", "privileged"), SEC)
    assert "pod-security.kubernetes.io/enforce=privileged" in msg
    assert P.check_pod_security(NS, ns("training", "privileged", "warn"), SEC) != []


DS = "kubernetes:apps/v1:DaemonSet"


def _health_ds() -> tuple[dict[str, Any], dict[str, Any]]:
    """The dev stack's rendered kiln-health DaemonSet and its kiln-pod-security config."""
    spec = load_stack("dev")
    plan = build_plan(spec, "dev")
    objs = {(o["kind"], o["metadata"]["name"]): o for c in build_manifests(plan) for o in c.objects}
    return copy.deepcopy(objs[("DaemonSet", "kiln-health")]), policy_config(plan)["kiln-pod-security"]


def test_the_health_namespace_allows_exactly_read_only_proc_and_sys() -> None:
    ds, cfg = _health_ds()
    assert cfg["hostPathNamespaces"]["kiln-health"] == [{"path": "/proc", "readOnly": True},
                                                        {"path": "/sys", "readOnly": True}]
    assert P.check_pod_security(DS, ds, cfg) == []
    assert P.check_privileged(DS, ds, {"allowedNamespaces": cfg["allowedNamespaces"]}) == []
    label = {"metadata": {"name": "kiln-health", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    assert P.check_pod_security(NS, label, cfg) == []
    assert P.check_pod_security(NS, label, SEC) != []  # without the allow-list entry: refused
    ds["metadata"]["namespace"] = "training"  # the same pod elsewhere: its host paths are refused
    assert any("hostPath '/proc'" in m for m in P.check_pod_security(DS, ds, cfg))


@pytest.mark.parametrize(("change", "words"), [
    (lambda pod: pod["volumes"].append({"name": "dev", "hostPath": {"path": "/dev"}}), "hostPath '/dev'"),
    (lambda pod: pod["containers"][0]["volumeMounts"][0].update(readOnly=False), "writable"),
    (lambda pod: pod["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
     "does not set allowPrivilegeEscalation: false"),
    (lambda pod: pod["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
     "must drop ALL capabilities and add none"),
    (lambda pod: pod["containers"][0]["securityContext"]["capabilities"].update(drop=["NET_RAW"]),
     "must drop ALL capabilities"),
    (lambda pod: pod["containers"][0]["securityContext"].update(privileged=True), "is privileged"),
    (lambda pod: pod.update(hostPID=True), "hostPID: true"),
    (lambda pod: pod.update(hostNetwork=True), "hostNetwork: true"),
])
def test_the_health_namespace_refuses_anything_more(change: Any, words: str) -> None:
    ds, cfg = _health_ds()
    change(_pod(ds))
    msgs = P.check_pod_security(DS, ds, cfg)
    assert any(words in m and "'kiln-health'" in m for m in msgs), msgs


def test_render_runs_the_policy_pack_and_writes_nothing_on_violations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from kiln import cli
    from kiln.render import manifests

    real = manifests.build_manifests

    def with_bad_pod(plan: Any) -> Any:
        comps = list(real(plan))
        bad = job("training")
        bad.update(apiVersion="batch/v1", kind="Job")
        _pod(bad)["hostNetwork"] = True
        _pod(bad)["volumes"] = [{"name": "etc", "hostPath": {"path": "/etc"}}]
        i = next(i for i, c in enumerate(comps) if c.kind.file == "acceptance.yaml")
        comps[i] = manifests.Component(comps[i].kind, (*comps[i].objects, bad))
        return tuple(comps)

    monkeypatch.setattr(manifests, "build_manifests", with_bad_pod)
    out = tmp_path / "out"
    assert cli.main(["render", "lab", "--out", str(out)]) == cli.EXIT_FAIL
    err = capsys.readouterr().err
    assert "nothing written; 2 policy violation(s)" in err
    assert "acceptance.yaml: Job training/j: [kiln-pod-security] pod (spec.template.spec) sets hostNetwork" in err
    assert "hostPath '/etc'" in err and "Traceback" not in err
    assert not out.exists()


# ------------------------------------------------------------------ model receivers' hostPath (models namespace)

DS = "kubernetes:apps/v1:DaemonSet"


def _models_daemonset() -> tuple[dict[str, Any], dict[str, Any], str]:
    spec = load_stack("prod-h100")
    plan = build_plan(spec, "prod-h100")
    (ds,) = [o for c in build_manifests(plan) for o in c.objects
             if o["kind"] == "DaemonSet" and o["metadata"]["namespace"] == spec.kubernetes.models_namespace]
    return ds, policy_config(plan)["kiln-pod-security"], spec.kubernetes.models_namespace


def test_the_models_namespace_may_mount_exactly_the_planned_receiver_directory() -> None:
    ds, cfg, ns = _models_daemonset()
    assert cfg["hostPathNamespaces"][ns] == [{"path": "/mnt/local-nvme/models", "readOnly": False,
                                              "type": "Directory"}]
    assert ns not in cfg["allowedNamespaces"]  # no blanket exemption: only that path
    label = {"metadata": {"name": ns, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    assert P.check_pod_security(NS, label, cfg) == []  # Baseline forbids every hostPath: the label is needed
    assert P.check_pod_security(DS, ds, cfg) == []


@pytest.mark.parametrize(("change", "words"), [
    (lambda ds: ds["spec"]["template"]["spec"]["volumes"][-1]["hostPath"].update(path="/mnt/local-nvme"),
     "hostPath '/mnt/local-nvme'"),
    (lambda ds: ds["spec"]["template"]["spec"]["volumes"].append({"name": "etc", "hostPath": {"path": "/etc"}}),
     "hostPath '/etc'"),
    (lambda ds: ds["spec"]["template"]["spec"]["volumes"][-1]["hostPath"].update(type="DirectoryOrCreate"),
     "hostPath '/mnt/local-nvme/models'"),
    (lambda ds: ds["metadata"].update(namespace="training"), "in namespace 'training'"),
    (lambda ds: ds["spec"]["template"]["spec"].update(hostNetwork=True), "hostNetwork: true"),
])
def test_anything_beyond_the_receiver_directory_is_refused(change: Any, words: str) -> None:
    ds, cfg, _ns = _models_daemonset()
    bad = copy.deepcopy(ds)
    change(bad)
    msgs = P.check_pod_security(DS, bad, cfg)
    assert len(msgs) == 1 and words in msgs[0], msgs
