"""kiln.stream.measure's pure parts: the synthetic token ids, the message shape and the wire-bytes reading of
librdkafka's statistics (the measurement itself runs on real brokers: bench/kafka_stream.py and the lab)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kiln.plan.model import KafkaTopicPlan
from kiln.stream import measure
from kiln.verify.checks.stream import _rates


def test_token_ids_are_deterministic_in_range_and_of_the_dtype() -> None:
    a, b = measure.token_ids(10_000, "uint32"), measure.token_ids(10_000, "uint32")
    assert a.dtype == np.uint32 and np.array_equal(a, b)
    assert int(a.max()) < measure.VOCAB["uint32"] and len(np.unique(a)) > 500
    assert measure.token_ids(100, "uint16").dtype == np.uint16
    assert not np.array_equal(a, measure.token_ids(10_000, "uint32", seed=2))


def test_message_bytes_follow_the_dtype() -> None:
    shape = measure.TopicShape(partitions=4, replication=3, tokens_per_message=2048, dtype="uint16")
    assert shape.message_bytes == 4096


def test_wire_bytes_sum_every_broker_of_the_statistics() -> None:
    # librdkafka STATISTICS.md: brokers.<name>.txbytes, one entry per broker and bootstrap connection
    stats = {"brokers": {"a:9092/1": {"txbytes": 1000}, "b:9092/2": {"txbytes": 250}, "GroupCoordinator": {}}}
    assert measure._txbytes(json.dumps(stats)) == 1250
    assert measure._txbytes("{}") == 0


def test_rates_judge_the_consumer_against_the_naive_side_of_the_same_pass() -> None:
    from kiln.plan import build_plan
    from kiln.spec import load_stack

    plan = build_plan(load_stack("lab"), "lab")
    assert plan.kafka is not None
    topic = plan.kafka.topics[0]
    sent = measure.Produced(messages=100, seconds=2.0, wire_bytes=100 * 2048 * 2)
    out = _rates(topic, sent, 40e6, {"consumer_tokens_per_s": 2e6, "producer_MBps": 3.0, "c_crc32c": 0.0})
    assert out["consumer_vs_naive"] == 20 and out["bytes_per_token"] == 2.0
    assert out["producer"] == sent.wire_MBps() == 0.2048
    assert "Python (its default)" in out["consumer_vs_naive_details"][0]


def test_the_steady_read_stops_before_the_fetches_a_finished_topic_makes_wait() -> None:
    """1 MiB fetch.min.bytes, 2,800 bytes a message on the wire: 375 messages of each partition are its last
    fetch (those the lab saw a 100-ms fetch.wait.max.ms pause before)."""
    shape = measure.TopicShape(partitions=4, replication=3, tokens_per_message=2048, dtype="uint32", configs={})
    sent = measure.Produced(messages=4800, seconds=1.0, wire_bytes=4800 * 2800)
    assert measure.end_of_topic(shape, {"fetch.min.bytes": "1048576"}, sent) == 4 * 375
    assert measure.end_of_topic(shape, {}, sent) == 4  # librdkafka's default fetch.min.bytes is 1
    with pytest.raises(ValueError, match=r"stream\.messages"):
        measure.consume_kiln("127.0.0.1:1", "t", shape, 1500, tail=1496)


def test_only_benchmark_rows_run_the_measurement_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    # The verify runner runs every conformance row at once and the benchmarks one at a time (kiln.verify.runner):
    # a conformance row that started the pass would put its latency run and its broker kill beside the other reads.
    from kiln.verify.checks import stream
    from kiln.verify.checks.check import REGISTRY, Rep
    from tests.unit.verify.verify_fakes import context

    ctx = context({})
    targets = {t.check: t for t in ctx.plan.targets if t.check.startswith("stream.")}
    passes: list[str] = []

    def measure_pass(_ctx: object, topic: KafkaTopicPlan) -> dict[str, float]:
        passes.append(topic.name)
        return {"latency": 42.0}

    monkeypatch.setattr(stream, "bootstrap", lambda _ctx: "broker:9092")
    monkeypatch.setattr(stream, "measure_pass", measure_pass)
    monkeypatch.setattr(stream, "_retention", lambda _brokers, _topic: {"retention": 0, "retention_details": ["ok"]})
    rep, subject = Rep(1, 1, False), stream.Subject("lab-tokens", ("kafka-01",))
    for check, target in sorted(targets.items()):
        row = REGISTRY[check]
        if row.kind == "conformance":
            assert row.measure(ctx, target, subject, rep).value == 0 and not passes, check
    assert {c for c in targets if REGISTRY[c].kind == "conformance"} == {"stream.retention"}
    assert REGISTRY["stream.latency"].measure(ctx, targets["stream.latency"], subject, rep).value == 42.0
    assert passes == ["lab-tokens"]
