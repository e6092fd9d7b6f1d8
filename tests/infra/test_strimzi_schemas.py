"""The token stream's Strimzi resources against the Strimzi 1.2.0 CRD schemas (openAPIV3Schema of the v1 version).

The CRDs are unmodified copies of strimzi-kafka-operator 1.2.0 packaging/install/cluster-operator/04x-Crd-*.yaml,
kept beside the repository in ../shared/schemas/strimzi-1.2.0/ (or $KILN_STRIMZI_SCHEMAS); without them the
schema tests skip with that reason.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from prometheus_client import CollectorRegistry

from kiln.plan import build_plan
from kiln.plan.kafka import CLUSTER
from kiln.render.manifests import TOKEN_STREAM, build_manifests
from kiln.render.manifests.kafka import CONSUMER_LABEL, CONSUMER_PORT, STRIMZI_API
from kiln.spec.loader import validate
from kiln.stream.consumer import stream_gauges
from kiln.yamlio import load
from tests.conftest import stack_data

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = Path(os.environ.get("KILN_STRIMZI_SCHEMAS", ROOT.parent / "shared" / "schemas" / "strimzi-1.2.0"))
KINDS = {"Kafka": "040-Crd-kafka.yaml", "KafkaTopic": "043-Crd-kafkatopic.yaml",
         "KafkaUser": "044-Crd-kafkauser.yaml", "KafkaNodePool": "045-Crd-kafkanodepool.yaml"}


def _strip(node: Any) -> Any:
    """The schema without the x-kubernetes-* extensions jsonschema does not know."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _schema(kind: str) -> dict[str, Any]:
    path = SCHEMAS / KINDS[kind]
    if not path.is_file():
        pytest.skip(f"not applicable here: the Strimzi 1.2.0 CRDs are absent ({path}); set KILN_STRIMZI_SCHEMAS")
    crd = load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == STRIMZI_API.split("/")[1]]
    return dict(_strip(version["schema"]["openAPIV3Schema"]))


def _stream(data: dict[str, Any]) -> list[dict[str, Any]]:
    plan = build_plan(validate(data, "test"), "test")
    (comp,) = [c for c in build_manifests(plan) if c.kind == TOKEN_STREAM]
    return [dict(o) for o in comp.objects if o["apiVersion"] == STRIMZI_API]


def _with_auth(auth: str) -> dict[str, Any]:
    data = copy.deepcopy(stack_data("prod-h100"))
    data["pipeline"]["kafka"]["auth"] = auth
    return data


@pytest.mark.parametrize("auth", ["none", "scram-sha-512", "tls"])
def test_every_strimzi_resource_validates_against_its_crd(auth: str) -> None:
    objects = _stream(_with_auth(auth))
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == (["Kafka", "KafkaNodePool", "KafkaTopic", "KafkaUser"] if auth != "none"
                     else ["Kafka", "KafkaNodePool", "KafkaTopic"])
    for o in objects:
        jsonschema.validate(o, _schema(o["kind"]))


def test_a_wrong_field_is_caught_by_the_schema() -> None:
    """The check can fail: a node pool without roles and a topic with a string partition count are refused."""
    objects = _stream(stack_data("prod-h100"))
    pool = copy.deepcopy(next(o for o in objects if o["kind"] == "KafkaNodePool"))
    del pool["spec"]["roles"]
    with pytest.raises(jsonschema.ValidationError, match="roles"):
        jsonschema.validate(pool, _schema("KafkaNodePool"))
    topic = copy.deepcopy(next(o for o in objects if o["kind"] == "KafkaTopic"))
    topic["spec"]["partitions"] = "many"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(topic, _schema("KafkaTopic"))


def test_the_plan_reaches_the_resources() -> None:
    objects = _stream(stack_data("prod-h100"))
    plan = build_plan(validate(stack_data("prod-h100"), "test"), "test")
    assert plan.kafka is not None
    (topic,) = [o for o in objects if o["kind"] == "KafkaTopic"]
    assert topic["spec"]["partitions"] == plan.kafka.topics[0].partitions
    assert topic["spec"]["config"]["unclean.leader.election.enable"] is False
    assert topic["spec"]["config"]["retention.ms"] == int(plan.kafka.topics[0].retention_hours * 3_600_000)
    pools = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "KafkaNodePool"}
    assert pools["brokers"]["replicas"] == plan.kafka.brokers and pools["brokers"]["roles"] == ["broker"]
    assert pools["controllers"]["replicas"] == plan.kafka.controllers
    (kafka,) = [o for o in objects if o["kind"] == "Kafka"]
    assert kafka["spec"]["kafka"]["version"] == "4.3.1"
    assert all(o["metadata"]["labels"]["strimzi.io/cluster"] == kafka["metadata"]["name"]
               for o in objects if o["kind"] != "Kafka")


def test_no_stream_renders_nothing_and_baremetal_renders_nothing_on_kubernetes() -> None:
    assert _stream(stack_data("dev")) == []
    data = copy.deepcopy(stack_data("prod-h100"))
    data["pipeline"]["kafka"].update(mode="baremetal", version="4.4.0", brokers=4)
    assert _stream(data) == []


def test_the_training_pods_stream_gauges_are_scraped_for_the_alerts_that_read_them() -> None:
    """The three alerts on the ranks' gauges (lag growing, runway low, retention behind a kept checkpoint) read
    metrics only the training pods serve: a PodMonitor scrapes every namespace's consuming pods by label on the
    named port, and every kiln_stream_* name the rules use is one kiln.stream's consumer registers."""
    plan = build_plan(validate(stack_data("prod-h100"), "test"), "test")
    (comp,) = [c for c in build_manifests(plan) if c.kind == TOKEN_STREAM]
    (monitor,) = [dict(o) for o in comp.objects if o["kind"] == "PodMonitor"]
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    assert monitor["spec"]["selector"]["matchLabels"] == {CONSUMER_LABEL: CLUSTER}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == CONSUMER_PORT
    used = {m for r in plan.monitoring.rules for m in re.findall(r"kiln_stream_\w+", r.expr)}
    registry = CollectorRegistry()
    stream_gauges(registry)
    registered = {m.name for m in registry.collect()}
    assert used and used <= registered, (used, registered)
