"""bench/dataflow_manifest.py: both manifests hold the same entries and one update records the same rows (small,
in process; the benchmark itself runs each variant in a child of its own)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


@pytest.fixture()
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("dataflow_manifest")


def test_the_baseline_and_sqlite_record_the_same_update(bench: ModuleType, tmp_path: Path) -> None:
    from kiln.dataflow.manifest import Manifest

    for variant in ("baseline", "sqlite"):
        (tmp_path / variant).mkdir()
        bench.generate(variant, tmp_path / variant, 3000)
        figures = bench.update(variant, tmp_path / variant, 3000, 100)
        assert set(figures) == {"update_s", "open_s", "lookup_s"} and figures["update_s"] > 0
    entries = json.loads((tmp_path / "baseline" / "corpus.import.manifest.json").read_text())["entries"]
    with Manifest(tmp_path / "sqlite", "corpus.link") as db:
        assert len(db) == len(entries) == 3000
        for i in bench.changed(3000, 100)[:5]:
            e = db.get(bench.key(i))
            assert e == bench.entry(i, 1) and entries[bench.key(i)]["etag"] == e.etag
