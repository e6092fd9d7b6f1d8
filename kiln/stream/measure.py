"""The token stream measured on a running Kafka cluster: what `kiln verify` (kiln/verify/checks/stream.py) and the
benchmarks (bench/kafka_stream.py, bench/kafka_durability.py) run.

One measurement pass publishes the same token ids twice and reads them back twice, on the same brokers:

- kiln: `publish_tokens` with the plan's producer settings and codec, one `TokenConsumer` reading every partition
  (batch fetch, numpy.frombuffer, the fixed order);
- naive: the loop kiln replaces (kafka-python, one JSON list of token ids per message, gzip, a per-message Python
  loop), as `pip install kafka-python` installs it; the figures say whether the optional C CRC32C (the `crc32c`
  package) was present, which makes the naive loop 2-3x faster (docs/kafka.md, Measurements).

Beside it: the producer's bytes on the wire per token (librdkafka's statistics: brokers[].txbytes, request framing
included, so an upper bound), end-to-end latency (each message's CreateTime against the clock of the same host
when it is read), resume after a consumer rank is SIGKILLed twice, and durability while a broker is killed.
Scratch topics are made with the planned topic's settings and deleted afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kiln.stream.consumer import TokenConsumer
from kiln.stream.producer import messages

#: Vocabulary of the synthetic token ids: Llama 3's 128,256 entries for uint32, the whole range for uint16.
VOCAB = {"uint16": 65_536, "uint32": 128_256}
#: Zipf exponent of the synthetic ids: natural-language token frequencies fall off about as 1/rank (Zipf's law);
#: 1.3 keeps the long tail a real tokeniser's ids have.
ZIPF_A = 1.3


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicShape:
    """The planned topic a pass imitates: its layout, codec, message shape and topic configs."""

    partitions: int
    replication: int
    tokens_per_message: int
    dtype: str
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def message_bytes(self) -> int:
        return self.tokens_per_message * np.dtype(self.dtype).itemsize


@dataclass(slots=True)
class Produced:
    messages: int
    seconds: float
    wire_bytes: int  # what the producer sent to the brokers (librdkafka statistics), 0 when none was reported

    def wire_MBps(self) -> float:
        return self.wire_bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0


def token_ids(tokens: int, dtype: str, seed: int = 1) -> np.ndarray[Any, Any]:
    """Synthetic token ids with a natural-language-like frequency (Zipf), as `dtype`."""
    return (np.random.default_rng(seed).zipf(ZIPF_A, tokens) % VOCAB[dtype]).astype(dtype)


def scratch_topic(bootstrap: str, shape: TopicShape, prefix: str) -> str:
    """Create a topic like the planned one (partitions, replication, configs) under a fresh name."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(name, shape.partitions, shape.replication, config=dict(shape.configs))
    for f in admin.create_topics([new], operation_timeout=60).values():
        f.result()
    _wait_for_leaders(bootstrap, name, shape.partitions)
    return name


def _wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions \
                and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.5)
    raise TimeoutError(f"topic {topic}: not every partition has a leader after {timeout_s:g} s")


def drop_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the futures resolve: a dropped client fails them
    for f in admin.delete_topics([topic], operation_timeout=60).values():
        f.result()


def leaders(bootstrap: str, topic: str) -> Counter[int]:
    """Partitions led per node id."""
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return Counter(p.leader for p in meta.topics[topic].partitions.values())


def in_sync(bootstrap: str, topic: str) -> bool:
    """Every partition of the topic has all its replicas in sync."""
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    t = meta.topics.get(topic)
    return t is not None and all(len(p.isrs) == len(p.replicas) for p in t.partitions.values())


def produce(bootstrap: str, topic: str, ids: np.ndarray[Any, Any], shape: TopicShape, config: dict[str, str],
            on_ack: Callable[[int], None] | None = None) -> Produced:
    """Publish the ids as fixed-size messages, message i to partition i mod partitions, and wait for every
    acknowledgement (a failed delivery raises). `on_ack` hears the running count of acknowledgements."""
    sent: dict[str, int] = {}
    conf: dict[str, Any] = {**config, "bootstrap.servers": bootstrap, "statistics.interval.ms": 200,
                            "stats_cb": lambda s: sent.update(wire=_txbytes(s))}
    producer = Producer(conf)
    failures: list[str] = []
    acked = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is not None:
            failures.append(str(err))
            return
        acked += 1
        if on_ack is not None:
            on_ack(acked)

    t0 = time.perf_counter()
    count = 0
    for i, value in enumerate(messages([ids], shape.tokens_per_message)):
        _produce_one(producer, topic, value, i % shape.partitions, delivered)
        count += 1
    remaining = producer.flush(300)
    seconds = time.perf_counter() - t0
    if failures or remaining:
        raise RuntimeError(f"{len(failures) + remaining} of {count} messages not acknowledged: "
                           f"{failures[:3] or 'flush timed out'}")
    producer.poll(0.5)  # one more statistics report: the bytes of the last batches
    return Produced(messages=count, seconds=seconds, wire_bytes=sent.get("wire", 0))


def _produce_one(producer: Producer, topic: str, value: bytes, partition: int, on_delivery: Any) -> None:
    while True:
        try:
            producer.produce(topic, value=value, partition=partition, on_delivery=on_delivery)
            break
        except BufferError:  # the local queue is full: serve delivery reports, then retry
            producer.poll(0.5)
    producer.poll(0)


def _txbytes(stats: str) -> int:
    """Bytes sent to the brokers so far (librdkafka STATISTICS.md: brokers.<name>.txbytes), bootstrap entries too."""
    return sum(int(b.get("txbytes", 0)) for b in json.loads(stats).get("brokers", {}).values())


def end_of_topic(shape: TopicShape, config: dict[str, str] | None, sent: Produced) -> int:
    """Messages at the end of a finished topic that a consumer's last fetch of each partition waits for: less than
    `fetch.min.bytes` remains, so the broker holds the fetch for `fetch.wait.max.ms` (librdkafka CONFIGURATION.md;
    Kafka's DelayedFetch) for bytes a finished topic never gets. A training job reads a stream that keeps growing
    ahead of it, so the steady rate is timed before them."""
    min_bytes = int((config or {}).get("fetch.min.bytes", "1"))
    per_message = max(1.0, sent.wire_bytes / max(1, sent.messages))
    return shape.partitions * math.ceil(min_bytes / per_message)


def consume_kiln(bootstrap: str, topic: str, shape: TopicShape, count: int, config: dict[str, str] | None = None,
                 batch_messages: int = 8, tail: int = 0) -> float:
    """Tokens/s of one TokenConsumer (the plan's consumer settings) reading `count` messages from every partition,
    timed from its first batch (connecting and the first fetch are a job's start-up, not its steady rate) until
    `tail` messages are left (end_of_topic)."""
    batches = (count - tail) // batch_messages - 1
    if batches < 1:
        raise ValueError(f"{count} messages leave no steady read before the topic's last {tail}: publish more "
                         "(stream.messages)")
    c = TokenConsumer(bootstrap=bootstrap, topic=topic, rank=0, world=1, tokens_per_message=shape.tokens_per_message,
                      batch_messages=batch_messages, dtype=shape.dtype, prefetch_messages=8192, config=config,
                      group_id=f"kiln-verify-{topic}")
    try:
        c.next_batch()
        t0 = time.perf_counter()
        tokens = sum(c.next_batch().size for _ in range(batches))
        return tokens / (time.perf_counter() - t0)
    finally:
        c.close()


def naive(bootstrap: str, topic: str, ids: np.ndarray[Any, Any], shape: TopicShape) -> dict[str, float]:
    """The naive design on the same brokers: kafka-python, a JSON list per message, gzip, a per-message loop.
    Producer MB/s (of token payload) and consumer tokens/s."""
    from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
    from kafka import TopicPartition as KPartition

    n, per = ids.size // shape.tokens_per_message, shape.tokens_per_message
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", compression_type="gzip",
                             max_request_size=8 * shape.message_bytes + 1_048_576)
    t0 = time.perf_counter()
    for i in range(n):
        producer.send(topic, json.dumps(ids[i * per:(i + 1) * per].tolist()).encode(), partition=i % shape.partitions)
    producer.flush()
    produce_s = time.perf_counter() - t0
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                             consumer_timeout_ms=60000, max_partition_fetch_bytes=8 * shape.message_bytes + 1_048_576)
    consumer.assign([KPartition(topic, p) for p in range(shape.partitions)])
    consumer.seek_to_beginning()
    t0, tokens = time.perf_counter(), 0
    for seen, msg in enumerate(consumer, start=1):  # one message at a time, JSON per sample
        tokens += len(json.loads(msg.value))
        if seen == n:
            break
    consume_s = time.perf_counter() - t0
    consumer.close()
    return {"producer_MBps": n * shape.message_bytes / produce_s / 1e6, "consumer_tokens_per_s": tokens / consume_s,
            "c_crc32c": float(naive_crc32c())}


def naive_crc32c() -> bool:
    """Whether kafka-python checks CRC32C in C here (the optional crc32c package) rather than in Python."""
    from kafka.record import util  # type: ignore[import-untyped]

    return getattr(util, "crc32c_c", None) is not None


def latency_ms(bootstrap: str, topic: str, shape: TopicShape, config: dict[str, str], count: int,
               per_s: float, warmup: int = 0) -> tuple[float, float, float]:
    """p50 and p99 of end-to-end latency over `count` messages sent at `per_s` with the producer's settings, each
    read by a consumer on this host (latency = the time it is read − its CreateTime, one clock), and the p99 of
    the `warmup` messages sent the same way just before them, which are not counted. A broker JVM that has served
    little runs its request path cold (freshly restarted lab brokers: p50 332 ms, then 162, 90 and 31 ms in the next
    runs of 300 messages), while a training job's brokers have been serving for hours. Before any of it, one
    message to every partition is sent and read back, so connection and producer-id set-up stay out too."""
    parts, total = shape.partitions, warmup + count
    ids = token_ids((total + parts) * shape.tokens_per_message, shape.dtype, seed=3)
    seen: list[tuple[int, int, float]] = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kiln-latency-{topic}", "enable.auto.commit": "false",
                  "fetch.wait.max.ms": "10"})
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    p = Producer({**config, "bootstrap.servers": bootstrap})
    values = list(messages([ids], shape.tokens_per_message))
    for partition in range(parts):
        _produce_one(p, topic, values[partition], partition, None)
    p.flush(60)
    if _read_some(c, parts, 60) < parts:
        raise RuntimeError(f"latency: the {parts} warm-up messages were not read back within 60 s")
    start_ms = int(time.time() * 1000)  # CreateTime is whole milliseconds
    reader = threading.Thread(target=_read_latencies, args=(c, seen, total, start_ms), daemon=True)
    reader.start()
    for i, value in enumerate(values[parts:]):  # message i: partition i mod parts, offset 1 + i div parts
        _produce_one(p, topic, value, i % parts, None)
        time.sleep(1 / per_s)
    p.flush(60)
    reader.join(60)
    c.close()
    if len(seen) < total:
        raise RuntimeError(f"latency: {len(seen)} of {total} messages read back within 60 s")
    counted = [ms for partition, offset, ms in seen if (offset - 1) * parts + partition >= warmup]
    early = [ms for partition, offset, ms in seen if (offset - 1) * parts + partition < warmup] or [0.0]
    return float(np.percentile(counted, 50)), float(np.percentile(counted, 99)), float(np.percentile(early, 99))


def _read_some(c: Consumer, count: int, timeout_s: float) -> int:
    """Read up to `count` messages within `timeout_s`; how many were read."""
    got, deadline = 0, time.monotonic() + timeout_s
    while got < count and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got += 1
    return got


def _read_latencies(c: Consumer, seen: list[tuple[int, int, float]], count: int, start_ms: int) -> None:
    deadline = time.monotonic() + 180
    while len(seen) < count and time.monotonic() < deadline:
        m = c.poll(0.2)  # one at a time: consume(n) would wait for n messages and measure its own batching
        if m is not None and m.error() is None and m.timestamp()[1] >= start_ms:
            partition, offset = m.partition(), m.offset()
            if partition is not None and offset is not None:
                seen.append((partition, offset, time.time() * 1000 - m.timestamp()[1]))


@dataclass(slots=True)
class Durability:
    acked: int
    read: int
    missing: int
    repeated: int
    in_order: bool
    killed_node: int | None
    leaders_before: dict[int, int]
    leaders_during: dict[int, int]  # once the killed node led nothing (its partitions moved), or {} if never
    leaders_after: dict[int, int]
    kill_error: str = ""


def durability(bootstrap: str, topic: str, ids: np.ndarray[Any, Any], shape: TopicShape, config: dict[str, str],
               kill: Callable[[int], None]) -> Durability:
    """Publish with the plan's producer settings and, when a third of the messages are acknowledged, `kill` the
    node leading the most partitions (on a thread: sends go on meanwhile). Then read every partition from the
    start: each acknowledged message once, in its partition's order."""
    n = ids.size // shape.tokens_per_message
    want = list(messages([ids], shape.tokens_per_message))
    before = leaders(bootstrap, topic)
    killed: dict[str, Any] = {}

    def kill_and_watch(node: int) -> None:
        try:
            kill(node)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "during" not in killed:
                now = leaders(bootstrap, topic)
                if now[node] == 0:
                    killed["during"] = dict(sorted(now.items()))
                time.sleep(0.5)
        except Exception as exc:  # reported with the result: a drill whose kill failed proves nothing
            killed["error"] = f"{type(exc).__name__}: {exc}"

    watcher: list[threading.Thread] = []

    def at(acked: int) -> None:
        if acked == n // 3:
            node = leaders(bootstrap, topic).most_common(1)[0][0]
            killed["node"] = node
            watcher.append(threading.Thread(target=kill_and_watch, args=(node,), daemon=True))
            watcher[0].start()

    done = produce(bootstrap, topic, ids, shape, config, on_ack=at)
    for t in watcher:
        t.join(90)
    after = leaders(bootstrap, topic)
    got = read_back(bootstrap, topic, shape.partitions)
    expected = {p: want[p::shape.partitions] for p in range(shape.partitions)}
    return Durability(
        acked=done.messages, read=sum(len(v) for v in got.values()),
        missing=sum(len(set(expected[p]) - set(got[p])) for p in expected),
        repeated=sum(len(got[p]) - len(set(got[p])) for p in got),
        in_order=all(got[p] == expected[p] for p in expected), killed_node=killed.get("node"),
        leaders_before=dict(sorted(before.items())), leaders_during=killed.get("during", {}),
        leaders_after=dict(sorted(after.items())), kill_error=killed.get("error", ""),
    )


def read_back(bootstrap: str, topic: str, partitions: int, timeout_s: float = 120) -> dict[int, list[bytes]]:
    """Every message of every partition, from offset 0 to the end, committed reads only."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kiln-read-back-{topic}", "enable.auto.commit": "false",
                  "isolation.level": "read_committed"})
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    ends = {p: _high_watermark(c, topic, p) for p in range(partitions)}
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    deadline = time.monotonic() + timeout_s
    while any(len(out[p]) < ends[p] for p in out) and time.monotonic() < deadline:
        for m in c.consume(512, 1.0):
            partition, value = m.partition(), m.value()
            if m.error() is None and partition is not None and value is not None:
                out[partition].append(value)
    c.close()
    return out


def _high_watermark(c: Consumer, topic: str, partition: int, timeout_s: float = 60) -> int:
    """The partition's end offset, asked again while leadership moves (right after a broker is lost the client's
    metadata still names the old leader: NOT_LEADER_FOR_PARTITION until it refreshes)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1])
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def resume(bootstrap: str, topic: str, shape: TopicShape, *, steps: int, rank: int, world: int, work: Path,
           seed: int = 7) -> dict[str, Any]:
    """A rank (a process of its own) reads `steps` batches uninterrupted. Then again from the start, SIGKILLed twice
    at random steps and restarted each time from the state its last checkpoint saved: the batches trained on
    (those a checkpoint covers, then the restarted process's) must be the uninterrupted sequence."""
    args = dict(bootstrap=bootstrap, topic=topic, shape=shape, rank=rank, world=world)
    want, _ = _rank_run(**args, work=work / "whole", steps=steps, kill_after=None, state=None)  # type: ignore[arg-type]
    kills = sorted(random.Random(seed).sample(range(1, steps), 2))
    got: list[str] = []
    state: dict[str, object] | None = None
    for i, stop in enumerate([*kills, None]):
        batches, state = _rank_run(**args, work=work / f"run{i}", steps=steps - len(got),  # type: ignore[arg-type]
                                   kill_after=None if stop is None else max(1, stop - len(got)), state=state)
        got += batches
    mismatched = sum(a != b for a, b in zip(got, want, strict=False)) + abs(len(got) - len(want))
    return {"steps": steps, "killed_at": kills, "rank": rank, "world": world, "identical": got == want,
            "mismatched": mismatched, "batches": len(got)}


def _rank_run(*, bootstrap: str, topic: str, shape: TopicShape, rank: int, world: int, work: Path, steps: int,
              kill_after: int | None, state: dict[str, object] | None) -> tuple[list[str], dict[str, object]]:
    """Run one rank process from `state`; SIGKILL it once it has checkpointed `kill_after` steps (it may have read
    more: those are lost with it). Returns the fingerprints of the batches its last checkpoint covers, and that
    checkpoint's stream state."""
    work.mkdir(parents=True, exist_ok=True)
    if state is not None:
        (work / "resume.json").write_text(json.dumps(state))
    cmd = [sys.executable, "-m", "kiln.stream.measure", "--bootstrap", bootstrap, "--topic", topic,
           "--rank", str(rank), "--world", str(world), "--tokens", str(shape.tokens_per_message), "--dtype",
           shape.dtype, "--steps", str(steps), "--work", str(work)]
    with (work / "rank.log").open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            if kill_after is not None and _checkpointed(work) >= kill_after:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.01)
        proc.wait(60)
    if kill_after is None and proc.returncode != 0:
        raise RuntimeError(f"rank {rank} exited {proc.returncode} (log: {work / 'rank.log'})")
    saved = json.loads((work / "checkpoint.json").read_text())
    batches = (work / "batches.txt").read_text().split()[: saved["steps"]]
    return batches, saved["stream"]


def _checkpointed(work: Path) -> int:
    try:
        return int(json.loads((work / "checkpoint.json").read_text())["steps"])
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def _rank_main(a: argparse.Namespace) -> int:
    """The rank process: read `steps` batches; after each, note the batch's fingerprint, then checkpoint (the
    stream state and the step count, written whole with a rename) as a training loop saves with its model."""
    work = Path(a.work)
    c = TokenConsumer(bootstrap=a.bootstrap, topic=a.topic, rank=a.rank, world=a.world, tokens_per_message=a.tokens,
                      batch_messages=8, dtype=a.dtype, group_id=f"kiln-resume-{a.topic}")
    if (work / "resume.json").exists():
        c.load_state_dict(json.loads((work / "resume.json").read_text()))
    with (work / "batches.txt").open("a") as out:
        for step in range(1, a.steps + 1):
            out.write(hashlib.sha256(c.next_batch().tobytes()).hexdigest()[:16] + "\n")
            out.flush()
            tmp = work / "checkpoint.json.tmp"
            tmp.write_text(json.dumps({"steps": step, "stream": c.state_dict()}))
            tmp.replace(work / "checkpoint.json")
    c.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="One resumable rank of the resume check (run by kiln.stream.measure).")
    for flag in ("--bootstrap", "--topic", "--dtype", "--work"):
        ap.add_argument(flag, required=True)
    for flag in ("--rank", "--world", "--tokens", "--steps"):
        ap.add_argument(flag, type=int, required=True)
    return _rank_main(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
