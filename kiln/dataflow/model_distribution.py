"""Model distribution: new objects under a prefix reach every receiver's fast tier without anyone asking.

Driven by the object store's own change events: `weed filer.meta.tail` (SeaweedFS filer metadata
subscription; an S3 object of bucket B and key K is the filer entry /buckets/B/K, and a multipart upload
appears there only when it completes). Fan-out `relay`: the mover stages each new object once from the
lake into a relay directory on the shared fast tier (Lustre), verified by checksum; every receiver then
copies it from the relay to its own directory (local NVMe) under a temporary name, renamed when whole.
The lake serves each model byte once, however many receivers there are.

Several followers may share one relay (on Kubernetes, one pod per receiver node, each delivering to its own
node): the relay stage then runs under the mover's lock of the relay's link in the state directory, which they
share on Lustre (mounted with `flock`, so the lock holds across clients; kiln/dataflow/lock.py). The first
follower stages the object; the others wait, find it in the relay's manifest (same size and ETag, same file) and
move nothing from the lake.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln.dataflow import engine, lake
from kiln.dataflow.keys import PARTIAL_SUFFIX
from kiln.dataflow.mover import LinkJob, Mover

log = logging.getLogger(__name__)


def json_stream(chunks: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Objects from concatenated (pretty-printed) JSON documents, as filer.meta.tail prints them."""
    dec, buf = json.JSONDecoder(), ""
    for chunk in chunks:
        buf += chunk
        while True:
            buf = buf.lstrip()
            if not buf:
                break
            try:
                obj, end = dec.raw_decode(buf)
            except ValueError:
                break  # incomplete: wait for more
            buf = buf[end:]
            if isinstance(obj, dict):
                yield obj


def new_keys(events: Iterable[dict[str, Any]], bucket: str, prefix: str) -> Iterator[str]:
    """Keys (relative to the prefix) of files created or replaced under bucket/prefix; deletions and
    directories left out, and so are in-progress multipart parts (under .uploads)."""
    root = f"/buckets/{bucket}/"
    for ev in events:
        note = ev.get("eventNotification") or {}
        entry = note.get("newEntry")
        if not entry or entry.get("isDirectory"):
            continue
        directory = note.get("newParentPath") or ev.get("directory", "")
        path = f"{directory.rstrip('/')}/{entry.get('name', '')}"
        if not path.startswith(root) or "/.uploads/" in path:
            continue
        key = path[len(root) :]
        if key.startswith(prefix):
            yield key[len(prefix) :]


@dataclass(frozen=True, slots=True)
class Distribution:
    keys: tuple[str, ...]  # objects now on every receiver
    lake_bytes: int  # bytes the lake served (the relay stage); 0 when the relay already held them
    copies: int  # receiver copies made from the relay


def deliver(relay: Path, key: str, targets: Iterable[Path]) -> int:
    """Copy relay/key into each target (temporary name, fsync, rename); how many copies were made."""
    src = relay / key
    n = 0
    for t in targets:
        dst = t / key
        if dst.is_file() and dst.stat().st_size == src.stat().st_size and lake.file_md5(dst) == lake.file_md5(src):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f"{dst.name}.{os.getpid()}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}")
        with open(src, "rb") as fi, open(tmp, "wb") as fo:
            shutil.copyfileobj(fi, fo, 8 << 20)
            fo.flush()
            os.fsync(fo.fileno())
        os.replace(tmp, dst)
        n += 1
    return n


def distribute(
    mover: Mover, name: str, bucket: str, prefix: str, keys: Iterable[str], relay: Path, targets: list[Path]
) -> Distribution:
    """Stage the keys once into the relay (verified against the lake), then deliver them to every target.

    The stage holds the relay's lock (the mover's lock of the link `name`), so followers sharing the relay and the
    state directory pull each object from the lake once between them; delivery to each follower's own targets runs
    outside it."""
    wanted = frozenset(keys)
    res = mover.stage(LinkJob(name, bucket, prefix, relay, only=wanted))
    if res.failed:
        raise engine.EngineError(f"models {name}: {len(res.failed)} object(s) failed verification in the relay")
    present = tuple(sorted(k for k in wanted if (relay / k).is_file()))
    copies = sum(deliver(relay, k, targets) for k in present)
    return Distribution(present, res.bytes_moved, copies)


def follow(
    weed: str,
    filer: str,
    bucket: str,
    prefix: str,
    on_key: Callable[[str], None],
    stop: threading.Event,
    time_ago: str = "0s",
) -> None:
    """Run `weed filer.meta.tail` on bucket/prefix and call on_key for each new object until stop is set."""
    argv = [weed, "filer.meta.tail", f"-filer={filer}", f"-pathPrefix=/buckets/{bucket}/{prefix}"]
    if time_ago != "0s":
        argv.append(f"-timeAgo={time_ago}")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    assert proc.stdout is not None

    def stopper() -> None:
        stop.wait()
        proc.terminate()

    threading.Thread(target=stopper, daemon=True).start()
    try:
        for key in new_keys(json_stream(iter(lambda: proc.stdout.readline(), "")), bucket, prefix):  # type: ignore[union-attr]
            if stop.is_set():
                break
            try:
                on_key(key)
            except Exception as exc:  # one bad object must not stop the follower
                log.error("models: %s not distributed: %s", key, exc)
    finally:
        proc.terminate()
        proc.wait()
