"""The token stream on a real KRaft broker: kiln.stream against the naive loop, in the same run, and resume.

Usage: .venv/bin/python bench/kafka_stream.py [--messages 4800] [--partitions 12] [--runs 3] [--out FILE]

Starts a single-node KRaft broker (combined controller and broker) on 127.0.0.1 (bench/kafka_cluster.py, from
the jars scripts/build-kafka.sh assembles: needs maven and a JRE 17), publishes the same token ids two ways and reads
them back two ways, per repetition:

- kiln: kiln.stream.publish_tokens with the plan's producer settings (acks=all, idempotence, zstd), and one
  TokenConsumer reading every partition (batch fetch, numpy.frombuffer, the fixed round-robin order);
- naive: the design kiln exists to replace (kafka-python, one JSON list of token ids per message, gzip, a
  per-message Python loop).

It prints tokens/s of each consumer, producer MB/s, bytes per token on the wire and the kiln ÷ naive ratios as
JSON; then kills a TokenConsumer twice at random points (state_dict → a new process-like consumer →
load_state_dict) and checks the sequence equals an uninterrupted read. Both sides share the machine's cores with
the broker: use the ratios, not the absolute figures (docs/kafka.md, Measurements).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kafka_cluster  # noqa: E402

from kiln.stream.consumer import TokenConsumer  # noqa: E402
from kiln.stream.producer import publish_tokens  # noqa: E402

BOOTSTRAP = f"127.0.0.1:{kafka_cluster.BASE_PORT}"
TOKENS = 2048  # tokens per message: 8 KiB of uint32, as the notes' measurements
PRODUCER = {"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": "true", "compression.type": "zstd",
            "linger.ms": "20", "batch.size": "1000000"}


def topic(name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result()
    return name


def kiln_round(ids: Path, n: int, partitions: int, rep: int) -> dict[str, float]:
    name = topic(f"kiln-{rep}", partitions)
    t0 = time.perf_counter()
    publish_tokens(paths=[ids], topic=name, partitions=partitions, tokens_per_message=TOKENS, dtype="uint32",
                   config=PRODUCER)
    produce_s = time.perf_counter() - t0
    c = TokenConsumer(bootstrap=BOOTSTRAP, topic=name, rank=0, world=1, tokens_per_message=TOKENS, batch_messages=8,
                      prefetch_messages=8192)
    t0 = time.perf_counter()
    tokens = sum(c.next_batch().size for _ in range(n // 8))
    consume_s = time.perf_counter() - t0
    c.close()
    return {"producer_MBps": n * TOKENS * 4 / produce_s / 1e6, "consumer_tokens_per_s": tokens / consume_s}


def naive_round(data: np.ndarray[Any, Any], n: int, partitions: int, rep: int) -> dict[str, float]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # type: ignore[import-untyped]

    name = topic(f"naive-{rep}", partitions)
    producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all", compression_type="gzip")
    t0 = time.perf_counter()
    for i in range(n):
        producer.send(name, json.dumps(data[i * TOKENS:(i + 1) * TOKENS].tolist()).encode(), partition=i % partitions)
    producer.flush()
    produce_s = time.perf_counter() - t0
    consumer = KafkaConsumer(bootstrap_servers=BOOTSTRAP, enable_auto_commit=False, consumer_timeout_ms=30000)
    consumer.assign([TopicPartition(name, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    t0, tokens = time.perf_counter(), 0
    for seen, msg in enumerate(consumer, start=1):  # the naive design: one message at a time, JSON per sample
        tokens += len(json.loads(msg.value))
        if seen == n:
            break
    consume_s = time.perf_counter() - t0
    consumer.close()
    producer.close()
    return {"producer_MBps": n * TOKENS * 4 / produce_s / 1e6, "consumer_tokens_per_s": tokens / consume_s}


def resume_check(partitions: int, n: int, ids: Path) -> dict[str, Any]:
    """Kill a rank twice at random points: the sequence read equals an uninterrupted read."""
    name = topic("resume", partitions)
    publish_tokens(paths=[ids], topic=name, partitions=partitions, tokens_per_message=TOKENS, dtype="uint32",
                   config=PRODUCER)
    steps = n // 8 // 2  # rank 1 of 2 reads half the messages

    def reader() -> TokenConsumer:
        return TokenConsumer(bootstrap=BOOTSTRAP, topic=name, rank=1, world=2, tokens_per_message=TOKENS,
                             batch_messages=8)

    first = reader()
    want = [int(b[0]) for _ in range(steps) for b in first.next_batch()]
    first.close()
    kills = sorted(random.Random(7).sample(range(1, steps), 2))
    got: list[int] = []
    state: dict[str, object] | None = None
    for start, stop in zip([0, *kills], [*kills, steps], strict=True):
        c = reader()
        if state is not None:
            c.load_state_dict(state)
        got += [int(b[0]) for _ in range(stop - start) for b in c.next_batch()]
        state = c.state_dict()
        c.close()
    return {"steps": steps, "killed_at": kills, "identical": got == want, "messages": len(got)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="4.3.1")
    ap.add_argument("--messages", type=int, default=4800)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kiln-kafka-"))
    data = (np.random.default_rng(1).zipf(1.3, a.messages * TOKENS) % 128_000).astype(np.uint32)  # token-like ids
    ids = work / "tokens.bin"
    data.tofile(ids)
    broker = kafka_cluster.start(a.version, work, count=1)
    try:
        rows = [(kiln_round(ids, a.messages, a.partitions, r), naive_round(data, a.messages, a.partitions, r))
                for r in range(a.runs)]
        resume = resume_check(a.partitions, a.messages, ids)
    finally:
        broker.stop()

    def med(side: int, key: str) -> float:
        return statistics.median(r[side][key] for r in rows)

    out = {
        "kafka": a.version, "messages": a.messages, "tokens_per_message": TOKENS, "runs": a.runs,
        "kiln": {k: round(med(0, k), 1) for k in rows[0][0]},
        "naive": {k: round(med(1, k), 2) for k in rows[0][1]},
        "ratio_consumer": round(med(0, "consumer_tokens_per_s") / med(1, "consumer_tokens_per_s"), 1),
        "ratio_producer": round(med(0, "producer_MBps") / med(1, "producer_MBps"), 1),
        "resume": resume,
    }
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0 if resume["identical"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
