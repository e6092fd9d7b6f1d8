"""The token stream's plan (kiln.plan.kafka): rates, retention, partitions and brokers from the spec and the
knowledge base, and the spec inputs the planner refuses."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kiln import knowledge
from kiln.plan import build_plan
from kiln.plan.model import KafkaPlan
from kiln.spec import validate
from tests.conftest import stack_data
from tests.unit.refusals import DROP, Refusal, edited, refusal, refused

T0 = "pipeline.kafka.topics.0"


def _plan(edit: dict[str, Any] | None = None) -> KafkaPlan:
    plan = build_plan(validate(edited(stack_data("prod-h100"), edit or {}), "test"), "test")
    assert plan.kafka is not None
    return plan.kafka


def test_the_token_rate_is_derived_from_the_model_the_gpus_and_the_mfu() -> None:
    k = knowledge.load().kafka
    (topic,) = _plan({f"{T0}.consumers.tokens_per_s_per_node": DROP}).topics
    want = 8 * k.gpu_peak_bf16_tflops["h100-sxm"].value * 1e12 * k.mfu.value / (6 * 70e9)  # the workload's 70B
    assert topic.tokens_per_s_node == pytest.approx(want, rel=1e-4)
    assert "70 B parameters" in topic.tokens_per_s_how
    given = _plan().topics[0]  # prod-h100 gives the published rate
    assert given.tokens_per_s_node == 4800 and given.tokens_per_s_how.startswith("given")


def test_bytes_ingress_and_retained_bytes_follow_the_codec_and_the_replication() -> None:
    k = knowledge.load().kafka
    rate = {f"{T0}.consumers.tokens_per_s_per_node": 5000}
    zstd = _plan(rate).topics[0]
    assert zstd.bytes_per_token == pytest.approx(4 / k.codec_ratio["uint32"]["zstd"].value, rel=1e-3)
    assert zstd.consume_MBps == pytest.approx(128 * 5000 * zstd.bytes_per_token / 1e6, rel=1e-3)
    assert zstd.ingress_MBps == pytest.approx(zstd.consume_MBps * k.replay_headroom.value, rel=1e-3)
    assert zstd.retained_GB == pytest.approx(zstd.ingress_MBps * zstd.retention_hours * 3600 * 3 / 1000, rel=1e-3)
    raw = _plan({**rate, f"{T0}.compression": "none"}).topics[0]
    assert raw.bytes_per_token == 4 and raw.retained_GB > zstd.retained_GB


def test_auto_retention_covers_the_oldest_checkpoint_and_the_restart() -> None:
    (topic,) = _plan({f"{T0}.consumers.checkpoints_kept": 10, f"{T0}.consumers.checkpoint_interval_min": 120}).topics
    assert topic.retention_needed_hours == pytest.approx((10 * 120 + 60) / 60)
    assert topic.retention_hours == math.ceil(topic.retention_needed_hours * 1.5)
    assert _plan().topics[0].retention_hours == 24  # never below a day


@pytest.mark.parametrize("consumers, nodes", [(8, 1), (16, 2), (24, 3), (1024, 128), (40, 5)])
def test_auto_partitions_split_evenly_now_and_after_a_resize(consumers: int, nodes: int) -> None:
    (topic,) = _plan({"compute.pools.0.nodes": nodes}).topics
    assert topic.consumers == consumers
    assert topic.partitions % consumers == 0
    assert all(topic.partitions % d == 0 for d in (2, 3, 4, 6, 12))


def test_brokers_are_the_most_any_constraint_needs() -> None:
    small_disk = _plan({"pipeline.kafka.storage_GB_per_broker": 50, f"{T0}.compression": "none"})
    assert small_disk.brokers == max(small_disk.brokers_by.values())
    assert small_disk.brokers_by["retention"] > small_disk.brokers_by["replication"] == 3
    assert _plan().brokers == 3


def test_settings_carry_their_reason_and_source() -> None:
    k = _plan()
    settings = [*k.producer, *k.consumer, *k.broker, *k.topics[0].settings]
    assert all(s.reason and s.source for s in settings)
    by = {s.name: s.value for s in settings}
    assert by["acks"] == "all" and by["enable.idempotence"] == "true" and by["enable.auto.commit"] == "false"
    assert by["unclean.leader.election.enable"] == "false"


def test_an_even_controller_quorum_is_a_warning() -> None:
    plan = build_plan(validate(edited(stack_data("prod-h100"), {"pipeline.kafka.controllers": 4}), "t"), "t")
    assert any(w.path == "pipeline.kafka.controllers" for w in plan.warnings)


REFUSALS = [
    refusal("retention shorter than the oldest checkpoint plus the restart", "prod-h100",
            {f"{T0}.retention_hours": 2}, "pipeline.kafka.topics[0].retention_hours", value=2,
            problem=("offsets deleted", "2.50 h"), fix=("at least 3",), plan=True),
    refusal("partitions not a multiple of the consumers", "prod-h100", {f"{T0}.partitions": 1000},
            "pipeline.kafka.topics[0].partitions", value=1000, problem=("1024 consumers",), fix=("3072",),
            plan=True),
    refusal("more in-sync replicas than replicas", "prod-h100", {f"{T0}.min_insync_replicas": 4},
            "pipeline.kafka.topics[0].min_insync_replicas", value=4, fix=("at most 3",), plan=True),
    refusal("a Kafka version Strimzi 1.2.0 does not run", "prod-h100", {"pipeline.kafka.version": "4.4.0"},
            "pipeline.kafka.version", value="4.4.0", problem=("Strimzi 1.2.0",), fix=("4.3.1",), plan=True),
    refusal("fewer brokers than the replication", "prod-h100", {"pipeline.kafka.brokers": 2},
            "pipeline.kafka.brokers", value=2, problem=("needs 3",), fix=("set 3",), plan=True),
    refusal("bare-metal brokers left to auto", "prod-h100", {"pipeline.kafka.mode": "baremetal"},
            "pipeline.kafka.brokers", value="auto", problem=("hosts",), fix=("at least 3",), plan=True),
    refusal("a log disk smaller than one segment", "prod-h100", {"pipeline.kafka.storage_GB_per_broker": 5e-324},
            "pipeline.kafka.storage_GB_per_broker", value=5e-324, fix=("greater than or equal to 1",)),
    refusal("combined controllers on Strimzi", "prod-h100", {"pipeline.kafka.combined": True},
            "pipeline.kafka.combined", value=True, fix=("mode: baremetal",), plan=True),
    refusal("a consuming pool that does not exist", "prod-h100", {f"{T0}.consumers.pool": "h200"},
            "pipeline.kafka.topics[0].consumers.pool", value="h200", fix=("h100",), plan=True),
    refusal("no token rate and a GPU without a known peak", "prod-h100",
            {f"{T0}.consumers.tokens_per_s_per_node": DROP, "compute.pools.0.gpu.model": "h100-nvl",
             "hardware": {"gpus": {"h100-nvl": {
                "description": "H100 NVL", "memory_GB": 94, "pcie_gen": 5, "nvswitch": False, "nvlink_GBps": 600,
                "nccl_intra_busbw_GBps": 100, "source": "a test GPU"}}}},
            "pipeline.kafka.topics[0].consumers.tokens_per_s_per_node", fix=("tokens_per_s_per_node",), plan=True),
]


@pytest.mark.parametrize("row", REFUSALS)
def test_refused_with_path_value_and_fix(row: Refusal) -> None:
    refused(row)


BAREMETAL = {"pipeline.kafka.mode": "baremetal", "pipeline.kafka.brokers": 4}


def test_baremetal_takes_a_release_strimzi_does_not_run_yet() -> None:
    assert _plan({**BAREMETAL, "pipeline.kafka.version": "4.4.0"}).version == "4.4.0"


def test_baremetal_nodes_are_hosts_with_ids_roles_and_one_cluster_id() -> None:
    plan = build_plan(validate(edited(stack_data("prod-h100"), BAREMETAL), "test"), "test")
    k = plan.kafka
    assert k is not None and len(k.cluster_id) == 22
    assert [(n.host, n.node_id, n.roles) for n in k.nodes] == [
        ("kraft-01", 1, ("controller",)), ("kraft-02", 2, ("controller",)), ("kraft-03", 3, ("controller",)),
        ("kafka-01", 4, ("broker",)), ("kafka-02", 5, ("broker",)), ("kafka-03", 6, ("broker",)),
        ("kafka-04", 7, ("broker",))]
    hosts = {h.name: h for h in plan.hosts}
    assert all(hosts[n.host].role == "kafka" and hosts[n.host].groups == ("kiln_kafka",) and not hosts[n.host].nics
               for n in k.nodes)
    assert plan.hosts[-1].name == "kafka-04"  # after every other host: adding the stream moves no address
    others = build_plan(validate(stack_data("prod-h100"), "test"), "test").hosts
    assert [h.management_address for h in plan.hosts[:len(others)]] == [h.management_address for h in others]
    combined = _plan({**BAREMETAL, "pipeline.kafka.combined": True, "pipeline.kafka.controllers": 5})
    assert [(n.host, n.roles) for n in combined.nodes] == [
        *((f"kafka-0{i}", ("broker", "controller")) for i in range(1, 5)), ("kafka-05", ("controller",))]


def test_baremetal_firewall_opens_clients_to_the_network_and_the_quorum_to_its_peers() -> None:
    from kiln.render.firewall import firewall_rules

    plan = build_plan(validate(edited(stack_data("prod-h100"), BAREMETAL), "test"), "test")
    ctl, brk = plan.host("kraft-01"), plan.host("kafka-01")
    rules = {r["name"]: r for r in firewall_rules(plan, ctl)}
    assert "kafka" not in rules and rules["kraft"]["ports"] == [9094]
    assert f"{ctl.management_address}/32" not in rules["kraft"]["sources"]
    assert f"{brk.management_address}/32" in rules["kraft"]["sources"]
    broker = {r["name"]: r for r in firewall_rules(plan, brk)}
    assert broker["kafka"]["ports"] == [9092] and broker["kafka"]["sources"] == [plan.networks.management]
    assert "kraft" not in broker and 9404 in broker["metrics"]["ports"]


def test_every_topic_gets_the_stream_rows_with_its_need() -> None:
    plan = build_plan(validate(stack_data("lab"), "lab"), "lab")
    rows = {t.check: t for t in plan.targets if t.check.startswith("stream.")}
    assert set(rows) == {"stream.consumer", "stream.consumer_vs_naive", "stream.producer", "stream.bytes_per_token",
                         "stream.latency", "stream.resume", "stream.durability", "stream.retention"}
    assert plan.kafka is not None
    topic = plan.kafka.topics[0]
    assert rows["stream.consumer"].expected == 10 * topic.tokens_per_s_node
    assert rows["stream.consumer_vs_naive"].fail == 10
    assert rows["stream.bytes_per_token"].expected == round(4 / 2.9, 4)  # the lab's measured codec_ratio
    assert not rows["stream.latency"].higher_is_better and rows["stream.latency"].fail == 500
    assert all(dict(t.env)["KILN_STREAM_TOPIC"] == topic.name and t.group == "kiln_kafka" for t in rows.values())
