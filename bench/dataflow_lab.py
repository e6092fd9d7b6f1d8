"""The dataflow ratios measured on one host against a running S3 (a local SeaweedFS), with CV.

Usage: KILN_S3_SECRET_KEY=... .venv/bin/python bench/dataflow_lab.py --endpoint http://127.0.0.1:8333 \
           --access-key kiln [--runs 3] [--files 200] [--file-KiB 256] [--shard-MiB 64] [--shards 2]

Per repetition, on the same data: stage-in of many files by the mover (planned concurrency) vs the naive
way issue 14 names, one sequential boto3 stream (GET each object, write it), and vs the mover limited to one
rclone transfer; a re-sync with nothing changed (bytes moved and its time as a share of the stage); a
checkpoint: the time a job is blocked with asynchronous write-back (write to the fast tier) vs synchronous
(write + upload), and the restore of the newest from the fast tier vs from the lake. Prints JSON with
medians and CV. The fast tier here is a plain directory (no Lustre kernel).

Fairness: the trainer stand-in's shards are generated before the clock starts (a trainer holds its state in
memory; generating random bytes is not checkpoint I/O), and the checkpoint's pages are dropped from the page
cache (fsync, then POSIX_FADV_DONTNEED) before the fast-tier restore is timed, so it reads the disk.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kiln.dataflow import engine
from kiln.dataflow.lake import Credentials, client
from kiln.dataflow.mover import LinkJob, Mover, export_checkpoints


def _stats(xs: list[float]) -> dict[str, float]:
    mean = statistics.mean(xs)
    return {"median": round(statistics.median(xs), 4), "cv": round(statistics.pstdev(xs) / mean, 3) if mean else 0.0}


def _read_all(root: Path) -> float:
    t0 = time.perf_counter()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            with open(p, "rb") as f:
                while f.read(8 << 20):
                    pass
    return time.perf_counter() - t0


def _drop_cache(root: Path) -> None:
    """Evict the files' clean pages from the page cache (they were fsynced), so a read goes to the disk."""
    for p in root.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _naive_get(s3: object, bucket: str, prefix: str, dest: Path) -> float:
    """One sequential stream: list, then GET each object and write it (what a hand-run boto3 loop does)."""
    t0 = time.perf_counter()
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)  # type: ignore[attr-defined]
    for page in pages:
        for o in page.get("Contents", []):
            path = dest / o["Key"][len(prefix):]
            path.parent.mkdir(parents=True, exist_ok=True)
            body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"]  # type: ignore[attr-defined]
            with open(path, "wb") as f:
                shutil.copyfileobj(body, f, 8 << 20)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--bucket", default="bench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--file-KiB", type=int, default=256)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--shard-MiB", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args()
    creds = Credentials(a.endpoint, a.access_key, os.environ["KILN_S3_SECRET_KEY"])
    s3 = client(creds)
    with contextlib.suppress(Exception):  # the bucket exists already
        s3.create_bucket(Bucket=a.bucket)
    work = Path(tempfile.mkdtemp(prefix="kiln-dataflow-bench-"))
    rows: dict[str, list[float]] = {}
    try:
        for i in range(a.files):
            s3.put_object(Bucket=a.bucket, Key=f"ds/f{i:05d}.bin", Body=os.urandom(a.file_KiB << 10))
        for run in range(a.runs):
            w = work / f"r{run}"
            mover = Mover(creds, w / "state", engine.Tuning(a.concurrency, 8))
            one = Mover(creds, w / "state1", engine.Tuning(1, 8))
            r = mover.stage(LinkJob("ds", a.bucket, "ds/", w / "fast" / "ds"))
            n = one.stage(LinkJob("ds1", a.bucket, "ds/", w / "fast" / "ds1"))
            naive_s = _naive_get(s3, a.bucket, "ds/", w / "fast" / "naive")
            again = mover.stage(LinkJob("ds", a.bucket, "ds/", w / "fast" / "ds"))
            rows.setdefault("stage_s", []).append(r.seconds)
            rows.setdefault("naive_boto3_s", []).append(naive_s)
            rows.setdefault("stage_speedup", []).append(naive_s / r.seconds)
            rows.setdefault("single_transfer_mover_s", []).append(n.seconds)
            rows.setdefault("speedup_vs_single_transfer_mover", []).append(n.seconds / r.seconds)
            rows.setdefault("resync_bytes", []).append(float(again.bytes_moved))
            rows.setdefault("resync_share", []).append(again.seconds / r.seconds)
            # Checkpoint: a stand-in trainer writes shards and the commit marker to the fast tier.
            ck = w / "ckpt" / "step1"
            ck.mkdir(parents=True)
            shards = [os.urandom(a.shard_MiB << 20) for _ in range(a.shards)]  # the trainer's state, in memory
            t0 = time.perf_counter()
            for s, data in enumerate(shards):
                with open(ck / f"__{s}_0.distcp", "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
            del shards
            (ck / ".metadata").write_bytes(b"meta")
            write_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            export_checkpoints(mover, "ck", w / "ckpt", a.bucket, f"ck{run}/", ".metadata", keep=1, release=False)
            upload_s = time.perf_counter() - t1
            rows.setdefault("checkpoint_blocked_ratio", []).append((write_s + upload_s) / write_s)
            rows.setdefault("checkpoint_export_s", []).append(upload_s)
            _drop_cache(ck)
            fast_s = _read_all(ck)
            lake_dir = w / "restore"
            t2 = time.perf_counter()
            Mover(creds, w / "state2", engine.Tuning(a.concurrency, 8)).stage(
                LinkJob("restore", a.bucket, f"ck{run}/", lake_dir)
            )
            lake_s = time.perf_counter() - t2
            rows.setdefault("restore_ratio", []).append(lake_s / fast_s)
            shutil.rmtree(w)
        print(json.dumps({k: {**_stats(v), "runs": [round(x, 4) for x in v]} for k, v in rows.items()}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
