"""TokenConsumer: one rank's deterministic, resumable reader of token-id messages.

- partitions are assigned, not balanced: `assign()` with the offsets of the state (no group rebalancing)
- a background thread fetches ahead (`consume(512)`) into per-partition buffers, up to `prefetch_messages`
- `next_batch()` hands out messages in the rank's fixed round-robin order (kiln.stream.order) and decodes them
  with `numpy.frombuffer` into a (batch_messages, tokens_per_message) array: no JSON, no per-token Python
- `state_dict()` is what the checkpoint keeps; offsets are committed to Kafka only so lag can be watched
- lag (messages behind the partition's end) and runway (seconds of tokens buffered ahead) are Prometheus gauges,
  and so is the oldest offset of each partition that a kept checkpoint resumes from (`report_checkpoints()`)
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from confluent_kafka import Consumer, KafkaError, TopicPartition
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from kiln.stream.order import RoundRobin, StreamState, assignment, oldest_offsets

FETCH_MESSAGES = 512  # messages per consume() call: batch fetches, as the measured fast path does


def stream_gauges(registry: CollectorRegistry) -> tuple[Gauge, Gauge, Gauge]:
    """A rank's gauges in `registry`: lag, runway, and the oldest offset a kept checkpoint resumes from (the
    monitoring rules of the token stream read these names)."""
    labels = ["topic", "rank"]
    return (
        Gauge("kiln_stream_lag_messages", "Messages between this rank's position and the partitions' ends", labels,
              registry=registry),
        Gauge("kiln_stream_runway_seconds", "Seconds of tokens buffered ahead of training at the current "
              "consumption rate", labels, registry=registry),
        Gauge("kiln_stream_checkpoint_offset", "The oldest offset of the partition that a kept checkpoint resumes "
              "from: the topic must still hold it", ["topic", "partition"], registry=registry),
    )


def metrics_port(local_rank: int | None = None) -> int:
    """The port a rank serves its gauges on, where the plan's scrape job kiln-stream looks for it: the base port
    (kiln/knowledge/ports.yaml metrics.kiln_stream) plus the rank's index on its node (LOCAL_RANK, which torchrun
    sets; SLURM_LOCALID under srun; else 0)."""
    from kiln import knowledge

    if local_rank is None:
        local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0")))
    return knowledge.load().ports.metrics.kiln_stream.value + local_rank


def serve_metrics(registry: CollectorRegistry, *, local_rank: int | None = None, address: str = "0.0.0.0") -> int:
    """Serve a rank's registry (TokenConsumer.registry) on metrics_port(local_rank); returns the port."""
    port = metrics_port(local_rank)
    start_http_server(port, addr=address, registry=registry)
    return port


class TokenConsumer:
    """Reads one rank's share of a token topic in a fixed order; resumable from `state_dict()`."""

    def __init__(self, *, bootstrap: str, topic: str, rank: int, world: int, tokens_per_message: int,
                 batch_messages: int, dtype: str = "uint32", config: dict[str, str] | None = None,
                 group_id: str = "kiln-stream", prefetch_messages: int = 4096,
                 registry: CollectorRegistry | None = None,
                 client_factory: Callable[[dict[str, str]], Any] | None = None) -> None:
        self.topic, self.rank, self.world = topic, rank, world
        self.tokens_per_message, self.batch_messages = tokens_per_message, batch_messages
        self.dtype = np.dtype(dtype)
        self.prefetch_messages = prefetch_messages
        conf = {"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": "false",
                "enable.partition.eof": "false", **(config or {})}
        self._client = (client_factory or Consumer)(conf)
        self._partitions = assignment(self._partition_count(), rank, world)
        self._order = RoundRobin(partitions=self._partitions, offsets=dict.fromkeys(self._partitions, 0))
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._rate = 0.0  # tokens/s handed out, smoothed
        self._last = time.monotonic()
        self._metrics(registry or CollectorRegistry())

    def _partition_count(self) -> int:
        meta = self._client.list_topics(self.topic, timeout=30)
        topic = meta.topics.get(self.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise RuntimeError(f"topic {self.topic} does not exist on the cluster (kiln plan lists the planned ones)")
        return len(topic.partitions)

    def _metrics(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._lag, self._runway, self._kept = stream_gauges(registry)

    # ---- the checkpoint's state --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, object]:
        with self._lock:
            return StreamState(topic=self.topic, offsets=dict(self._order.offsets),
                               cursors={self.rank: self._order.cursor}, world=self.world).as_dict()

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Resume from a state (one rank's, or kiln.stream.merge_states of every rank's); before start()."""
        if self._thread is not None:
            raise RuntimeError("load_state_dict() before the first next_batch()")
        s = StreamState.from_dict(state)
        if s.topic != self.topic:
            raise ValueError(f"the state is of topic {s.topic}, this stream reads {self.topic}")
        missing = [p for p in self._partitions if p not in s.offsets]
        if missing:
            raise ValueError(f"the state has no offset for partitions {missing}: merge every rank's state "
                             "(kiln.stream.merge_states) when the world size changed, and pass it the topic's "
                             "partition count when partitions were added")
        self._order.offsets = {p: s.offsets[p] for p in self._partitions}
        self._order.cursor = s.cursor(self.rank, self.world) % len(self._partitions)

    # ---- reading -----------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._client.assign([TopicPartition(self.topic, p, o) for p, o in self._order.offsets.items()])
        self._thread = threading.Thread(target=self._fetch, name=f"kiln-stream-{self.rank}", daemon=True)
        self._thread.start()

    def _fetch(self) -> None:
        try:
            while not self._stop.is_set():
                with self._lock:
                    while self._order.buffered() >= self.prefetch_messages and not self._stop.is_set():
                        self._lock.wait(0.1)
                got = []
                for m in self._client.consume(num_messages=FETCH_MESSAGES, timeout=0.1):
                    err = m.error()
                    if err is not None and err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"fetch failed on {self.topic}: {err}")
                    if err is None:
                        partition, offset, value = m.partition(), m.offset(), m.value()
                        if partition is None or offset is None or value is None:
                            raise RuntimeError(f"{self.topic}: a message without a partition, offset or value "
                                               "(a tombstone?): the stream holds only token messages")
                        got.append((partition, offset, value))
                if got:
                    with self._lock:  # one hand-over per fetch, not per message
                        for partition, offset, value in got:
                            self._order.add(partition, offset, value)
                        self._lock.notify_all()
        except BaseException as exc:  # handed to the training thread by next_batch()
            with self._lock:
                self._failure = exc
                self._lock.notify_all()

    def _messages(self, count: int, timeout: float) -> list[bytes]:
        """The next `count` messages in order, waiting at most `timeout` seconds for each."""
        out: list[bytes] = []
        with self._lock:
            deadline = time.monotonic() + timeout
            while len(out) < count:
                if self._order.ready():
                    out.append(self._order.take()[1])
                    deadline = time.monotonic() + timeout
                    continue
                if self._failure is not None:
                    raise self._failure
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no message for {timeout:g} s on partition "
                                       f"{self._order.partitions[self._order.cursor]} of {self.topic}")
                self._lock.notify_all()  # room freed: the fetcher may go on
                self._lock.wait(0.05)
            self._lock.notify_all()
        return out

    def next_batch(self, timeout: float = 60.0) -> np.ndarray[Any, Any]:
        """The next (batch_messages, tokens_per_message) token ids of this rank, in its fixed order."""
        self.start()
        batch = np.empty((self.batch_messages, self.tokens_per_message), dtype=self.dtype)
        for i, value in enumerate(self._messages(self.batch_messages, timeout)):
            batch[i] = self._decode(value)
        self._account(self.batch_messages * self.tokens_per_message)
        return batch

    def _decode(self, value: bytes) -> np.ndarray[Any, Any]:
        tokens = np.frombuffer(value, dtype=self.dtype)
        if tokens.size != self.tokens_per_message:
            raise ValueError(f"a message of {self.topic} holds {tokens.size} {self.dtype} tokens, the stream "
                             f"expects {self.tokens_per_message}: producer and consumer disagree on the shape")
        return tokens

    def _account(self, tokens: int) -> None:
        now = time.monotonic()
        rate = tokens / max(now - self._last, 1e-6)
        self._rate = rate if self._rate == 0 else 0.9 * self._rate + 0.1 * rate
        self._last = now
        labels = (self.topic, str(self.rank))
        self._runway.labels(*labels).set(self.runway_s())

    def runway_s(self) -> float:
        """Seconds of training the buffered tokens cover at the current rate."""
        with self._lock:
            buffered = self._order.buffered() * self.tokens_per_message
        return buffered / self._rate if self._rate else 0.0

    def report_lag(self) -> int:
        """Commit the position (for lag monitoring only) and set the lag gauge; returns the lag in messages."""
        with self._lock:
            offsets = dict(self._order.offsets)
        lag = 0
        for p, o in offsets.items():
            _, high = self._client.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10, cached=False)
            lag += max(0, high - o)
        self._client.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                            asynchronous=True)
        self._lag.labels(self.topic, str(self.rank)).set(lag)
        return lag

    def report_checkpoints(self, states: list[dict[str, object]]) -> dict[int, int]:
        """Set the checkpoint offset gauge from the stream states of every checkpoint still kept (each one's state,
        merged or this rank's); returns this rank's partitions' oldest offsets. Call it whenever a checkpoint is
        saved or deleted."""
        oldest = oldest_offsets(states, self._partitions)
        for p, o in oldest.items():
            self._kept.labels(self.topic, str(p)).set(o)
        return oldest

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._client.close()


def to_device(batch: np.ndarray[Any, Any], device: str = "cuda") -> Any:
    """The batch as a tensor on `device`, through pinned memory, when torch and the device are present; else
    the numpy array unchanged."""
    try:
        import torch  # type: ignore[import-not-found]  # optional: training code brings it
    except ImportError:
        return batch
    if device.startswith("cuda") and not torch.cuda.is_available():
        return batch
    return torch.from_numpy(batch.astype(np.int64)).pin_memory().to(device, non_blocking=True)
