"""The token stream on a real KRaft broker: kiln.stream against the naive loop, in the same run, and resume.

Usage: .venv/bin/python bench/kafka_stream.py [--messages 4800] [--kiln-messages 19200] [--partitions 12] [--runs 3]
       [--out FILE]

Starts a single-node KRaft broker (combined controller and broker) on 127.0.0.1 (bench/kafka_cluster.py, from
the jars scripts/build-kafka.sh assembles: needs maven and a JRE 17), publishes the same token ids two ways and reads
them back two ways, per repetition:

- kiln: the plan's producer settings (acks=all, idempotence, zstd), and one TokenConsumer reading every
  partition (batch fetch, numpy.frombuffer, the fixed round-robin order), timed from its first batch until the
  topic's last fetch of each partition (kiln.stream.measure.end_of_topic), over --kiln-messages;
- naive: the design kiln exists to replace (kafka-python, one JSON list of token ids per message, gzip, a
  per-message Python loop).

It prints tokens/s of each consumer, producer MB/s, bytes per token on the wire and the kiln ÷ naive ratios as
JSON; then SIGKILLs a rank's process twice at random points and restarts it from its last checkpoint's
state_dict, and checks the sequence equals an uninterrupted read. The code is kiln.stream.measure's, which
`kiln verify` runs for its stream.* rows. Both sides share the machine's cores with
the broker: use the ratios, not the absolute figures (docs/kafka.md, Measurements).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kafka_cluster  # noqa: E402

from kiln.stream import measure  # noqa: E402

TOKENS = 2048  # tokens per message: 8 KiB of uint32, as the notes' measurements
PRODUCER = {"acks": "all", "enable.idempotence": "true", "compression.type": "zstd", "linger.ms": "20",
            "batch.size": "1000000"}
CONSUMER = {"fetch.min.bytes": "1048576", "fetch.wait.max.ms": "100"}


def one_round(bootstrap: str, shape: measure.TopicShape, ids: object,
              kiln_ids: object) -> tuple[dict[str, float], dict[str, float]]:
    """kiln and naive on the same brokers, one after the other (kiln.stream.measure, as kiln verify runs them)."""
    topic = measure.scratch_topic(bootstrap, shape, "kiln")
    sent = measure.produce(bootstrap, topic, kiln_ids, shape, PRODUCER)  # type: ignore[arg-type]
    kiln = {"producer_MBps": sent.messages * shape.message_bytes / sent.seconds / 1e6,
            "wire_MBps": sent.wire_MBps(), "bytes_per_token": sent.wire_bytes / (sent.messages * TOKENS),
            "consumer_tokens_per_s": measure.consume_kiln(bootstrap, topic, shape, sent.messages, CONSUMER,
                                                          tail=measure.end_of_topic(shape, CONSUMER, sent))}
    naive = measure.naive(bootstrap, measure.scratch_topic(bootstrap, shape, "naive"), ids, shape)  # type: ignore[arg-type]
    return kiln, naive


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="4.3.1")
    ap.add_argument("--messages", type=int, default=4800)
    ap.add_argument("--kiln-messages", type=int, default=19200)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kiln-kafka-"))
    shape = measure.TopicShape(partitions=a.partitions, replication=1, tokens_per_message=TOKENS, dtype="uint32")
    ids = measure.token_ids(a.messages * TOKENS, "uint32")
    kiln_ids = measure.token_ids(a.kiln_messages * TOKENS, "uint32")
    broker = kafka_cluster.start(a.version, work, count=1)
    try:
        rows = [one_round(broker.bootstrap, shape, ids, kiln_ids) for _ in range(a.runs)]
        resume_topic = measure.scratch_topic(broker.bootstrap, shape, "resume")
        measure.produce(broker.bootstrap, resume_topic, ids, shape, PRODUCER)
        resume = measure.resume(broker.bootstrap, resume_topic, shape, steps=a.messages // 8 // 2, rank=1, world=2,
                                work=work / "resume")
    finally:
        broker.stop()

    def med(side: int, key: str) -> float:
        return statistics.median(r[side][key] for r in rows)

    out = {
        "kafka": a.version, "messages": a.messages, "kiln_messages": a.kiln_messages, "tokens_per_message": TOKENS,
        "runs": a.runs,
        "kiln": {k: round(med(0, k), 3) for k in rows[0][0]},
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
