"""Model distribution driven by SeaweedFS filer metadata subscription, relay fan-out (real SeaweedFS)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from kiln.dataflow import engine
from kiln.dataflow.lake import Credentials, client
from kiln.dataflow.model_distribution import Distribution, distribute, follow, json_stream, new_keys
from kiln.dataflow.mover import Mover

EVENTS = """{"directory": "/buckets/lake/models",
 "eventNotification": {"oldEntry": null, "newEntry": {"name": "m1", "isDirectory": true}}}
{"directory": "/buckets/lake/models/m1",
 "eventNotification": {"oldEntry": null, "newEntry": {"name": "w.bin", "isDirectory": false},
 "newParentPath": "/buckets/lake/models/m1"}}
{"directory": "/buckets/lake/models/m1", "eventNotification": {"oldEntry": {"name": "old.bin"}, "newEntry": null}}
{"directory": "/buckets/lake/.uploads/abc", "eventNotification": {"newEntry": {"name": "0001.part"}}}
{"directory": "/buckets/other/models", "eventNotification": {"newEntry": {"name": "x.bin"}}}
"""


def test_events_name_new_files_only() -> None:
    chunks = [EVENTS[i : i + 7] for i in range(0, len(EVENTS), 7)]  # arrives in arbitrary pieces
    assert list(new_keys(json_stream(chunks), "lake", "models/")) == ["m1/w.bin"]


def test_new_model_reaches_every_receiver_and_the_lake_serves_it_once(
    seaweedfs: Credentials, weed_filer: tuple[str, str], tmp_path: Path
) -> None:
    weed, filer = weed_filer
    mover = Mover(seaweedfs, tmp_path / "state", engine.Tuning(concurrency=4, part_size_MiB=8))
    relay = tmp_path / "lustre" / "models-relay"
    targets = [tmp_path / f"node{i}" / "models" for i in range(3)]
    done: list[Distribution] = []
    stop = threading.Event()

    def on_key(key: str) -> None:
        done.append(distribute(mover, "models", "lake", "models/", [key], relay, targets))

    follower = threading.Thread(target=follow, args=(weed, filer, "lake", "models/", on_key, stop), daemon=True)
    follower.start()
    time.sleep(2)  # the subscription is open
    model = os.urandom(20 << 20)
    from boto3.s3.transfer import TransferConfig  # type: ignore[import-untyped]

    src = tmp_path / "model.safetensors"
    src.write_bytes(model)
    client(seaweedfs).upload_file(
        str(src), "lake", "models/llm/model.safetensors", Config=TransferConfig(multipart_threshold=8 << 20)
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all((t / "llm/model.safetensors").is_file() for t in targets):
        time.sleep(0.2)
    stop.set()
    follower.join(10)
    for t in targets:
        assert (t / "llm/model.safetensors").read_bytes() == model
        assert not list(t.rglob(f"*{engine.PARTIAL_SUFFIX}"))
    lake_bytes = sum(d.lake_bytes for d in done)
    assert lake_bytes == len(model)  # once, not 3×: ratio 1.0 against the 1.2 ceiling
    assert sum(d.copies for d in done) == 3


def test_receivers_sharing_a_relay_pull_each_model_from_the_lake_once(seaweedfs: Credentials, tmp_path: Path) -> None:
    """N followers (one per receiver node on Kubernetes) handle the same change event at the same moment, each
    with its own Mover and its own node's directory, sharing the relay and the state directory (Lustre)."""
    n = 4
    model = os.urandom(12 << 20)
    src = tmp_path / "model.bin"
    src.write_bytes(model)
    client(seaweedfs).upload_file(str(src), "lake", "fanout/llm/model.bin")
    state, relay = tmp_path / "lustre" / "state", tmp_path / "lustre" / "relay"
    start = threading.Barrier(n)
    done: list[Distribution] = []
    errors: list[BaseException] = []

    def receiver(i: int) -> None:
        mover = Mover(seaweedfs, state, engine.Tuning(concurrency=4, part_size_MiB=8))
        start.wait()
        try:
            done.append(distribute(mover, "models0", "lake", "fanout/", ["llm/model.bin"], relay,
                                   [tmp_path / f"node{i}" / "models"]))
        except BaseException as exc:  # reported below with the others
            errors.append(exc)

    threads = [threading.Thread(target=receiver, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and len(done) == n
    for i in range(n):
        assert (tmp_path / f"node{i}" / "models" / "llm/model.bin").read_bytes() == model
    assert sum(d.lake_bytes for d in done) == len(model)  # the lake served it once, not n times
    assert sorted(d.lake_bytes for d in done) == [0] * (n - 1) + [len(model)]
