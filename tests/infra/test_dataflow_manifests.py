"""The DataMover component (kiln/render/manifests/dataflow.py): stage Jobs and CronJobs, the mover's Deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.render.manifests import DATAFLOW, LUSTRE_CLIENT, S3_SECRET_NAME, build_manifests
from kiln.render.manifests.dataflow import SPEC_CONFIGMAP
from kiln.render.policy import violations
from kiln.spec import load_stack

STACKS = ["dev", "lab", "prod-h100"]


def _objects(stack: str) -> tuple[Any, Any, dict[str, list[dict[str, Any]]]]:
    spec = load_stack(stack)
    plan = build_plan(spec, stack)
    comps = {c.kind: list(c.objects) for c in build_manifests(plan, spec)}
    return spec, plan, comps


def _pods(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for o in objs:
        if o["kind"] == "CronJob":
            out.append(o["spec"]["jobTemplate"]["spec"]["template"]["spec"])
        elif o["kind"] in ("Job", "Deployment"):
            out.append(o["spec"]["template"]["spec"])
    return out


def test_dev_preloads_its_link_with_a_job_and_writes_checkpoints_back_with_a_deployment() -> None:
    _spec, _plan, comps = _objects("dev")
    kinds = {(o["kind"], o["metadata"]["name"]) for o in comps[DATAFLOW]}
    assert kinds == {("ConfigMap", SPEC_CONFIGMAP), ("Job", "kiln-stage-pretrain"), ("Deployment", "kiln-datamover")}
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
    comps = {c.kind: c.objects for c in build_manifests(build_plan(spec, "dev"), spec)}
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
    claims = {o["metadata"]["name"] for o in comps[LUSTRE_CLIENT] if o["kind"] == "PersistentVolumeClaim"}
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
    spec, plan, _comps = _objects(stack)
    assert violations(plan, spec) == []
