"""Benchmark: the mover's manifest at a million files, one pass's update of 1,000 changed files.

    .venv/bin/python bench/dataflow_manifest.py [--files 1000000] [--changed 1000] [--runs 3] [--out FILE]

Two manifests of the same `--files` entries (keys like a sharded dataset's, 32-hex ETags, nanosecond mtimes)
are generated first, each in a child process of its own. Then each measurement runs in a fresh child: it opens
the manifest, replaces `--changed` entries (new sizes, ETags and mtimes, as a pass records files it verified)
and makes them durable, and reports the seconds from open to durable; its peak RSS is that child's ru_maxrss
(os.wait4), interpreter included. The variants:
- baseline: the JSON manifest kiln kept before (one file per link and direction, read whole into a dict and
  rewritten whole, fsync and rename, after any change), reproduced here as `JsonManifest`;
- sqlite: kiln.dataflow.manifest.Manifest (one SQLite database, the changed rows replaced in one transaction).
Also measured, for the record: looking the changed keys up (get_many), and the first open of the JSON manifest
through kiln's migration into SQLite (once per link). Prints one JSON object with the medians, the peaks and the
ratios baseline ÷ sqlite. Targets (the issue's scale requirement): sqlite < 1 s and < 200 MB at 1,000,000 files.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kiln.dataflow.manifest import Entry, Manifest  # noqa: E402 - after the checkout is on the path


class JsonManifest:
    """The manifest before SQLite (kiln/dataflow/manifest.py up to this change): relative path → Entry as JSON,
    read whole, replaced atomically (write to a temporary name, fsync, rename)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, Entry] = {}
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            self.entries = {k: Entry(**v) for k, v in data.get("entries", {}).items()}

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        entries = {k: {"size": e.size, "etag": e.etag, "mtime_ns": e.mtime_ns} for k, e in self.entries.items()}
        data = {"schema": "kiln.dataflow.manifest/v1", "entries": entries}
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)


def key(i: int) -> str:
    return f"shard{i // 1000:04d}/sample{i:07d}.jpg"


def entry(i: int, gen: int) -> Entry:
    return Entry(100_000 + i % 50_000, f"{(i * 2654435761 + gen) % (1 << 128):032x}", 1_700_000_000_000_000_000 + i)


def changed(files: int, n: int) -> list[int]:
    return sorted(random.Random(7).sample(range(files), n))


def generate(variant: str, d: Path, files: int) -> None:
    if variant == "baseline":
        m = JsonManifest(d / "corpus.import.manifest.json")
        m.entries = {key(i): entry(i, 0) for i in range(files)}
        m.save()
        return
    with Manifest(d, "corpus.link") as db:
        for start in range(0, files, 100_000):
            db.put_many((key(i), entry(i, 0)) for i in range(start, min(files, start + 100_000)))


def update(variant: str, d: Path, files: int, n: int) -> dict[str, float]:
    """One pass's record of n changed files, from open to durable; and the lookup of those keys."""
    idx = changed(files, n)
    t0 = time.perf_counter()
    if variant == "baseline":
        m = JsonManifest(d / "corpus.import.manifest.json")
        t1 = time.perf_counter()
        found = sum(1 for i in idx if key(i) in m.entries)
        t2 = time.perf_counter()
        for i in idx:
            m.entries[key(i)] = entry(i, 1)
        m.save()
    else:
        legacy = [d / "corpus.import.manifest.json"] if variant == "migrate" else []
        with Manifest(d, "corpus.link", legacy=legacy) as db:
            t1 = time.perf_counter()
            found = len(db.get_many(key(i) for i in idx))
            t2 = time.perf_counter()
            db.put_many((key(i), entry(i, 1)) for i in idx)
    t3 = time.perf_counter()
    assert found == n
    return {"update_s": t3 - t0 - (t2 - t1), "open_s": t1 - t0, "lookup_s": t2 - t1}


def child(args: list[str]) -> tuple[dict[str, Any], float]:
    """Run this script as a child; (what it printed, its peak RSS in MB)."""
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _pid, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"child {args} failed")
    return (json.loads(out) if out.strip() else {}), usage.ru_maxrss / 1024


def measure(variant: str, d: Path, files: int, n: int, runs: int) -> dict[str, float]:
    walls, opens, lookups, peaks = [], [], [], []
    for _ in range(runs):
        res, peak = child(["--child", variant, "--dir", str(d), "--files", str(files), "--changed", str(n)])
        walls.append(res["update_s"])
        opens.append(res["open_s"])
        lookups.append(res["lookup_s"])
        peaks.append(peak)
    return {"update_s": statistics.median(walls), "open_s": statistics.median(opens),
            "lookup_s": statistics.median(lookups), "peak_MB": max(peaks)}


def run(files: int, n: int, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("KILN_BENCH_TMP")) as tmp:
        base, lite, mig = Path(tmp) / "json", Path(tmp) / "sqlite", Path(tmp) / "migrate"
        for d in (base, lite, mig):
            d.mkdir()
        child(["--generate", "baseline", "--dir", str(base), "--files", str(files)])
        child(["--generate", "sqlite", "--dir", str(lite), "--files", str(files)])
        json_bytes = (base / "corpus.import.manifest.json").stat().st_size
        db_bytes = (lite / "corpus.link.manifest.sqlite").stat().st_size
        baseline = measure("baseline", base, files, n, runs)
        sqlite = measure("sqlite", lite, files, n, runs)
        child(["--generate", "baseline", "--dir", str(mig), "--files", str(files)])
        migrate = measure("migrate", mig, files, n, 1)  # once: the JSON is renamed *.migrated after it
    return {
        "files": files, "changed": n, "runs": runs, "json_MB": round(json_bytes / 1e6, 1),
        "sqlite_MB": round(db_bytes / 1e6, 1), "baseline": baseline, "sqlite": sqlite, "first_open_migrating": migrate,
        "ratio_time": baseline["update_s"] / sqlite["update_s"], "ratio_rss": baseline["peak_MB"] / sqlite["peak_MB"],
        "targets_met": sqlite["update_s"] < 1.0 and sqlite["peak_MB"] < 200,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--changed", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--generate", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.generate:
        generate(a.generate, Path(a.dir), a.files)
        return 0
    if a.child:
        print(json.dumps(update(a.child, Path(a.dir), a.files, a.changed)))
        return 0
    res = run(a.files, a.changed, a.runs)
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0 if res["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
