"""kiln/render/networkpolicy.py: who may reach which SeaweedFS port, evaluated with NetworkPolicy's rules
(a pod selected by an Ingress policy accepts only what some rule of some selecting policy allows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kiln.knowledge.kubernetes import kubernetes
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


def _peer(peer: dict[str, Any], own_ns: str, ns: str, labels: dict[str, str]) -> bool:
    """Whether a rule's peer (from or to) names the pod `labels` in namespace `ns`; without a namespaceSelector the
    peer is in the policy's own namespace."""
    ns_ok = (_matches(peer["namespaceSelector"], {"kubernetes.io/metadata.name": ns}) if "namespaceSelector" in peer
             else ns == own_ns)
    return ns_ok and ("podSelector" not in peer or _matches(peer["podSelector"], labels))


def _direction(policies: list[dict[str, Any]], kind: str, ns: str, pod: dict[str, str], peer_ns: str,
               peer: dict[str, str], port: int) -> bool:
    """NetworkPolicy's rule for one end: a pod no policy of this kind selects is not isolated; a selected one allows
    what some rule of some selecting policy allows (Kubernetes docs, "Network Policies", "Isolation")."""
    key, peers = ("ingress", "from") if kind == "Ingress" else ("egress", "to")
    selecting = [p for p in policies if p["metadata"]["namespace"] == ns
                 and _matches(p["spec"]["podSelector"], pod) and kind in p["spec"]["policyTypes"]]
    if not selecting:
        return True
    return any(port in [x["port"] for x in rule.get("ports", [])]
               and any(_peer(x, ns, peer_ns, peer) for x in rule.get(peers, []))
               for p in selecting for rule in p["spec"].get(key, []))


def allowed(policies: list[dict[str, Any]], src_ns: str, src: dict[str, str], dst_ns: str,
            dst: dict[str, str], port: int) -> bool:
    """A connection is made when the source's egress and the destination's ingress both allow it."""
    return (_direction(policies, "Egress", src_ns, src, dst_ns, dst, port)
            and _direction(policies, "Ingress", dst_ns, dst, src_ns, src, port))


#: How the SeaweedFS chart at the pinned version labels its pods, read from its templates (the file says where).
CHART_LABELS = yaml.safe_load((Path(__file__).resolve().parents[1] / "fixtures/kubernetes/"
                               "seaweedfs-4.44.0-pod-labels.yaml").read_text())


def _pod(role: str) -> dict[str, str]:
    """A SeaweedFS pod as the chart labels it (never as kiln's own selectors would have it)."""
    return dict(CHART_LABELS["pods"][role]["labels"])


def test_the_chart_labels_are_read_at_the_pinned_version() -> None:
    chart = kubernetes().charts["seaweedfs"]
    assert (CHART_LABELS["chart"], CHART_LABELS["version"], CHART_LABELS["release"]) == (
        chart.chart, chart.version, chart.release), "re-read the pod labels from the chart's templates at the new pin"


def test_every_seaweedfs_policy_selects_the_charts_pods(lab: Any) -> None:
    """A policy that selects no pod is no policy: each one's podSelector (and its SeaweedFS peers) match the pods
    the chart makes."""
    _plan, _spec, pols = lab
    mine = [p for p in pols if p["metadata"]["name"].startswith("seaweedfs-")]
    assert mine
    for p in mine:
        assert any(_matches(p["spec"]["podSelector"], _pod(r)) for r in CHART_LABELS["pods"]), p["metadata"]["name"]


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
