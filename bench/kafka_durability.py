"""Durability of the token stream on a real three-node KRaft cluster: a broker killed during production loses no
acknowledged message and duplicates none.

Usage: .venv/bin/python bench/kafka_durability.py [--messages 6000] [--partitions 6] [--out FILE]

Starts three combined controller+broker nodes on 127.0.0.1 (bench/kafka_cluster.py), creates a topic with
replication 3, min.insync.replicas 2 and no unclean leader election (the plan's topic settings,
kiln/knowledge/kafka.yaml), and publishes token messages with kiln.stream.publish_tokens and the plan's producer
settings (acks=all, idempotence, zstd). When a third of the messages are acknowledged it kills (SIGKILL) the node
that leads the most partitions, so leaders move while messages are in flight. Then it reads every partition from
the start and checks that each acknowledged message is there exactly once, in its partition's order. Exit 0 when
none is missing or repeated.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kafka_cluster  # noqa: E402

from kiln.stream.producer import publish_tokens  # noqa: E402

TOKENS = 2048  # tokens per message (8 KiB of uint32), as bench/kafka_stream.py
TOPIC = "durable"


def create_topic(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2",
                                                  "unclean.leader.election.enable": "false"})
    for f in admin.create_topics([new]).values():
        f.result()


def leaders(bootstrap: str) -> Counter[int]:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=30)
    return Counter(p.leader for p in meta.topics[TOPIC].partitions.values())


class KillAfter:
    """A producer factory whose delivery reports count acknowledgements and kill a node at the given count."""

    def __init__(self, cluster: kafka_cluster.Cluster, at: int) -> None:
        self.cluster, self.at, self.acked = cluster, at, 0
        self.killed: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, config: dict[str, str]) -> Any:
        outer = self
        real = Producer(config)

        class Counting:
            def produce(self, topic: str, value: bytes, partition: int, on_delivery: Any) -> None:
                def report(err: Any, msg: Any) -> None:
                    if err is None:
                        outer.delivered()
                    on_delivery(err, msg)
                real.produce(topic, value=value, partition=partition, on_delivery=report)

            def poll(self, timeout: float) -> int:
                return int(real.poll(timeout))

            def flush(self, timeout: float) -> int:
                return int(real.flush(timeout))

        return Counting()

    def delivered(self) -> None:
        with self._lock:
            self.acked += 1
            if self.acked != self.at:
                return
        threading.Thread(target=self._kill, daemon=True).start()

    def _kill(self) -> None:
        node = leaders(self.cluster.bootstrap).most_common(1)[0][0]
        self.cluster.kill(node)
        self.killed = {"node": node, "after_acks": self.at, "at": time.monotonic()}


def read_back(bootstrap: str, partitions: int) -> dict[int, list[bytes]]:
    """Every message of every partition, from offset 0 to the end, with the committed reads only."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability-check", "enable.auto.commit": "false",
                  "isolation.level": "read_committed"})
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(partitions)}
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    deadline = time.monotonic() + 120
    while any(len(out[p]) < ends[p] for p in out) and time.monotonic() < deadline:
        for m in c.consume(512, 1.0):
            partition, value = m.partition(), m.value()
            if m.error() is None and partition is not None and value is not None:
                out[partition].append(value)
    c.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="4.3.1")
    ap.add_argument("--messages", type=int, default=6000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kiln-kafka-durability-"))
    data = (np.random.default_rng(2).zipf(1.3, a.messages * TOKENS) % 128_000).astype(np.uint32)
    ids = work / "tokens.bin"
    data.tofile(ids)
    want = [data[i * TOKENS:(i + 1) * TOKENS].tobytes() for i in range(a.messages)]
    cluster = kafka_cluster.start(a.version, work, count=3)
    killer = KillAfter(cluster, a.messages // 3)
    try:
        create_topic(cluster.bootstrap, a.partitions)
        before = leaders(cluster.bootstrap)
        t0 = time.monotonic()
        acked = publish_tokens(paths=[ids], topic=TOPIC, partitions=a.partitions, tokens_per_message=TOKENS,
                               dtype="uint32", producer_factory=killer, config={
                                   "bootstrap.servers": cluster.bootstrap, "acks": "all",
                                   "enable.idempotence": "true", "compression.type": "zstd", "linger.ms": "20",
                                   "batch.size": "1000000"})
        produce_s = time.monotonic() - t0
        after = leaders(cluster.bootstrap)
        got = read_back(cluster.bootstrap, a.partitions)
    finally:
        cluster.stop()
    expected = {p: want[p::a.partitions] for p in range(a.partitions)}
    missing = sum(len(set(expected[p]) - set(got[p])) for p in expected)
    repeated = sum(len(got[p]) - len(set(got[p])) for p in got)
    in_order = all(got[p] == expected[p] for p in expected)
    out = {
        "kafka": a.version, "nodes": 3, "replication": 3, "min_insync_replicas": 2, "partitions": a.partitions,
        "messages_acked": acked, "killed_node": killer.killed.get("node"), "killed_after_acks": killer.at,
        "leaders_before": dict(sorted(before.items())), "leaders_after": dict(sorted(after.items())),
        "messages_read": sum(len(v) for v in got.values()), "missing": missing, "repeated": repeated,
        "every_partition_in_order": in_order, "produce_s": round(produce_s, 1),
    }
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0 if killer.killed and acked == a.messages and missing == 0 and repeated == 0 and in_order else 1


if __name__ == "__main__":
    raise SystemExit(main())
