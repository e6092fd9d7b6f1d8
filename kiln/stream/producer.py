"""publish_tokens: tokenised shards (.npy arrays or raw token-id files) to a topic, as fixed-size messages.

Messages go to partitions in turn (message i to partition i mod P), so every partition holds the same share and
each rank's fixed order (kiln.stream.order) is a fixed function of the shards. With the plan's producer settings
(acks=all, idempotence) an acknowledged message is on min.insync.replicas brokers exactly once, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import KafkaException, Producer


def read_shard(path: Path, dtype: str) -> np.ndarray[Any, Any]:
    """Token ids of one shard: a .npy array (any shape, flattened) or a raw file of `dtype` ids."""
    if path.suffix == ".npy":
        loaded: np.ndarray[Any, Any] = np.load(path, allow_pickle=False)
        return loaded.astype(dtype, copy=False).ravel()
    return np.fromfile(path, dtype=dtype)


def messages(shards: Iterable[np.ndarray[Any, Any]], tokens_per_message: int) -> Iterator[bytes]:
    """Fixed-size messages across shard boundaries; a last partial message is held back, never sent short."""
    carry = np.empty(0, dtype=np.uint32)
    for tokens in shards:
        data = np.concatenate([carry.astype(tokens.dtype), tokens]) if carry.size else tokens
        whole = data.size // tokens_per_message * tokens_per_message
        for start in range(0, whole, tokens_per_message):
            yield data[start:start + tokens_per_message].tobytes()
        carry = data[whole:]


def publish_tokens(*, paths: list[Path], topic: str, partitions: int, tokens_per_message: int, dtype: str,
                   config: dict[str, str], producer_factory: Callable[[dict[str, str]], Any] | None = None) -> int:
    """Publish the shards in order; returns the messages acknowledged. A failed delivery raises."""
    producer = (producer_factory or Producer)(config)
    failures: list[str] = []
    sent = 0

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for i, value in enumerate(messages((read_shard(p, dtype) for p in paths), tokens_per_message)):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                producer.poll(0.5)
        producer.poll(0)
        sent += 1
    remaining = producer.flush(300)
    if failures or remaining:
        raise KafkaException(f"{len(failures) + remaining} of {sent} messages not acknowledged: "
                             f"{failures[:3] or 'flush timed out'}")
    return sent
