"""The DataMover component (kiln/render/manifests/dataflow.py): stage Jobs and CronJobs, the mover's Deployment and
its metrics endpoint, the model distribution DaemonSets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.policy.enforce import violations
from kiln.render.manifests import DATAFLOW, GPU_NODE_STACK, LUSTRE_CLIENT, OBJECT_STORE, S3_SECRET_NAME, build_manifests
from kiln.render.manifests.dataflow import RELAY_SUBDIR, SPEC_CONFIGMAP, metrics_port
from kiln.render.manifests.monitoring import HOST_RELABEL
from kiln.spec import load_stack

STACKS = ["dev", "lab", "prod-h100"]


def _objects(stack: str) -> tuple[Any, Any, dict[str, list[dict[str, Any]]]]:
    spec = load_stack(stack)
    plan = build_plan(spec, stack)
    comps = {c.kind: list(c.objects) for c in build_manifests(plan)}
    return spec, plan, comps


def _pods(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for o in objs:
        if o["kind"] == "CronJob":
            out.append(o["spec"]["jobTemplate"]["spec"]["template"]["spec"])
        elif o["kind"] in ("Job", "Deployment", "DaemonSet"):
            out.append(o["spec"]["template"]["spec"])
    return out


def test_dev_preloads_its_link_with_a_job_and_writes_checkpoints_back_with_a_deployment() -> None:
    _spec, _plan, comps = _objects("dev")
    kinds = {(o["kind"], o["metadata"]["name"]) for o in comps[DATAFLOW]}
    assert kinds == {("ConfigMap", SPEC_CONFIGMAP), ("Job", "kiln-stage-pretrain"), ("Deployment", "kiln-datamover"),
                     ("Service", "kiln-datamover"), ("ServiceMonitor", "kiln-datamover"),
                     ("NetworkPolicy", "kiln-datamover-metrics")}  # dev's lake is external: no model DaemonSet
    job = next(o for o in comps[DATAFLOW] if o["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"][:3] == ["stage", "/etc/kiln/Pulumi.dev.yaml",
                                                                           "pretrain"]
    dep = next(o for o in comps[DATAFLOW] if o["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"


def test_a_scheduled_link_is_a_cronjob_on_its_cron_schedule() -> None:
    _spec, plan, comps = _objects("prod-h100")
    cron = [o for o in comps[DATAFLOW] if o["kind"] == "CronJob"]
    assert [o["metadata"]["name"] for o in cron] == ["kiln-stage-eval"]
    link = next(x for x in plan.dataflow.links if x.name == "eval")
    assert cron[0]["spec"]["schedule"] == link.schedule == "0 2 * * *"
    assert cron[0]["spec"]["concurrencyPolicy"] == "Forbid"


def test_no_dataflow_section_renders_nothing() -> None:
    spec = load_stack("dev").model_copy(update={"dataflow": None})
    comps = {c.kind: c.objects for c in build_manifests(build_plan(spec, "dev"))}
    assert comps[DATAFLOW] == ()


@pytest.mark.parametrize("stack", STACKS)
def test_credentials_only_by_secret_reference(stack: str) -> None:
    _spec, _plan, comps = _objects(stack)
    pods = _pods(comps[DATAFLOW])
    assert pods
    for pod in pods:
        env = {e["name"]: e for c in pod["containers"] for e in c["env"]}
        for name in ("KILN_S3_ACCESS_KEY", "KILN_S3_SECRET_KEY"):
            assert "value" not in env[name]
            assert env[name]["valueFrom"]["secretKeyRef"]["name"] == S3_SECRET_NAME
    cm = next(o for o in comps[DATAFLOW] if o["kind"] == "ConfigMap")
    text = next(iter(cm["data"].values()))
    assert "access_key_id" not in text and "credentials_secret" not in text


@pytest.mark.parametrize("stack", STACKS)
def test_pods_mount_the_lustre_root_claim_at_the_mount_point(stack: str) -> None:
    _spec, plan, comps = _objects(stack)
    claims = {o["metadata"]["name"] for o in comps[LUSTRE_CLIENT] + comps[DATAFLOW]
              if o["kind"] == "PersistentVolumeClaim"}
    for pod in _pods(comps[DATAFLOW]):
        vol = next(v for v in pod["volumes"] if v["name"] == "lustre")
        assert vol["persistentVolumeClaim"]["claimName"] in claims
        mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "lustre")
        assert mount["mountPath"] == plan.mount_point


@pytest.mark.parametrize("stack", STACKS)
def test_the_spec_configmap_loads_to_the_same_dataflow_plan(stack: str, tmp_path: Path) -> None:
    _spec, plan, comps = _objects(stack)
    cm = next(o for o in comps[DATAFLOW] if o["kind"] == "ConfigMap")
    ((name, text),) = cm["data"].items()
    (tmp_path / name).write_text(text)
    again = load_stack(str(tmp_path / name))
    assert build_plan(again, stack).dataflow == plan.dataflow


@pytest.mark.parametrize("stack", STACKS)
def test_the_policy_checks_pass(stack: str) -> None:
    _spec, plan, _comps = _objects(stack)
    assert violations(plan) == []


# ------------------------------------------------------------------------------------- metrics on Kubernetes


def _one(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (o,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return o


@pytest.mark.parametrize("stack", STACKS)
def test_the_mover_deployment_serves_metrics_that_a_servicemonitor_scrapes(stack: str) -> None:
    spec, plan, comps = _objects(stack)
    objs = comps[DATAFLOW]
    dep = _one(objs, "Deployment", "kiln-datamover")
    ctr = dep["spec"]["template"]["spec"]["containers"][0]
    args = ctr["args"]
    assert args[0] == "run" and args[args.index("--metrics-port") + 1] == str(metrics_port())
    assert ctr["ports"] == [{"name": "metrics", "containerPort": metrics_port(), "protocol": "TCP"}]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    svc = _one(objs, "Service", "kiln-datamover")
    assert svc["metadata"]["namespace"] == spec.kubernetes.training_namespace
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"
    mon = _one(objs, "ServiceMonitor", "kiln-datamover")
    assert mon["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (ep,) = mon["spec"]["endpoints"]
    assert ep["port"] == svc["spec"]["ports"][0]["name"] and ep["relabelings"] == [HOST_RELABEL]
    assert ep["interval"] == f"{plan.monitoring.scrape_interval_s}s"
    # the state directory the endpoint serves is the one every Job, CronJob and DaemonSet writes its status to
    dirs = {e["value"] for p in _pods(objs) for c in p["containers"] for e in c["env"] if e["name"] ==
            "KILN_DATA_STATE_DIR"}
    assert len(dirs) == 1 and dirs.pop().startswith(plan.mount_point + "/")


@pytest.mark.parametrize("stack", STACKS)
def test_only_prometheus_reaches_the_mover_pod(stack: str) -> None:
    spec, _plan, comps = _objects(stack)
    pol = _one(comps[DATAFLOW], "NetworkPolicy", "kiln-datamover-metrics")
    dep = _one(comps[DATAFLOW], "Deployment", "kiln-datamover")
    assert pol["spec"]["podSelector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert pol["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = pol["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": metrics_port()}]
    (peer,) = rule["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": spec.kubernetes.system_namespace}
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}


def test_stage_jobs_alone_still_get_the_metrics_endpoint() -> None:
    """No continuous link and no checkpoints: the Deployment only serves the stage Jobs' status files."""
    spec = load_stack("dev")
    spec = spec.model_copy(update={"dataflow": spec.dataflow.model_copy(update={"checkpoints": None})})
    objs = next(c.objects for c in build_manifests(build_plan(spec, "dev")) if c.kind == DATAFLOW)
    assert {o["kind"] for o in objs} >= {"Job", "Deployment", "Service", "ServiceMonitor"}


# ------------------------------------------------------------------------------------- model distribution


@pytest.mark.parametrize("stack", ["lab", "prod-h100"])
def test_models_are_distributed_by_a_daemonset_on_the_receiver_pool(stack: str) -> None:
    spec, plan, comps = _objects(stack)
    ns = spec.kubernetes.models_namespace
    assert ns not in (spec.kubernetes.training_namespace, spec.kubernetes.storage_namespace)
    sets = [o for o in comps[DATAFLOW] if o["kind"] == "DaemonSet"]
    entries = [m for m in plan.dataflow.models if m.events == "filer-subscribe"]
    assert len(sets) == len(entries) >= 1
    for i, (ds, m) in enumerate(zip(sets, entries, strict=True)):
        assert ds["metadata"]["namespace"] == ns and ds["metadata"]["name"] == f"kiln-models-{i}"
        pod = ds["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"kiln.io/pool": m.pool}
        (ctr,) = pod["containers"]
        args = ctr["args"]
        assert args[:4] == ["models", f"/etc/kiln/Pulumi.{stack}.yaml", "--index", str(i)]
        assert args[args.index("--relay") + 1] == f"{plan.mount_point}/{RELAY_SUBDIR}"
        assert args[args.index("--target") + 1] == m.target
        assert args[args.index("--filer") + 1] == f"seaweedfs-filer.{spec.kubernetes.storage_namespace}.svc:8888.18888"
        host = [v for v in pod["volumes"] if "hostPath" in v]
        assert host == [{"name": "receiver", "hostPath": {"path": m.target, "type": "Directory"}}]
        assert {"name": "receiver", "mountPath": m.target} in ctr["volumeMounts"]
        sc = ctr["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
        assert "privileged" not in sc and not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
        assert pod["automountServiceAccountToken"] is False
    # its namespace, Lustre claim (a PV bound to it), spec and S3 Secret
    assert any(o["kind"] == "Namespace" and o["metadata"]["name"] == ns for o in comps[GPU_NODE_STACK])
    claim = _one(comps[DATAFLOW], "PersistentVolumeClaim", "lustre-root")
    assert claim["metadata"]["namespace"] == ns
    pv = _one(comps[DATAFLOW], "PersistentVolume", claim["spec"]["volumeName"])
    assert pv["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "namespace": ns, "name": "lustre-root"}
    spec_maps = {o["metadata"]["namespace"] for o in comps[DATAFLOW] if o["metadata"]["name"] == SPEC_CONFIGMAP}
    assert spec_maps == {ns, spec.kubernetes.training_namespace}
    assert any(o["kind"] == "Secret" and o["metadata"]["name"] == S3_SECRET_NAME and o["metadata"]["namespace"] == ns
               for o in comps[OBJECT_STORE])


def test_a_stack_without_filer_events_renders_no_model_namespace() -> None:
    spec, _plan, comps = _objects("dev")
    names = {o["metadata"]["name"] for c in comps.values() for o in c}
    assert spec.kubernetes.models_namespace not in names
    assert not any(o["kind"] == "DaemonSet" for o in comps[DATAFLOW])


def test_model_pods_reach_the_filer_grpc_port_the_s3_gateway_and_dns_only() -> None:
    spec, plan, comps = _objects("prod-h100")
    ns, storage = spec.kubernetes.models_namespace, spec.kubernetes.storage_namespace
    own = _one(comps[DATAFLOW], "NetworkPolicy", "kiln-models")
    assert own["metadata"]["namespace"] == ns and own["spec"]["ingress"] == []
    assert own["spec"]["policyTypes"] == ["Ingress", "Egress"]
    # the SeaweedFS chart tells its pods apart by component (tests/fixtures/kubernetes: its pod labels)
    reach = {(peer["podSelector"]["matchLabels"].get("app.kubernetes.io/component") or
              peer["podSelector"]["matchLabels"].get("k8s-app"), p["port"])
             for rule in own["spec"]["egress"] for peer in rule["to"] for p in rule["ports"]}
    assert reach == {("filer", 18888), ("s3", plan.objectstore.s3_port), ("kube-dns", 53)}
    filer = _one(comps[DATAFLOW], "NetworkPolicy", "seaweedfs-filer-models")
    assert filer["metadata"]["namespace"] == storage
    (rule,) = filer["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 18888}]
    assert rule["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": ns}
    gateway = _one(comps[OBJECT_STORE], "NetworkPolicy", "seaweedfs-s3-gateway")
    allowed = gateway["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert ns in allowed
    backend = _one(comps[OBJECT_STORE], "NetworkPolicy", "seaweedfs-backend")
    assert ns not in str(backend)  # the filer's HTTP port and the masters and volumes stay closed to it
