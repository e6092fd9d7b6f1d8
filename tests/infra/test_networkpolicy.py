"""kiln/render/networkpolicy.py: who may reach which SeaweedFS port, evaluated with NetworkPolicy's rules
(a pod selected by an Ingress policy accepts only what some rule of some selecting policy allows)."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.render.manifests import build_manifests
from kiln.render.manifests.dataflow import metrics_port
from kiln.render.networkpolicy import network_policies
from kiln.spec import load_stack


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        assert e["operator"] == "In", e  # the only operator the module uses
        if labels.get(e["key"]) not in e["values"]:
            return False
    return True


def allowed(policies: list[dict[str, Any]], src_ns: str, src: dict[str, str], dst_ns: str,
            dst: dict[str, str], port: int) -> bool:
    selecting = [p for p in policies if p["metadata"]["namespace"] == dst_ns
                 and _matches(p["spec"]["podSelector"], dst) and "Ingress" in p["spec"]["policyTypes"]]
    if not selecting:
        return True  # not isolated
    for p in selecting:
        for rule in p["spec"].get("ingress", []):
            if port not in [x["port"] for x in rule.get("ports", [])]:
                continue
            for peer in rule["from"]:
                ns_ok = ("namespaceSelector" in peer
                         and _matches(peer["namespaceSelector"], {"kubernetes.io/metadata.name": src_ns})) \
                    or ("namespaceSelector" not in peer and src_ns == dst_ns)
                pod_ok = "podSelector" not in peer or _matches(peer["podSelector"], src)
                if ns_ok and pod_ok:
                    return True
    return False


def _pod(role: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": f"seaweedfs-{role}"}


@pytest.fixture(scope="module")
def lab() -> tuple[Any, Any, list[dict[str, Any]]]:
    spec = load_stack("lab")
    plan = build_plan(spec, "lab")
    # every NetworkPolicy the stack renders (ObjectStore's and DataMover's), as a cluster would hold them
    return plan, spec, [o for c in build_manifests(plan) for o in c.objects if o["kind"] == "NetworkPolicy"]


def test_training_pods_reach_only_the_s3_gateway(lab: Any) -> None:
    plan, spec, pols = lab
    st, tr = spec.kubernetes.storage_namespace, spec.kubernetes.training_namespace
    job = {"app": "trainer"}
    assert allowed(pols, tr, job, st, _pod("s3"), plan.objectstore.s3_port)
    for role, port in (("master", 9333), ("master", 19333), ("volume", 8080), ("volume", 18080),
                       ("filer", 8888), ("filer", 18888)):
        assert not allowed(pols, tr, job, st, _pod(role), port), (role, port)
        assert not allowed(pols, "default", job, st, _pod(role), port), (role, port)
    assert not allowed(pols, "default", job, st, _pod("s3"), plan.objectstore.s3_port)
    assert not allowed(pols, tr, job, st, _pod("s3"), 9333)  # only the S3 port of the gateway


def test_seaweedfs_servers_still_reach_each_other(lab: Any) -> None:
    plan, spec, pols = lab
    st = spec.kubernetes.storage_namespace
    assert allowed(pols, st, _pod("s3"), st, _pod("filer"), 8888)
    assert allowed(pols, st, _pod("filer"), st, _pod("volume"), 8080)
    assert allowed(pols, st, _pod("volume"), st, _pod("master"), 19333)
    assert not allowed(pols, st, {"job-name": "kiln-buckets"}, st, _pod("filer"), 8888)  # the bucket Job uses S3
    assert allowed(pols, st, {"job-name": "kiln-buckets"}, st, _pod("s3"), plan.objectstore.s3_port)


def test_policies_are_part_of_the_object_store_component(lab: Any) -> None:
    plan, spec, pols = lab
    comp = next(c for c in build_manifests(plan) if c.kind.file == "object-store.yaml")
    mine = [o for o in comp.objects if o["kind"] == "NetworkPolicy"]
    assert mine == network_policies(plan, (spec.kubernetes.models_namespace,))
    assert {p["metadata"]["name"] for p in mine} == {"seaweedfs-backend", "seaweedfs-s3-gateway"}
    assert {p["metadata"]["name"] for p in pols} - {p["metadata"]["name"] for p in mine} == {
        "kiln-datamover-metrics", "kiln-models", "seaweedfs-filer-models"}  # component DataMover's


def test_model_pods_reach_the_filer_grpc_port_and_the_s3_gateway_only(lab: Any) -> None:
    plan, spec, pols = lab
    st, models = spec.kubernetes.storage_namespace, spec.kubernetes.models_namespace
    pod = {"app.kubernetes.io/name": "kiln-models"}
    assert allowed(pols, models, pod, st, _pod("filer"), 18888)
    assert allowed(pols, models, pod, st, _pod("s3"), plan.objectstore.s3_port)
    for role, port in (("master", 9333), ("master", 19333), ("volume", 8080), ("volume", 18080), ("filer", 8888)):
        assert not allowed(pols, models, pod, st, _pod(role), port), (role, port)
    # another pod in that namespace, or the same labels elsewhere, get nothing
    assert not allowed(pols, models, {"app": "other"}, st, _pod("filer"), 18888)
    assert not allowed(pols, spec.kubernetes.training_namespace, pod, st, _pod("filer"), 18888)
    # and nothing connects to the model pods
    assert not allowed(pols, st, _pod("filer"), models, pod, 8080)


def test_only_prometheus_reaches_the_mover_metrics_port(lab: Any) -> None:
    _plan, spec, pols = lab
    tr, system = spec.kubernetes.training_namespace, spec.kubernetes.system_namespace
    mover = {"app.kubernetes.io/name": "kiln-datamover"}
    prometheus = {"app.kubernetes.io/name": "prometheus"}
    assert allowed(pols, system, prometheus, tr, mover, metrics_port())
    assert not allowed(pols, tr, {"app": "trainer"}, tr, mover, metrics_port())
    assert not allowed(pols, system, {"app.kubernetes.io/name": "grafana"}, tr, mover, metrics_port())
    assert not allowed(pols, system, prometheus, tr, mover, 8080)
