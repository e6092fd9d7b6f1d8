"""The manifest: what a link last moved and verified, so a re-run moves only what changed."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Entry:
    """One verified file: its lake identity (size + ETag) and its local identity (size + mtime)."""

    size: int
    etag: str
    mtime_ns: int  # the local file's st_mtime_ns when it was verified


class Manifest:
    """relative path → Entry, stored as JSON and replaced atomically (write to a temporary name, rename)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, Entry] = {}
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            self.entries = {k: Entry(**v) for k, v in data.get("entries", {}).items()}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        entries = {k: {"size": e.size, "etag": e.etag, "mtime_ns": e.mtime_ns} for k, e in self.entries.items()}
        data = {"schema": "kiln.dataflow.manifest/v1", "entries": entries}
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)
