"""Acceptance: in-cluster Jobs that run the benchmarks and print the tools' raw output.

The Jobs do not judge: each prints what its tool prints (nccl-tests' table, fio's JSON, warp's JSON
analysis) and `kiln verify <stack> --from-jobs DIR` (or `--kubernetes`) reads the logs and judges them
with the parsers and the judge every other acceptance check uses, against the plan's targets.
`acceptance_jobs()` (kiln/plan/acceptance_jobs.py) is the contract between the two: Job name, the Job whose
log holds the output, the check and target group, and the tool that printed it.
"""

from __future__ import annotations

import json
import shlex
from typing import Any
from urllib.parse import urlparse

from kiln.knowledge.kubernetes import kubernetes
from kiln.plan.acceptance_jobs import (
    FIO_BEGIN,
    FIO_END,
    FIO_JOB,
    JobCheck,
    acceptance_jobs,
    acceptance_target,
)
from kiln.plan.groups import pool_group
from kiln.plan.model import Plan
from kiln.plan.serialize import target_dict
from kiln.render.manifests.context import (
    ACCEPTANCE,
    GPU_RESOURCE,
    S3_SECRET_NAME,
    TARGETS_CONFIGMAP,
    Ctx,
    Obj,
    obj,
    pool_label,
    pool_rails,
    rail_network_name,
    rail_resource,
    rdma_enabled,
    s3_endpoint,
)
from kiln.render.manifests.lustre import lustre_claim_name
from kiln.render.manifests.nccl import nccl_configmap_name
from kiln.render.manifests.workload import NO_API, POD_SECURITY, finished_after, restricted, unprivileged
from kiln.spec.types import dns_name

CHECK_ANNOTATION = "kiln.io/check"
GROUP_ANNOTATION = "kiln.io/target-group"
LOGS_ANNOTATION = "kiln.io/logs-from"
NCCL_TESTS_BINARY = "/opt/nccl_tests/build/all_reduce_perf"


def _targets_configmap(c: Ctx) -> Obj:
    """The plan's targets, for people reading the cluster; `kiln verify` judges against the plan itself."""
    rows = [json.dumps(target_dict(t), sort_keys=True, ensure_ascii=False) for t in c.plan.targets]
    data = {"targets.json": "[\n" + ",\n".join(rows) + "\n]\n"}
    meta = c.meta(ACCEPTANCE, TARGETS_CONFIGMAP, c.training, annotations={"kiln.io/plan-digest": c.plan.spec_digest})
    return obj("v1", "ConfigMap", meta, data=data)


def _judged(checks: list[JobCheck]) -> dict[str, str]:
    first = checks[0]
    out = {CHECK_ANNOTATION: ",".join(jc.check for jc in checks),
           "kiln.io/judged-by": f"kiln verify --from-jobs (kubectl logs job/{first.log_job})"}
    if first.group:
        out[GROUP_ANNOTATION] = first.group
    if first.log_job != first.job:
        out[LOGS_ANNOTATION] = f"job/{first.log_job}"
    return out


def _gpu_pod(c: Ctx, pool: str, gpus: int, container: Obj) -> tuple[Obj, dict[str, str]]:
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
                 # IPC_LOCK: RDMA memory registration; NET_RAW (raw sockets) is in the runtime's default set and
                 # nothing here needs it
                 "securityContext": {"allowPrivilegeEscalation": False,
                                     "capabilities": {"add": ["IPC_LOCK"], "drop": ["NET_RAW"]}},
                 "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    pod = {"nodeSelector": {pool_label(): pool},
           "containers": [container],
           "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}
    return pod, annotations


def _job(c: Ctx, name: str, pod: Obj, judged: dict[str, str], annotations: dict[str, str] | None = None,
         backoff: int = 0) -> Obj:
    sel = {"app.kubernetes.io/name": name}
    template_meta: Obj = {"labels": c.labels(ACCEPTANCE, sel)}
    if annotations:
        template_meta["annotations"] = annotations
    pod_spec = {"restartPolicy": "Never", "securityContext": dict(POD_SECURITY), **NO_API, **pod}
    spec = finished_after({"backoffLimit": backoff, "template": {"metadata": template_meta, "spec": pod_spec}},
                          kubernetes().workloads.acceptance_ttl_s.value)
    # NOTE: skipAwait keeps `pulumi up` from blocking on the benchmarks; Flux and kubectl ignore it.
    meta = c.meta(ACCEPTANCE, name, c.training, labels=sel, annotations={"pulumi.com/skipAwait": "true", **judged})
    return obj("batch/v1", "Job", meta, spec=spec)


def _nccl_args() -> list[str]:
    return shlex.split(kubernetes().acceptance.nccl_tests_args.value)


def _check_env(c: Ctx, jc: JobCheck) -> list[dict[str, str]]:
    """The environment the plan's target asks the check to set (NCCL_ALGO), so its figure is comparable."""
    t = acceptance_target(c.plan, jc.check, jc.group)
    return [{"name": k, "value": v} for k, v in (t.env if t is not None else ())]


def _nccl_intra(c: Ctx, pool: str, gpus: int, jc: JobCheck) -> Obj:
    container: Obj = {"name": "nccl", "image": kubernetes().acceptance.nccl_tests_image.value,
                      "command": [NCCL_TESTS_BINARY], "args": [*_nccl_args(), "-g", str(gpus)]}
    if env := _check_env(c, jc):
        container["env"] = env
    pod, annotations = _gpu_pod(c, pool, gpus, container)
    return _job(c, jc.job, pod, _judged([jc]), annotations)


def _nccl_inter(c: Ctx, pool: str, nodes: int, gpus: int, jc: JobCheck) -> Obj:
    """MPIJob across every node of the pool: one worker per node, one rank per GPU."""
    check_env = _check_env(c, jc)
    env_flags = [a for k in next(p for p in c.plan.nccl if p.pool == pool).env for a in ("-x", k)]
    env_flags += [a for e in check_env for a in ("-x", e["name"])]
    image = kubernetes().acceptance.nccl_tests_image.value
    sel = {"app.kubernetes.io/name": jc.job}
    launcher = {"name": "launcher", "image": image, "command": ["mpirun"],
                "args": ["--allow-run-as-root", "-np", str(nodes * gpus), "-npernode", str(gpus), "--bind-to", "none",
                         *env_flags, NCCL_TESTS_BINARY, *_nccl_args(), "-g", "1"],
                "envFrom": [{"configMapRef": {"name": nccl_configmap_name(pool)}}],
                "securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}
    if check_env:
        launcher["env"] = check_env
    worker, annotations = _gpu_pod(c, pool, gpus, {"name": "worker", "image": image,
                                                    "command": ["/usr/sbin/sshd", "-De"]})
    worker["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": sel}, "topologyKey": "kubernetes.io/hostname"}]}}
    worker_meta: Obj = {"labels": c.labels(ACCEPTANCE, sel)}
    if annotations:
        worker_meta["annotations"] = annotations
    spec = {
        "slotsPerWorker": gpus,
        "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0,
                      "ttlSecondsAfterFinished": kubernetes().workloads.acceptance_ttl_s.value},
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"metadata": {"labels": c.labels(ACCEPTANCE)},
                                                     "spec": {"restartPolicy": "Never", "containers": [launcher]}}},
            "Worker": {"replicas": nodes, "template": {"metadata": worker_meta, "spec": worker}},
        },
    }
    return obj("kubeflow.org/v2beta1", "MPIJob", c.meta(ACCEPTANCE, jc.job, c.training, labels=sel,
                                                         annotations=_judged([jc])), spec=spec)


def _fio_claim(plan: Plan) -> str:
    """The PVC fio writes into: a scratch directory, else checkpoints, else the filesystem root."""
    for purpose in ("scratch", "checkpoints"):
        layout = next((lay for lay in plan.layouts if lay.purpose == purpose), None)
        if layout is not None:
            return lustre_claim_name(layout)
    return lustre_claim_name(None)


def _fio_lustre(c: Ctx, checks: list[JobCheck]) -> Obj:
    """Single-client Lustre write then read (fio); each pass's JSON is printed between FIO_BEGIN/FIO_END lines."""
    a = kubernetes().acceptance
    pool = c.plan.compute_pools[0]
    jobs = a.fio_numjobs.value
    size = max(a.fio_min_size_GiB.value, c.plan.acceptance.fio_size_factor * pool.ram_GiB / jobs)
    common = (f"--directory=/data/kiln-acceptance/$HOSTNAME --numjobs={jobs} --size={int(size)}G "
              f"--bs={a.fio_block_size.value} --ioengine=libaio --direct=0 --output-format=json "
              "--filename_format='kiln.$jobnum'")  # NOTE: the read pass reads the files the write pass wrote
    script = "set -eu\nmkdir -p /data/kiln-acceptance/$HOSTNAME\nrc=0\n"
    for op in ("write", "read"):
        # NOTE: fio writes its JSON to a file and the frame holds only that file, so fio's notes on stderr
        # (in the same pod log) never land inside the JSON.
        script += (f"fio --name=kiln-{op} --rw={op} {common} --output=/tmp/fio-{op}.json || rc=1\n"
                   f"echo '{FIO_BEGIN.format(op=op)}'\n"
                   f"cat /tmp/fio-{op}.json || true\n"
                   f"echo '{FIO_END.format(op=op)}'\n")
    script += "rm -rf /data/kiln-acceptance/$HOSTNAME\nexit $rc\n"
    container = restricted({"name": "fio", "image": a.fio_image.value, "command": ["/bin/sh", "-c"],
                            "args": [script], "volumeMounts": [{"name": "lustre", "mountPath": "/data"}]},
                           kubernetes().workloads.fio.value)
    pod = {"nodeSelector": {pool_label(): pool.name}, "containers": [container],
           "volumes": [{"name": "lustre", "persistentVolumeClaim": {"claimName": _fio_claim(c.plan)}}]}
    return _job(c, FIO_JOB, pod, _judged(checks))


def warp_bucket(plan: Plan) -> str:
    """warp's own bucket (it creates it and deletes only what it wrote), never a data bucket of the plan."""
    return f"kiln-warp-{dns_name(plan.stack)}"[:63]


def _warp(c: Ctx, op: str, jc: JobCheck) -> Obj:
    """S3 PUT or GET throughput (warp --json); the image has no shell, the log is warp's own output."""
    a = kubernetes().acceptance
    endpoint = urlparse(s3_endpoint(c.plan))
    tls = endpoint.scheme == "https"
    host = endpoint.netloc if endpoint.port else f"{endpoint.hostname}:{443 if tls else 80}"
    args = [op, f"--bucket={warp_bucket(c.plan)}", f"--duration={a.warp_duration.value}", "--autoterm", "--json",
            "--no-color"]
    if tls:
        args.append("--tls")
    env = [{"name": "WARP_HOST", "value": host},
           {"name": "WARP_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": S3_SECRET_NAME,
                                                                     "key": "AWS_ACCESS_KEY_ID"}}},
           {"name": "WARP_SECRET_KEY", "valueFrom": {"secretKeyRef": {"name": S3_SECRET_NAME,
                                                                     "key": "AWS_SECRET_ACCESS_KEY"}}}]
    # warp writes its result file into its working directory: /tmp, on the pod's own scratch volume
    container, tmp = unprivileged({"name": "warp", "image": a.warp_image.value, "args": args, "env": env},
                                  kubernetes().workloads.warp.value)
    return _job(c, jc.job, {"containers": [container], "volumes": [tmp]}, _judged([jc]))


def acceptance(c: Ctx) -> list[Obj]:
    objs = [_targets_configmap(c)]
    pools = {p.name: p for p in c.plan.compute_pools}
    checks = acceptance_jobs(c.plan)
    fio = [jc for jc in checks if jc.tool.startswith("fio-")]
    for jc in checks:
        pool = next((p for p in pools.values() if jc.group == pool_group(p.name)), None)
        if jc.check == "fabric.nccl_allreduce_intra" and pool is not None:
            objs.append(_nccl_intra(c, pool.name, pool.gpus_per_node, jc))
        elif jc.check == "fabric.nccl_allreduce_inter" and pool is not None:
            objs.append(_nccl_inter(c, pool.name, pool.nodes, pool.gpus_per_node, jc))
        elif jc.tool == "fio-write":
            objs.append(_fio_lustre(c, fio))
        elif jc.tool.startswith("warp-"):
            objs.append(_warp(c, jc.tool.removeprefix("warp-"), jc))
    return objs
