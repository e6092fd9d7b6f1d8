"""Durability of the token stream on a real three-node KRaft cluster: a broker killed during production loses no
acknowledged message and duplicates none.

Usage: .venv/bin/python bench/kafka_durability.py [--messages 6000] [--partitions 6] [--out FILE]

Starts three combined controller+broker nodes on 127.0.0.1 (bench/kafka_cluster.py), creates a topic with
replication 3, min.insync.replicas 2 and no unclean leader election (the plan's topic settings,
kiln/knowledge/kafka.yaml), and publishes token messages with the plan's producer settings (acks=all,
idempotence, zstd). When a third of the messages are acknowledged it kills (SIGKILL) the node that leads the most
partitions, so leaders move while messages are in flight. Then it reads every partition from the start and checks
that each acknowledged message is there exactly once, in its partition's order (kiln.stream.measure.durability,
the same code `kiln verify`'s stream.durability runs). Exit 0 when none is missing or repeated.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kafka_cluster  # noqa: E402

from kiln.stream import measure  # noqa: E402

TOKENS = 2048  # tokens per message (8 KiB of uint32), as bench/kafka_stream.py
PRODUCER = {"acks": "all", "enable.idempotence": "true", "compression.type": "zstd", "linger.ms": "20",
            "batch.size": "1000000"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="4.3.1")
    ap.add_argument("--messages", type=int, default=6000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kiln-kafka-durability-"))
    shape = measure.TopicShape(partitions=a.partitions, replication=3, tokens_per_message=TOKENS, dtype="uint32",
                               configs={"min.insync.replicas": "2", "unclean.leader.election.enable": "false"})
    ids = measure.token_ids(a.messages * TOKENS, "uint32", seed=2)
    cluster = kafka_cluster.start(a.version, work, count=3)
    try:
        topic = measure.scratch_topic(cluster.bootstrap, shape, "durable")
        t0 = time.monotonic()
        d = measure.durability(cluster.bootstrap, topic, ids, shape, PRODUCER, cluster.kill)
        produce_s = time.monotonic() - t0
    finally:
        cluster.stop()
    out = {"kafka": a.version, "nodes": 3, "replication": 3, "min_insync_replicas": 2, "partitions": a.partitions,
           "killed_after_acks": a.messages // 3, **dataclasses.asdict(d), "seconds": round(produce_s, 1)}
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    ok = d.killed_node is not None and d.acked == a.messages and d.missing == 0 and d.repeated == 0 and d.in_order
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
