"""kiln.stream against the in-memory topic (tests/unit/stream/fake_kafka.py): the order, resume and resize
guarantees of docs/kafka.md. Throughput is measured against a real broker, never here."""

from __future__ import annotations

import random
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from kiln.stream import StreamGapError, assignment, merge_states
from kiln.stream.consumer import TokenConsumer, metrics_port, serve_metrics
from kiln.stream.producer import messages, publish_tokens
from tests.unit.stream.fake_kafka import FakeConsumer, FakeProducer, Topic

TOKENS = 16  # tokens per message
BATCH = 4


def _topic(partitions: int = 12, per_partition: int = 40) -> Topic:
    topic = Topic.of("tokens", partitions)
    ids = np.arange(partitions * per_partition * TOKENS, dtype=np.uint32)
    for i, value in enumerate(messages([ids], TOKENS)):
        topic.logs[i % partitions].append(value)
    return topic


def _consumer(topic: Topic, rank: int, world: int, seed: int) -> TokenConsumer:
    return TokenConsumer(bootstrap="fake:9092", topic=topic.name, rank=rank, world=world, tokens_per_message=TOKENS,
                         batch_messages=BATCH, prefetch_messages=64,
                         client_factory=lambda _c: FakeConsumer(topic, seed))


def _read(c: TokenConsumer, batches: int) -> list[int]:
    return [int(row[0]) for _ in range(batches) for row in c.next_batch(timeout=5)]


def test_every_partition_has_one_rank() -> None:
    for world in (1, 2, 3, 4, 6, 12):
        owned = [p for r in range(world) for p in assignment(12, r, world)]
        assert sorted(owned) == list(range(12))
    with pytest.raises(ValueError, match="at least one per rank"):
        assignment(4, 0, 8)


def test_the_order_does_not_depend_on_how_fetches_arrive() -> None:
    topic = _topic()
    runs = []
    for seed in (1, 2, 3):
        c = _consumer(topic, rank=1, world=4, seed=seed)
        runs.append(_read(c, 10))
        c.close()
    assert runs[0] == runs[1] == runs[2]
    assert {first // TOKENS % 12 for first in runs[0]} == set(assignment(12, 1, 4))


def test_a_rank_killed_twice_resumes_the_exact_sequence() -> None:
    topic = _topic()
    baseline = _consumer(topic, rank=2, world=4, seed=7)
    want = _read(baseline, 24)
    baseline.close()
    rng = random.Random(11)
    kills = sorted(rng.sample(range(1, 24), 2))
    got: list[int] = []
    state: dict[str, object] | None = None
    for start, stop in zip([0, *kills], [*kills, 24], strict=True):
        c = _consumer(topic, rank=2, world=4, seed=start + 100)  # another fetch interleaving after each restart
        if state is not None:
            c.load_state_dict(state)
        got += _read(c, stop - start)
        state = c.state_dict()  # what the checkpoint at `stop` saves; then the process dies
        c.close()
    assert got == want


def test_a_resized_world_reads_every_remaining_message_once() -> None:
    topic = _topic()
    old = [_consumer(topic, rank=r, world=4, seed=r) for r in range(4)]
    seen = {first for c in old for first in _read(c, 5)}
    merged = merge_states([c.state_dict() for c in old])
    for c in old:
        c.close()
    new = [_consumer(topic, rank=r, world=3, seed=r + 10) for r in range(3)]
    for c in new:
        c.load_state_dict(merged)
    after = [first for c in new for first in _read(c, 8)]
    assert len(after) == len(set(after)) and not seen & set(after)
    offsets = merge_states([c.state_dict() for c in new])["offsets"]
    assert isinstance(offsets, dict)
    consumed = {first // TOKENS for first in seen | set(after)}
    assert consumed == {p + 12 * o for p, end in ((int(k), v) for k, v in offsets.items()) for o in range(end)}


def test_partitions_added_since_the_checkpoint_are_read_from_their_start() -> None:
    # A grown consumer pool with `partitions: auto` adds partitions (kiln diff: a live change); Kafka numbers the new
    # ones after the old and starts them empty.
    topic = _topic(partitions=4, per_partition=10)
    old = [_consumer(topic, rank=r, world=2, seed=r) for r in range(2)]
    seen = [first for c in old for first in _read(c, 2)]
    states = [c.state_dict() for c in old]
    for c in old:
        c.close()
    added = np.arange(10_000, 10_000 + 4 * 10 * TOKENS, dtype=np.uint32)
    topic.logs.update({p: [] for p in (4, 5, 6, 7)})
    for i, value in enumerate(messages([added], TOKENS)):
        topic.logs[4 + i % 4].append(value)
    with pytest.raises(ValueError, match=r"partitions \[6\].*pass it the topic's partition count"):
        _consumer(topic, rank=2, world=4, seed=9).load_state_dict(merge_states(states))
    with pytest.raises(ValueError, match=r"ranks \[0\] of a world of 2: merge the state of every rank"):
        merge_states(states[:1], partitions=8)
    with pytest.raises(ValueError, match="Kafka never removes one"):
        merge_states(states, partitions=3)
    merged = merge_states(states, partitions=8)
    new = [_consumer(topic, rank=r, world=4, seed=r + 20) for r in range(4)]
    for c in new:
        c.load_state_dict(merged)
    after = [first for c in new for first in _read(c, 2)]
    assert len(after) == len(set(after)) and not set(seen) & set(after)
    assert min(f for f in after if f >= 10_000) == 10_000  # the first message of the first new partition
    assert {f // TOKENS % 4 for f in after if f < 10_000} == {0, 1, 2, 3}  # the old ones go on where they were


def test_offsets_deleted_by_retention_stop_the_stream() -> None:
    topic = _topic()
    c = _consumer(topic, rank=0, world=2, seed=1)
    _read(c, 2)
    state = c.state_dict()
    c.close()
    topic.low = dict.fromkeys(topic.logs, 30)  # retention deleted everything before offset 30
    resumed = _consumer(topic, rank=0, world=2, seed=2)
    resumed.load_state_dict(state)
    with pytest.raises(StreamGapError, match="deleted"):
        _read(resumed, 1)
    resumed.close()


def test_a_message_of_the_wrong_shape_is_refused() -> None:
    topic = Topic.of("tokens", 2)
    good = np.arange(TOKENS, dtype=np.uint32).tobytes()
    topic.logs = {0: [np.arange(TOKENS + 1, dtype=np.uint32).tobytes(), good], 1: [good, good]}
    c = _consumer(topic, rank=0, world=1, seed=0)
    with pytest.raises(ValueError, match="disagree on the shape"):
        c.next_batch(timeout=2)
    c.close()


def test_runway_and_lag_are_reported() -> None:
    topic = _topic()
    c = _consumer(topic, rank=0, world=1, seed=3)
    _read(c, 3)
    lag = c.report_lag()
    assert lag == 12 * 40 - 3 * BATCH
    assert c.registry.get_sample_value("kiln_stream_lag_messages", {"topic": "tokens", "rank": "0"}) == lag
    assert c.runway_s() >= 0
    c.close()


def test_a_rank_serves_its_gauges_where_the_plan_scrapes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Local rank i on 9479 + i (the plan's kiln-stream targets): LOCAL_RANK first, then SLURM_LOCALID."""
    from kiln.plan import build_plan
    from kiln.spec import load_stack

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setenv("SLURM_LOCALID", "1")
    plan = build_plan(load_stack("lab"), "lab")
    ports = {t.address.rsplit(":", 1)[1] for t in plan.monitoring.scrape_targets if t.job == "kiln-stream"}
    assert str(metrics_port()) in ports and str(metrics_port(0)) in ports
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert metrics_port() == metrics_port(0) != metrics_port(1)

    c = _consumer(_topic(), rank=0, world=1, seed=3)
    _read(c, 3)
    lag = c.report_lag()
    local_rank = 1000 + random.Random().randrange(1000)  # a free port away from the planned ones
    port = serve_metrics(c.registry, local_rank=local_rank, address="127.0.0.1")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    assert f'kiln_stream_lag_messages{{rank="0",topic="tokens"}} {float(lag)}' in text
    c.close()


def test_the_oldest_kept_checkpoint_offset_is_reported_per_partition() -> None:
    """Two kept checkpoints (merged states): the gauge holds, per partition of the rank, the lower offset."""
    c = _consumer(_topic(), rank=1, world=2, seed=5)
    older = {"topic": "tokens", "offsets": {str(p): 3 for p in range(12)}, "cursors": {}, "world": 2}
    newer = {"topic": "tokens", "offsets": {str(p): 2 if p == 5 else 9 for p in range(12)}, "cursors": {}, "world": 2}
    oldest = c.report_checkpoints([newer, older])
    assert oldest == {1: 3, 3: 3, 5: 2, 7: 3, 9: 3, 11: 3}
    assert c.registry.get_sample_value("kiln_stream_checkpoint_offset", {"topic": "tokens", "partition": "5"}) == 2
    assert c.registry.get_sample_value("kiln_stream_checkpoint_offset", {"topic": "tokens", "partition": "0"}) is None
    c.close()


def test_the_producer_splits_shards_into_whole_messages_across_partitions(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(40, dtype=np.uint32))
    np.arange(40, 70, dtype=np.uint32).tofile(tmp_path / "b.bin")
    topic = Topic.of("tokens", 3)
    sent = publish_tokens(paths=[tmp_path / "a.npy", tmp_path / "b.bin"], topic="tokens", partitions=3,
                          tokens_per_message=TOKENS, dtype="uint32", config={},
                          producer_factory=lambda _c: FakeProducer(topic))
    assert sent == 70 // TOKENS == 4  # the 6 tokens left over are held back, never sent short
    firsts = [int(np.frombuffer(v, dtype=np.uint32)[0]) for p in range(3) for v in topic.logs[p]]
    assert sorted(firsts) == [0, 16, 32, 48] and len(topic.logs[0]) == 2
