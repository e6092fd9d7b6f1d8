"""What every pod kiln renders carries (kiln/render/manifests/workload.py; docs/security.md, "Kubernetes workloads"):
requests and limits, no privilege escalation, the runtime's seccomp profile, a TTL on every finished Job (history
limits on a CronJob's), and no NET_RAW in the GPU benchmark pods."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kiln.plan import build_plan
from kiln.render.manifests import render_manifests
from kiln.spec import load_stack
from tests.conftest import ROOT, STACKS

GPU_PODS = ("nccl", "worker", "launcher")  # the NCCL benchmark: whole-node GPU and RDMA resources (docs/security.md)


def objects(stack: str) -> list[dict[str, Any]]:
    plan = build_plan(load_stack(stack, ROOT / "stacks"), source=stack)
    return [d for text in render_manifests(plan).values() for d in yaml.safe_load_all(text) if d]


def pods(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = doc.get("spec") or {}
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    if "template" in spec:
        yield spec["template"]["spec"]
    for replica in (spec.get("mpiReplicaSpecs") or {}).values():
        yield replica["template"]["spec"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_pod_is_bounded_and_unprivileged(stack: str) -> None:
    seen = 0
    for doc in objects(stack):
        if doc["kind"] == "Job":
            assert doc["spec"]["ttlSecondsAfterFinished"] > 0, doc["metadata"]["name"]
        if doc["kind"] == "MPIJob":
            assert doc["spec"]["runPolicy"]["ttlSecondsAfterFinished"] > 0
        if doc["kind"] == "CronJob":  # its history limits remove finished runs; a TTL on its Jobs would race them
            assert "ttlSecondsAfterFinished" not in doc["spec"]["jobTemplate"]["spec"], doc["metadata"]["name"]
            assert doc["spec"]["successfulJobsHistoryLimit"] > 0 and doc["spec"]["failedJobsHistoryLimit"] > 0
        for pod in pods(doc):
            for c in pod["containers"]:
                seen += 1
                where = f"{doc['kind']}/{doc['metadata']['name']}/{c['name']}"
                sc = c.get("securityContext") or {}
                if c["name"] in GPU_PODS:
                    assert "NET_RAW" in sc["capabilities"]["drop"], where
                    assert c["name"] == "launcher" or sc["allowPrivilegeEscalation"] is False, where
                    assert set(sc["capabilities"].get("add", [])) <= {"IPC_LOCK"}, where
                    continue
                assert {"cpu", "memory"} <= set(c["resources"]["requests"]) & set(c["resources"]["limits"]), where
                assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"], where
            if doc["kind"] != "MPIJob":
                assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", doc["metadata"]["name"]
            if doc["kind"] in ("Job", "CronJob") or doc["metadata"]["name"].startswith("kiln-datamover"):
                assert pod["automountServiceAccountToken"] is False, doc["metadata"]["name"]  # no API calls
    assert seen


def test_tools_that_need_no_root_run_as_nobody_on_a_read_only_root() -> None:
    docs = {d["metadata"]["name"]: d for d in objects("prod-h100")}
    for name in ("kiln-buckets", "kiln-s3-put", "kiln-s3-get"):
        pod = docs[name]["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert c["securityContext"]["runAsNonRoot"] is True and c["securityContext"]["runAsUser"] == 65534, name
        assert c["securityContext"]["readOnlyRootFilesystem"] is True and c["workingDir"] == "/tmp", name
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}} in pod["volumes"], name
