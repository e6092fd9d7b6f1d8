"""ObjectStore: S3 credentials and endpoint for pods, SeaweedFS through its upstream chart, the buckets.

Secrets never carry their value here: each credentials Secret is rendered without data and annotated
with the Pulumi config key that holds the value; the Pulumi program fills it (`secret_string_data`), a
GitOps user creates it with the command in its annotation.
"""

from __future__ import annotations

import json
import shlex

from kiln.knowledge.kubernetes import kubernetes
from kiln.plan.model import Plan
from kiln.render.manifests.context import (
    CREATE_WITH_ANNOTATION,
    OBJECT_STORE,
    S3_ENDPOINT_CONFIGMAP,
    S3_SECRET_NAME,
    SECRET_SOURCE_ANNOTATION,
    Ctx,
    Obj,
    credentials_config_key,
    obj,
    quantity_GB,
    role_label,
    s3_endpoint,
)
from kiln.render.manifests.helm import helm_release, helm_source
from kiln.render.networkpolicy import network_policies


def s3_secret_string_data(plan: Plan, secret_key: str) -> dict[str, str]:
    """The S3 credentials Secret's data; only the Pulumi program calls this, with a Pulumi secret's value."""
    return {"AWS_ACCESS_KEY_ID": plan.objectstore.access_key_id, "AWS_SECRET_ACCESS_KEY": secret_key}


def seaweedfs_s3_config(plan: Plan, secret_key: str) -> str:
    """The SeaweedFS S3 gateway's identities JSON: the plan's one identity (chart s3.existingConfigSecret)."""
    actions = kubernetes().seaweedfs.s3_actions.value
    ident = {"name": "kiln", "credentials": [{"accessKey": plan.objectstore.access_key_id, "secretKey": secret_key}],
             "actions": list(actions)}
    return json.dumps({"identities": [ident]})


def secret_string_data(plan: Plan, secret_name: str, secret_key: str) -> dict[str, str]:
    """The data of a data-less Secret this builder renders, given the S3 secret key (Pulumi program only)."""
    sw = kubernetes().seaweedfs
    if secret_name == sw.s3_config_secret.value:
        return {sw.s3_config_key.value: seaweedfs_s3_config(plan, secret_key)}
    if secret_name == S3_SECRET_NAME:
        return s3_secret_string_data(plan, secret_key)
    raise KeyError(f"no data recipe for Secret {secret_name!r}")


def _secret(c: Ctx, name: str, namespace: str, create: str) -> Obj:
    ns_key = ":".join(credentials_config_key(c.plan))
    # NOTE: Flux creates the data-less Secret only if it is absent and never updates it, so the data an
    # operator puts in it is kept; Pulumi ignores the annotation.
    meta = c.meta(OBJECT_STORE, name, namespace,
                  annotations={SECRET_SOURCE_ANNOTATION: f"pulumi-config:{ns_key}", CREATE_WITH_ANNOTATION: create,
                               "kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"})
    return obj("v1", "Secret", meta, type="Opaque")


def _s3_secret(c: Ctx, namespace: str) -> Obj:
    """The credentials Secret, without data: Pulumi fills it from a Pulumi secret; GitOps users create it."""
    # The values come from a 0600 env file (AWS_ACCESS_KEY_ID=..., AWS_SECRET_ACCESS_KEY=...), never from
    # kubectl's argv, where any user of the machine could read them in `ps` (docs/security.md).
    create = (f"kubectl -n {namespace} create secret generic {S3_SECRET_NAME} "
              "--from-env-file=<0600 file with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY> "
              "--dry-run=client -o yaml | kubectl apply -f -")
    return _secret(c, S3_SECRET_NAME, namespace, create)


def _s3_config_secret(c: Ctx) -> Obj:
    """The SeaweedFS S3 identities Secret, without data (same secret key as the credentials Secret)."""
    sw = kubernetes().seaweedfs
    # The identities JSON holds the secret key: it comes from a 0600 file, never from kubectl's argv.
    create = (f"kubectl -n {c.storage} create secret generic {sw.s3_config_secret.value} "
              f"--from-file={sw.s3_config_key.value}=<0600 file with the SeaweedFS S3 identities JSON> "
              "--dry-run=client -o yaml | kubectl apply -f -")
    return _secret(c, sw.s3_config_secret.value, c.storage, create)


def _s3_endpoint_configmap(c: Ctx, namespace: str) -> Obj:
    os_ = c.plan.objectstore
    data = {"S3_ENDPOINT": s3_endpoint(c.plan, c.spec), "S3_BACKEND": os_.backend,
            "S3_BUCKETS": " ".join(b.name for b in os_.buckets)}
    return obj("v1", "ConfigMap", c.meta(OBJECT_STORE, S3_ENDPOINT_CONFIGMAP, namespace), data=data)


def seaweedfs_values(c: Ctx) -> Obj:
    """SeaweedFS chart values (k8s/charts/seaweedfs/values.yaml at the pinned chart) from the plan's object store.

    Masters: one, or three once the plan has three object-store nodes; one volume server per object-store
    node (nodes labelled with that role; the chart's default anti-affinity spreads them), each with one
    PVC of the node's share of the raw capacity; one filer; one S3 gateway per node with the kit's identity.
    """
    os_ = c.plan.objectstore
    sw = kubernetes().seaweedfs
    nodes = len(os_.hosts)
    rule = sw.masters.value
    masters = rule.single if nodes < rule.quorum_nodes else rule.quorum_nodes

    def pvc(size: str) -> Obj:
        out: Obj = {"type": "persistentVolumeClaim", "size": size}
        if c.spec.kubernetes.storage_class:
            out["storageClass"] = c.spec.kubernetes.storage_class
        return out

    data_dir = {"name": sw.data_dir.value, **pvc(quantity_GB(os_.raw_capacity_TB / nodes)), "maxVolumes": 0}
    return {
        "master": {"replicas": masters, "defaultReplication": os_.replication, "data": pvc(sw.metadata_volume.value)},
        "volume": {"replicas": nodes, "dataDirs": [data_dir], "nodeSelector": f"{role_label()}: objectstore"},
        "filer": {"replicas": 1, "data": pvc(sw.metadata_volume.value)},
        "s3": {"enabled": True, "replicas": nodes, "port": os_.s3_port, "enableAuth": True,
               "existingConfigSecret": sw.s3_config_secret.value},
    }


def _bucket_job(c: Ctx) -> Obj:
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
    container = {"name": "buckets", "image": kubernetes().seaweedfs.bucket_image.value,
                 "command": ["/bin/bash", "-c"], "args": [script],
                 "envFrom": [{"secretRef": {"name": S3_SECRET_NAME}},
                             {"configMapRef": {"name": S3_ENDPOINT_CONFIGMAP}}],
                 "env": [{"name": "AWS_DEFAULT_REGION", "value": "us-east-1"}]}
    spec = {"backoffLimit": 10,
            "template": {"metadata": {"labels": c.labels(OBJECT_STORE, {"app.kubernetes.io/name": "kiln-buckets"})},
                         "spec": {"restartPolicy": "OnFailure", "containers": [container]}}}
    return obj("batch/v1", "Job", c.meta(OBJECT_STORE, "kiln-buckets", c.storage), spec=spec)


def object_store(c: Ctx) -> list[Obj]:
    objs: list[Obj] = []
    for ns in (c.storage, c.training):
        objs.append(_s3_secret(c, ns))
        objs.append(_s3_endpoint_configmap(c, ns))
    if c.plan.objectstore.backend == "seaweedfs":
        objs.append(_s3_config_secret(c))
        objs.append(helm_source(c, OBJECT_STORE, "seaweedfs"))
        objs.append(helm_release(c, OBJECT_STORE, "seaweedfs", seaweedfs_values(c), namespace=c.storage))
    objs.append(_bucket_job(c))
    # Only the S3 gateway is reachable from training namespaces (docs/security.md).
    objs.extend(network_policies(c.plan, c.spec))
    return objs
