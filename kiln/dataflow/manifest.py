"""The manifest: what a link last moved and verified, so a pass moves only what changed.

One SQLite database per link (stdlib sqlite3), updated row by row as files verify: a pass that changes 1000 of a
million entries writes 1000 rows, not the whole manifest, and reads only the rows it asks for
(docs/benchmarks.md, "The mover's manifest"). Journal WAL with synchronous NORMAL: a committed row survives the
mover being killed. The mover holds the link's lock (kiln/dataflow/lock.py) while the database is open, and opens
it in EXCLUSIVE locking mode, so SQLite never needs the shared-memory index that WAL cannot keep across hosts
(SQLite's "Write-Ahead Logging", section 8): the state directory may be on Lustre, shared by several hosts.

An entry records the state both sides had when the mover last verified them identical: the object's size and
ETag, and the local file's mtime. Import and export of one link share it, so a file the import brought is not
exported back, and an object the export wrote is not imported again.

A link's JSON manifest of earlier versions (`<name>.<direction>.manifest.json`) is read into the database the
first time it is opened, then renamed `*.migrated`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: Keys per SELECT … IN (…): under SQLite's default limit of 32766 host parameters, and large enough that a
#: million lookups take a thousand queries.
BATCH = 900

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (key TEXT PRIMARY KEY, size INTEGER NOT NULL, etag TEXT NOT NULL,
                                  mtime_ns INTEGER NOT NULL) WITHOUT ROWID;
"""


@dataclass(frozen=True, slots=True)
class Entry:
    """One verified file: its lake identity (size + ETag) and its local identity (size + mtime)."""

    size: int
    etag: str
    mtime_ns: int  # the local file's st_mtime_ns when it was verified


def chunks(items: Iterable[T], n: int = BATCH) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


class Manifest:
    """relative path → Entry in `<state_dir>/<name>.manifest.sqlite`; use as a context manager (closes it)."""

    def __init__(self, state_dir: Path, name: str, legacy: Sequence[Path] = ()) -> None:
        """`legacy`: JSON manifests of earlier versions to read into this one (where they exist)."""
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / f"{name}.manifest.sqlite"
        self.db = sqlite3.connect(self.path, isolation_level=None)
        for pragma in ("locking_mode=EXCLUSIVE", "journal_mode=WAL", "synchronous=NORMAL"):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.executescript(_SCHEMA)
        for path in legacy:
            self._migrate(path)

    def __enter__(self) -> Manifest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def _migrate(self, json_path: Path) -> None:
        """Read an earlier version's JSON manifest in (where both directions hold a key, the newer mtime wins)."""
        if not json_path.exists():
            return
        entries = json.loads(json_path.read_text(encoding="utf-8")).get("entries", {})
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT INTO files VALUES (?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET size = excluded.size, "
                "etag = excluded.etag, mtime_ns = excluded.mtime_ns WHERE excluded.mtime_ns > files.mtime_ns",
                ((k, v["size"], v["etag"], v["mtime_ns"]) for k, v in entries.items()),
            )
        json_path.rename(json_path.with_name(json_path.name + ".migrated"))

    def __len__(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM files").fetchone()[0])

    def get(self, key: str) -> Entry | None:
        row = self.db.execute("SELECT size, etag, mtime_ns FROM files WHERE key = ?", (key,)).fetchone()
        return None if row is None else Entry(*row)

    def get_many(self, keys: Iterable[str]) -> dict[str, Entry]:
        """The entries of those keys the manifest holds, a batch of keys per query."""
        out: dict[str, Entry] = {}
        for batch in chunks(keys):
            marks = ",".join("?" * len(batch))
            for key, size, etag, mtime_ns in self.db.execute(
                f"SELECT key, size, etag, mtime_ns FROM files WHERE key IN ({marks})", batch
            ):
                out[key] = Entry(size, etag, mtime_ns)
        return out

    def put_many(self, entries: Iterable[tuple[str, Entry]]) -> None:
        """Record verified files, in one transaction."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)",
                ((k, e.size, e.etag, e.mtime_ns) for k, e in entries),
            )

    def delete_many(self, keys: Iterable[str]) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("DELETE FROM files WHERE key = ?", ((k,) for k in keys))

    def keys(self) -> Iterator[str]:
        """Every recorded key (streamed from the database, never all in memory)."""
        for (key,) in self.db.execute("SELECT key FROM files ORDER BY key"):
            yield key

    def begin_seen(self) -> None:
        """Start noting the keys a pass sees (a temporary table on disk, not a Python set)."""
        self.db.execute("CREATE TEMP TABLE IF NOT EXISTS seen (key TEXT PRIMARY KEY) WITHOUT ROWID")
        self.db.execute("DELETE FROM seen")

    def add_seen(self, keys: Iterable[str]) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR IGNORE INTO seen VALUES (?)", ((k,) for k in keys))

    def unseen(self) -> list[str]:
        """The recorded keys the pass did not see since begin_seen."""
        rows = self.db.execute("SELECT key FROM files WHERE key NOT IN (SELECT key FROM seen) ORDER BY key")
        return [k for (k,) in rows]
