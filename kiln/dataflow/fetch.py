"""Large downloads that resume where a killed pass stopped, instead of at byte 0.

rclone restarts an interrupted download from the beginning. For an object of at least `Tuning.ranged_min_MiB`
the mover fetches it itself: ranged GETs of one part each (the plan's part size), a few at a time, written at
their offsets into `<staged path>.kiln-partial`; after each part its number is appended to a journal beside it
(`….kiln-partial.parts`, whose first line names the object's size, ETag and the part size). A pass that finds a
journal for the same object fetches only the parts it does not list. The file is renamed to its staged path when
every part is written; the mover then verifies it by checksum like any download, and a file that does not verify
is deleted, journal and all.
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kiln.dataflow.keys import PARTIAL_SUFFIX


def _journal(path: Path, header: dict[str, Any]) -> set[int]:
    """The parts an earlier pass wrote for this very object (size, ETag, part size), else none."""
    try:
        first, *rest = path.read_text(encoding="utf-8").splitlines()
        if json.loads(first) == header:
            return {int(line) for line in rest if line.strip().isdigit()}
    except (OSError, ValueError):
        pass
    return set()


def partial_paths(staged: Path) -> tuple[Path, Path]:
    """(the partial data file, its journal) of a staged path."""
    data = staged.with_name(staged.name + PARTIAL_SUFFIX)
    return data, data.with_name(data.name + ".parts")


def fetch(s3: Any, bucket: str, key: str, size: int, etag: str, staged: Path, part: int, workers: int) -> int:
    """Download bucket/key (size bytes, ETag etag) to `staged`, resuming from the journal; the bytes fetched now."""
    data, journal = partial_paths(staged)
    header = {"size": size, "etag": etag, "part": part}
    done = _journal(journal, header) if data.exists() else set()
    if not done:
        data.unlink(missing_ok=True)
        journal.parent.mkdir(parents=True, exist_ok=True)
        journal.write_text(json.dumps(header) + "\n", encoding="utf-8")
    todo = [i for i in range(-(-size // part)) if i not in done]
    lock = threading.Lock()
    fd = os.open(data, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.ftruncate(fd, size)
        with open(journal, "a", encoding="utf-8") as jf:

            def one(i: int) -> int:
                first, last = i * part, min(size, (i + 1) * part) - 1
                body = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{last}", IfMatch=etag)["Body"]
                chunk = body.read()
                if len(chunk) != last - first + 1:
                    raise OSError(f"ranged GET of {key} bytes {first}-{last} returned {len(chunk)} bytes")
                os.pwrite(fd, chunk, first)
                with lock:
                    jf.write(f"{i}\n")
                    jf.flush()
                return len(chunk)

            with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
                fetched = sum(pool.map(one, todo))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(data, staged)
    journal.unlink(missing_ok=True)
    return fetched
