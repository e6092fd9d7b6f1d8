"""What a rank reads and in which order: pure, so the order can be proven without a broker.

A rank of a world of W ranks reads the partitions p with p mod W = rank, in ascending order, one message from
each in turn (round robin). Its sequence is therefore fixed by the topic's contents alone, whatever order the
broker's fetches arrive in. The state a checkpoint keeps is the next offset of every partition the rank reads
and the position in the round; merged across ranks it resumes any world size without losing or repeating a
message (a resized world restarts the round at its first partition).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


class StreamGapError(RuntimeError):
    """The next message a rank needs is gone from the topic (deleted by retention, or the offsets are from
    another topic): training would silently skip data, so the stream stops."""


def assignment(partitions: int, rank: int, world: int) -> tuple[int, ...]:
    """The partitions `rank` reads, ascending; every partition belongs to exactly one rank."""
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is outside a world of {world}")
    if partitions < world:
        raise ValueError(f"{partitions} partitions cannot feed {world} ranks: give the topic at least one per rank")
    return tuple(p for p in range(partitions) if p % world == rank)


@dataclass(kw_only=True)
class StreamState:
    """The resumable position: the next offset to hand out per partition, and each rank's place in its round
    (ranks of the world the state was saved in)."""

    topic: str
    offsets: dict[int, int]
    cursors: dict[int, int] = field(default_factory=dict)  # rank → position in its round
    world: int = 1

    def as_dict(self) -> dict[str, object]:
        return {"topic": self.topic, "offsets": {str(p): o for p, o in sorted(self.offsets.items())},
                "cursors": {str(r): c for r, c in sorted(self.cursors.items())}, "world": self.world}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> StreamState:
        offsets, cursors, world = data.get("offsets"), data.get("cursors", {}), data.get("world", 1)
        if not isinstance(offsets, dict) or not isinstance(cursors, dict) or not isinstance(world, int):
            raise ValueError("a stream state holds `offsets` (partition → next offset), `cursors` and `world`")
        return cls(topic=str(data["topic"]), offsets={int(p): int(o) for p, o in offsets.items()},
                   cursors={int(r): int(c) for r, c in cursors.items()}, world=world)

    def cursor(self, rank: int, world: int) -> int:
        """Where `rank` resumes its round: its saved place in the same world, else the round's start."""
        return self.cursors.get(rank, 0) if world == self.world else 0


def oldest_offsets(states: list[dict[str, object]], partitions: tuple[int, ...]) -> dict[int, int]:
    """Per partition of `partitions`, the lowest offset any of the kept checkpoints' stream states resumes from: the
    oldest message the topic must still hold. A partition no state names is left out."""
    out: dict[int, int] = {}
    for state in states:
        for p, o in StreamState.from_dict(state).offsets.items():
            if p in partitions:
                out[p] = min(o, out.get(p, o))
    return out


def merge_states(states: list[dict[str, object]], partitions: int | None = None) -> dict[str, object]:
    """The states every rank saved at one step, as one state any world size can resume from. `partitions`: the
    topic's partition count when partitions were added since the step (`kafka-topics --alter`, or a grown consumer
    pool with `partitions: auto`); Kafka numbers new partitions after the old ones and starts them empty, so each is
    read from offset 0."""
    parsed = [StreamState.from_dict(s) for s in states]
    topics = {s.topic for s in parsed}
    worlds = {s.world for s in parsed}
    if len(topics) != 1 or len(worlds) != 1:
        raise ValueError(f"states of different topics or worlds cannot be merged: {sorted(topics)}, {sorted(worlds)}")
    offsets: dict[int, int] = {}
    cursors: dict[int, int] = {}
    for s in parsed:
        for p, o in s.offsets.items():
            if offsets.setdefault(p, o) != o:
                raise ValueError(f"partition {p} is at {offsets[p]} in one state and {o} in another")
        cursors.update(s.cursors)
    world = worlds.pop()
    if partitions is not None:
        offsets.update({p: 0 for p in _added_partitions(offsets, set(cursors), world, partitions)})
    return StreamState(topic=topics.pop(), offsets=offsets, cursors=cursors, world=world).as_dict()


def _added_partitions(offsets: dict[int, int], ranks: set[int], world: int, partitions: int) -> range:
    """The partitions numbered after those the states name, up to `partitions`. Only the states of every rank of
    the saved world name every old partition: with one missing, its partitions would be taken for new ones and
    read again from their start."""
    if ranks != set(range(world)):
        raise ValueError(f"the states are of ranks {sorted(ranks)} of a world of {world}: merge the state of every "
                         "rank to add partitions")
    known = len(offsets)
    if set(offsets) != set(range(known)):
        raise ValueError(f"the states name partitions {sorted(offsets)}, not 0 to {known - 1}: they are not of "
                         "one step of one job")
    if partitions < known:
        raise ValueError(f"the states name {known} partitions, more than {partitions}: Kafka never removes one")
    return range(known, partitions)


@dataclass(kw_only=True)
class RoundRobin:
    """Buffers fetched messages per partition and hands them out in the rank's fixed order."""

    partitions: tuple[int, ...]
    offsets: dict[int, int]  # next offset to hand out
    cursor: int = 0
    buffers: dict[int, deque[tuple[int, bytes]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.buffers = {p: deque() for p in self.partitions}

    def add(self, partition: int, offset: int, value: bytes) -> None:
        if offset >= self.offsets[partition]:  # an older message (a re-fetch after a seek) is dropped
            self.buffers[partition].append((offset, value))

    def buffered(self) -> int:
        return sum(len(b) for b in self.buffers.values())

    def ready(self) -> bool:
        return bool(self.buffers[self.partitions[self.cursor]])

    def take(self) -> tuple[int, bytes]:
        """The next message in order; the caller checks ready() first."""
        p = self.partitions[self.cursor]
        offset, value = self.buffers[p].popleft()
        if offset != self.offsets[p]:
            raise StreamGapError(f"partition {p}: the next message is at offset {offset}, not {self.offsets[p]}: "
                                 "messages were deleted (retention shorter than the resume needed?); see "
                                 "docs/runbooks/kafka-retention.md")
        self.offsets[p] = offset + 1
        self.cursor = (self.cursor + 1) % len(self.partitions)
        return p, value
