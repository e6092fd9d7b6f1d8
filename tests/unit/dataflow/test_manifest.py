"""The SQLite manifest (kiln/dataflow/manifest.py): incremental rows, lookups in batches, the keys a pass did not
see, and the JSON manifests of earlier versions read in once."""

from __future__ import annotations

import json
from pathlib import Path

from kiln.dataflow.manifest import Entry, Manifest


def _json(path: Path, entries: dict[str, tuple[int, str, int]]) -> None:
    path.write_text(json.dumps({"schema": "kiln.dataflow.manifest/v1", "entries": {
        k: {"size": s, "etag": e, "mtime_ns": m} for k, (s, e, m) in entries.items()}}))


def test_rows_are_written_and_read_in_batches(tmp_path: Path) -> None:
    with Manifest(tmp_path, "corpus.link") as m:
        m.put_many((f"f{i:05d}", Entry(i, f"e{i}", i)) for i in range(2500))
        assert len(m) == 2500
        got = m.get_many([f"f{i:05d}" for i in range(0, 2500, 2)] + ["nope"])
        assert len(got) == 1250 and got["f00004"] == Entry(4, "e4", 4)
        m.delete_many(["f00000", "f00001"])
    with Manifest(tmp_path, "corpus.link") as m:  # committed: a new connection sees it
        assert len(m) == 2498 and m.get("f00002") == Entry(2, "e2", 2) and m.get("f00000") is None
        m.begin_seen()
        m.add_seen(f"f{i:05d}" for i in range(2, 2500) if i != 7)
        assert m.unseen() == ["f00007"]


def test_a_json_manifest_is_read_in_once_and_the_newer_entry_wins(tmp_path: Path) -> None:
    imp, exp = tmp_path / "corpus.import.manifest.json", tmp_path / "corpus.export.manifest.json"
    _json(imp, {"a": (1, "ea", 10), "b": (2, "eb", 20)})
    _json(exp, {"b": (3, "eb2", 30), "c": (4, "ec", 40)})
    with Manifest(tmp_path, "corpus.link", legacy=[imp, exp]) as m:
        assert m.get_many(["a", "b", "c"]) == {"a": Entry(1, "ea", 10), "b": Entry(3, "eb2", 30),
                                               "c": Entry(4, "ec", 40)}
    assert not imp.exists() and (tmp_path / "corpus.import.manifest.json.migrated").exists()
    with Manifest(tmp_path, "corpus.link", legacy=[imp, exp]) as m:  # nothing to read in a second time
        assert len(m) == 3
