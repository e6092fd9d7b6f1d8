"""TEST DOUBLE: an in-memory stand-in for a Kafka topic and confluent-kafka's Consumer and Producer.

It follows the documented behaviour of the calls kiln.stream makes (confluent-kafka Python API reference,
docs.confluent.io/platform/current/clients/confluent-kafka-python): `list_topics(topic)` returns metadata whose
`topics[topic].partitions` maps partition ids; `assign([TopicPartition(topic, p, offset)])` starts each partition
at that offset; `consume(num_messages, timeout)` returns up to num_messages Message objects (`partition()`,
`offset()`, `value()`, `error()`) in no order across partitions but in offset order within one; a partition's
log starts at its low watermark (earlier offsets were deleted by retention); `produce(topic, value, partition,
on_delivery)` appends in order and `flush()` returns the messages still queued. It never backs a performance
claim: throughput and latency come from a real broker (docs/kafka.md).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


@dataclass
class Topic:
    name: str
    logs: dict[int, list[bytes]]
    low: dict[int, int] = field(default_factory=dict)  # first offset still held per partition

    @classmethod
    def of(cls, name: str, partitions: int) -> Topic:
        return cls(name=name, logs={p: [] for p in range(partitions)})


@dataclass
class Message:
    _partition: int
    _offset: int
    _value: bytes

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def error(self) -> None:
        return None


class FakeConsumer:
    """Delivers the assigned partitions' messages in a seeded random interleaving, a few at a time."""

    def __init__(self, topic: Topic, seed: int = 0) -> None:
        self.topic = topic
        self.rng = random.Random(seed)
        self.next: dict[int, int] = {}
        self.commits: list[Any] = []
        self.closed = False

    def list_topics(self, topic: str, timeout: float = -1) -> Any:
        parts = dict.fromkeys(self.topic.logs) if topic == self.topic.name else {}
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions=parts, error=None)} if parts else {})

    def assign(self, partitions: list[Any]) -> None:
        self.next = {tp.partition: tp.offset for tp in partitions}

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        out: list[Message] = []
        for _ in range(self.rng.randint(1, num_messages)):
            ready = [p for p, o in self.next.items() if max(o, self.topic.low.get(p, 0)) < len(self.topic.logs[p])]
            if not ready:
                if not out:  # the real call blocks up to `timeout` for a message; never spin a caller's loop
                    time.sleep(0.01 if timeout < 0 else min(timeout, 0.01))
                break
            p = self.rng.choice(ready)
            o = max(self.next[p], self.topic.low.get(p, 0))  # deleted offsets: the log resumes at the low mark
            out.append(Message(p, o, self.topic.logs[p][o]))
            self.next[p] = o + 1
        return out

    def get_watermark_offsets(self, tp: Any, timeout: float = -1, cached: bool = False) -> tuple[int, int]:
        return self.topic.low.get(tp.partition, 0), len(self.topic.logs[tp.partition])

    def commit(self, offsets: list[Any], asynchronous: bool = True) -> None:
        self.commits.append([(tp.partition, tp.offset) for tp in offsets])

    def close(self) -> None:
        self.closed = True


class FakeProducer:
    def __init__(self, topic: Topic) -> None:
        self.topic = topic
        self.queued: list[tuple[int, bytes, Any]] = []

    def produce(self, topic: str, value: bytes, partition: int, on_delivery: Any) -> None:
        assert topic == self.topic.name
        self.queued.append((partition, value, on_delivery))

    def poll(self, timeout: float = 0) -> int:
        for partition, value, cb in self.queued:
            self.topic.logs[partition].append(value)
            cb(None, None)
        n, self.queued = len(self.queued), []
        return n

    def flush(self, timeout: float = -1) -> int:
        self.poll()
        return 0
