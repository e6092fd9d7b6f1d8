"""The dataflow ratios measured on one host against a running S3 (a local SeaweedFS), with CV over repetitions.

Usage: KILN_S3_SECRET_KEY=... .venv/bin/python bench/dataflow_lab.py --endpoint http://127.0.0.1:8333 \
           --access-key kiln [--runs 3] [--files 1000] [--file-KiB 128] [--shard-MiB 64] [--shards 2]

Each repetition is one pass of kiln.dataflow.measure (the same pass the `dataflow.*` acceptance checks run on
a mover host; its docstring says what each figure is and how it is measured fairly). Prints JSON with the
median, CV and every run of each figure. The fast tier here is a plain directory (no Lustre kernel).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from kiln.dataflow import engine
from kiln.dataflow.lake import Credentials, client
from kiln.dataflow.measure import measure


def _stats(xs: list[float]) -> dict[str, float]:
    mean = statistics.mean(xs)
    return {"median": round(statistics.median(xs), 4), "cv": round(statistics.pstdev(xs) / mean, 3) if mean else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--bucket", default="bench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--file-KiB", type=int, default=128)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--shard-MiB", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args()
    creds = Credentials(a.endpoint, a.access_key, os.environ["KILN_S3_SECRET_KEY"])
    with contextlib.suppress(Exception):  # the bucket exists already
        client(creds).create_bucket(Bucket=a.bucket)
    rows: dict[str, list[float]] = {}
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory(prefix="kiln-dataflow-bench-") as work:
            figures = measure(creds, a.bucket, Path(work) / "w", engine.Tuning(a.concurrency, 8), a.files,
                              a.file_KiB, a.shards, a.shard_MiB)
        for k, v in figures.items():
            rows.setdefault(k, []).append(float(v))
    print(json.dumps({k: {**_stats(v), "runs": [round(x, 4) for x in v]} for k, v in rows.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
