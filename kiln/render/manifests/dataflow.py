"""DataMover: kiln's data mover (`kiln data`, docs/dataflow.md) as Kubernetes workloads on the Lustre CSI volume.

The Kubernetes equivalent of the datamover role's units:

    Job        kiln-stage-<link>   `kiln data stage` once, for each preload link not imported continuously
    CronJob    kiln-stage-<link>   `kiln data stage` on the link's cron schedule (import_trigger: schedule)
    Deployment kiln-datamover      `kiln data run`: continuous links and checkpoint write-back (one replica)

Every pod mounts the filesystem root's static claim (component LustreClient) at the plan's mount point, so a
link's directory is where the plan puts it, and keeps the mover's manifests on Lustre (STATE_DIR below), where
the Jobs, CronJobs and the Deployment share them. The stack's spec comes from a ConfigMap (without the S3
access key id and the secret's config name); the S3 access key and secret come from the S3 credentials Secret
(component ObjectStore) by reference, never inline. Model distribution (`kiln data models`) follows the
SeaweedFS filer into each receiver's local NVMe; it is not rendered here (docs/dataflow.md says why).
"""

from __future__ import annotations

import posixpath
from typing import Any

import yaml

from kiln.knowledge.kubernetes import kubernetes
from kiln.render.manifests.context import (
    DATAFLOW,
    S3_ENDPOINT_CONFIGMAP,
    S3_SECRET_NAME,
    Ctx,
    Obj,
    obj,
)
from kiln.render.manifests.lustre import lustre_claim_name
from kiln.spec.loader import CONFIG_KEY
from kiln.spec.types import dns_name

SPEC_CONFIGMAP = "kiln-dataflow-spec"
SPEC_DIR = "/etc/kiln"
STATE_SUBDIR = ".kiln-datamover"  # under the mount point: the mover's manifests and status files, on Lustre
# Spec fields left out of the ConfigMap: names that look like credentials to the policy checks, and that the pods
# take from the S3 Secret instead (KILN_S3_ACCESS_KEY).
_LEFT_OUT = {"objectstore": {"access_key_id", "credentials_secret"}}


def spec_document(c: Ctx) -> str:
    """The stack's spec as a stack file the mover loads (`kiln data ... /etc/kiln/Pulumi.<stack>.yaml`)."""
    data = c.spec.model_dump(mode="json", exclude_unset=True, exclude=_LEFT_OUT)
    return yaml.safe_dump({"config": {CONFIG_KEY: data}}, sort_keys=False, width=120)


def _spec_file(c: Ctx) -> str:
    return posixpath.join(SPEC_DIR, f"Pulumi.{c.plan.stack}.yaml")


def _state_dir(c: Ctx) -> str:
    return posixpath.join(c.plan.mount_point, STATE_SUBDIR)


def _pod(c: Ctx, name: str, args: list[str], restart: str) -> Obj:
    """The mover's pod template: kiln with the plan's tuning, the Lustre root claim, the S3 Secret by reference."""
    image = kubernetes().dataflow.mover_image.value
    env = [
        {"name": "KILN_S3_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": S3_SECRET_NAME,
                                                                      "key": "AWS_ACCESS_KEY_ID"}}},
        {"name": "KILN_S3_SECRET_KEY", "valueFrom": {"secretKeyRef": {"name": S3_SECRET_NAME,
                                                                      "key": "AWS_SECRET_ACCESS_KEY"}}},
        {"name": "KILN_S3_ENDPOINT", "valueFrom": {"configMapKeyRef": {"name": S3_ENDPOINT_CONFIGMAP,
                                                                       "key": "S3_ENDPOINT"}}},
        {"name": "KILN_DATA_STATE_DIR", "value": _state_dir(c)},
    ]
    container = {
        "name": "mover",
        "image": image,
        "command": ["kiln", "data"],
        "args": [*args, "--endpoint", "$(KILN_S3_ENDPOINT)"],
        "env": env,
        "volumeMounts": [{"name": "lustre", "mountPath": c.plan.mount_point},
                         {"name": "spec", "mountPath": SPEC_DIR, "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    return {
        "metadata": {"labels": c.labels(DATAFLOW, {"app.kubernetes.io/name": name})},
        "spec": {
            "restartPolicy": restart,
            "containers": [container],
            "volumes": [
                {"name": "lustre", "persistentVolumeClaim": {"claimName": lustre_claim_name(None)}},
                {"name": "spec", "configMap": {"name": SPEC_CONFIGMAP}},
            ],
        },
    }


def _stage_args(c: Ctx, link: str) -> list[str]:
    return ["stage", _spec_file(c), link]


def dataflow(c: Ctx) -> list[Obj]:
    """The mover's workloads; nothing when the stack has no dataflow section."""
    flow = c.plan.dataflow
    if flow is None:
        return []
    ns = c.training
    objs: list[Obj] = [obj("v1", "ConfigMap", c.meta(DATAFLOW, SPEC_CONFIGMAP, ns), data={
        f"Pulumi.{c.plan.stack}.yaml": spec_document(c)})]
    for link in flow.links:
        name = f"kiln-stage-{dns_name(link.name)}"
        annotations = {"kiln.io/link": f"{link.bucket}/{link.prefix} -> {link.mount_path}",
                       "kiln.io/layout": link.setstripe}
        if link.schedule is not None:
            job: dict[str, Any] = {"backoffLimit": 3, "template": _pod(c, name, _stage_args(c, link.name), "Never")}
            objs.append(obj("batch/v1", "CronJob", c.meta(DATAFLOW, name, ns, annotations=annotations), spec={
                "schedule": link.schedule, "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 3600,
                "jobTemplate": {"spec": job}}))
        elif link.import_policy == "preload" and link.import_trigger != "continuous":
            objs.append(obj("batch/v1", "Job", c.meta(DATAFLOW, name, ns, annotations=annotations), spec={
                "backoffLimit": 6, "template": _pod(c, name, _stage_args(c, link.name), "OnFailure")}))
    continuous = any(x.import_trigger == "continuous" or x.export_policy == "continuous" for x in flow.links)
    if continuous or flow.checkpoints is not None:
        name = "kiln-datamover"
        pod = _pod(c, name, ["run", _spec_file(c)], "Always")
        objs.append(obj("apps/v1", "Deployment", c.meta(DATAFLOW, name, ns), spec={
            # One replica: two `kiln data run` loops on one state directory would race on its manifests.
            "replicas": 1, "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}}, "template": pod}))
    return objs
