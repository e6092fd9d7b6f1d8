"""ObjectStore: S3 credentials and endpoint for pods, SeaweedFS through its upstream chart, the buckets.

Secrets never carry their value here: each credentials Secret is rendered without data and annotated
with the Pulumi config key that holds the value; the Pulumi program fills it (`secret_string_data`), a
GitOps user creates it with the command in its annotation.
"""

from __future__ import annotations

import hashlib
import hmac
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
from kiln.render.manifests.dataflow import models_namespace
from kiln.render.manifests.helm import helm_release, helm_source
from kiln.render.manifests.workload import NO_API, POD_SECURITY, finished_after, unprivileged
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


#: Chart JWT switch (global.seaweedfs.securityConfig.jwtSigning) → the environment variable SeaweedFS reads for
#: that key instead of security.toml (SeaweedFS 4.44 weed/command/scaffold/security.toml; weed/util/config.go
#: GetViper: AutomaticEnv with prefix "weed" and '.' → '_', so jwt.filer_signing.read.key is
#: WEED_JWT_FILER_SIGNING_READ_KEY).
JWT_ENV: dict[str, str] = {
    "volumeWrite": "WEED_JWT_SIGNING_KEY",
    "volumeRead": "WEED_JWT_SIGNING_READ_KEY",
    "filerWrite": "WEED_JWT_FILER_SIGNING_KEY",
    "filerRead": "WEED_JWT_FILER_SIGNING_READ_KEY",
}


def jwt_env_names() -> list[str]:
    """The JWT signing-key variables the plan turns on, in the chart's switch order."""
    return [JWT_ENV[switch] for switch, on in kubernetes().seaweedfs.jwt_signing.value.items() if on]


def jwt_config_key() -> tuple[str, str]:
    """(Pulumi config namespace, key) of the stack secret the JWT signing keys are derived from."""
    ns, _, key = kubernetes().seaweedfs.jwt_config_key.value.partition(":")
    return ns, key


def seaweedfs_jwt_string_data(master_key: str) -> dict[str, str]:
    """The JWT Secret's data: one key per variable, HMAC-SHA256(master key, variable name) in hex (Pulumi only).

    Deterministic, so every `pulumi up` keeps the keys; distinct per variable, and none reveals the others or
    the master key.
    """
    if len(master_key) < 32:
        ns, key = jwt_config_key()
        raise ValueError(f"Pulumi config {ns}:{key} is shorter than 32 characters; fix: "
                         f"pulumi config set --secret {ns}:{key} \"$(openssl rand -hex 32)\"")
    return {name: hmac.new(master_key.encode(), name.encode(), hashlib.sha256).hexdigest() for name in jwt_env_names()}


def secret_string_data(plan: Plan, secret_name: str, secret_key: str) -> dict[str, str]:
    """The data of a data-less Secret this builder renders, given the S3 secret key (Pulumi program only)."""
    sw = kubernetes().seaweedfs
    if secret_name == sw.s3_config_secret.value:
        return {sw.s3_config_key.value: seaweedfs_s3_config(plan, secret_key)}
    if secret_name == S3_SECRET_NAME:
        return s3_secret_string_data(plan, secret_key)
    raise KeyError(f"no data recipe for Secret {secret_name!r}")


def _secret(c: Ctx, name: str, namespace: str, create: str, config_key: tuple[str, str] | None = None) -> Obj:
    ns_key = ":".join(config_key or credentials_config_key(c.plan))
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


def _jwt_secret(c: Ctx) -> Obj:
    """The SeaweedFS JWT signing-keys Secret, without data: Pulumi derives it from a stack secret; GitOps users
    create it from a 0600 env file of random keys (docs/security.md)."""
    sw = kubernetes().seaweedfs
    names = ",".join(jwt_env_names())
    create = (f"kubectl -n {c.storage} create secret generic {sw.jwt_secret.value} "
              f"--from-env-file=<0600 file with {names}, each a random key such as `openssl rand -hex 32`> "
              "--dry-run=client -o yaml | kubectl apply -f -")
    return _secret(c, sw.jwt_secret.value, c.storage, create, jwt_config_key())


def _s3_endpoint_configmap(c: Ctx, namespace: str) -> Obj:
    os_ = c.plan.objectstore
    data = {"S3_ENDPOINT": s3_endpoint(c.plan), "S3_BACKEND": os_.backend,
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
        if c.plan.kubernetes.storage_class:
            out["storageClass"] = c.plan.kubernetes.storage_class
        return out

    data_dir = {"name": sw.data_dir.value, **pvc(quantity_GB(os_.raw_capacity_TB / nodes)), "maxVolumes": 0}
    # JWT signing (SeaweedFS's own security): the chart's switches mount its security.toml on every server,
    # and the keys come from the JWT Secret as environment variables, which win over the file's keys.
    jwt_env = {name: {"secretKeyRef": {"name": sw.jwt_secret.value, "key": name}} for name in jwt_env_names()}
    return {
        "global": {"seaweedfs": {"securityConfig": {"jwtSigning": dict(sw.jwt_signing.value)},
                                 "extraEnvironmentVars": jwt_env}},
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
    container, tmp = unprivileged({"name": "buckets", "image": kubernetes().seaweedfs.bucket_image.value,
                                   "command": ["/bin/bash", "-c"], "args": [script],
                                   "envFrom": [{"secretRef": {"name": S3_SECRET_NAME}},
                                               {"configMapRef": {"name": S3_ENDPOINT_CONFIGMAP}}],
                                   "env": [{"name": "AWS_DEFAULT_REGION", "value": "us-east-1"}]},
                                  kubernetes().workloads.buckets.value)
    spec = finished_after({"backoffLimit": 10, "template": {
        "metadata": {"labels": c.labels(OBJECT_STORE, {"app.kubernetes.io/name": "kiln-buckets"})},
        "spec": {"restartPolicy": "OnFailure", "securityContext": dict(POD_SECURITY), **NO_API,
                 "containers": [container], "volumes": [tmp]}}},
        kubernetes().workloads.job_ttl_s.value)
    return obj("batch/v1", "Job", c.meta(OBJECT_STORE, "kiln-buckets", c.storage), spec=spec)


def object_store(c: Ctx) -> list[Obj]:
    objs: list[Obj] = []
    models = models_namespace(c)
    for ns in (c.storage, c.training, *([models] if models else [])):
        objs.append(_s3_secret(c, ns))
        objs.append(_s3_endpoint_configmap(c, ns))
    if c.plan.objectstore.backend == "seaweedfs":
        objs.append(_s3_config_secret(c))
        objs.append(_jwt_secret(c))
        objs.append(helm_source(c, OBJECT_STORE, "seaweedfs"))
        objs.append(helm_release(c, OBJECT_STORE, "seaweedfs", seaweedfs_values(c), namespace=c.storage))
    objs.append(_bucket_job(c))
    # Only the S3 gateway is reachable from training namespaces (docs/security.md).
    objs.extend(network_policies(c.plan, (models,) if models else ()))
    return objs
