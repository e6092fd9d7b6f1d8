"""Choose the mover's transfer engine: rclone vs s5cmd (and one sequential stream) against a real S3.

Usage: KILN_S3_SECRET_KEY=... .venv/bin/python bench/dataflow_engine.py --endpoint http://127.0.0.1:8333 \
           --access-key kiln [--runs 3] [--small 300] [--big 4]

Needs a running SeaweedFS (or any S3) and a bucket it may write into (default `bench`). Measures, per
engine and repetition, upload and download of many small files (256 KiB) and a few large ones (48 MiB),
and a re-sync with nothing changed; prints medians, CV and the engines' ratios as JSON. Both engines run
with the same concurrency. The figures and the choice are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def _timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--bucket", default="bench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--small", type=int, default=300)
    ap.add_argument("--big", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args()
    secret = os.environ["KILN_S3_SECRET_KEY"]
    env = dict(
        os.environ,
        AWS_ACCESS_KEY_ID=a.access_key,
        AWS_SECRET_ACCESS_KEY=secret,
        AWS_REGION="us-east-1",
        RCLONE_CONFIG=os.devnull,
        RCLONE_CONFIG_LAKE_TYPE="s3",
        RCLONE_CONFIG_LAKE_PROVIDER="Other",
        RCLONE_CONFIG_LAKE_ENDPOINT=a.endpoint,
        RCLONE_CONFIG_LAKE_ACCESS_KEY_ID=a.access_key,
        RCLONE_CONFIG_LAKE_SECRET_ACCESS_KEY=secret,
    )
    rclone, s5 = str(BIN / "rclone"), [str(BIN / "s5cmd"), "--endpoint-url", a.endpoint]
    c = str(a.concurrency)
    work = Path(tempfile.mkdtemp(prefix="kiln-engine-"))
    try:
        for i in range(a.small):
            (work / "src/small").mkdir(parents=True, exist_ok=True)
            (work / f"src/small/f{i:04d}.bin").write_bytes(os.urandom(256 << 10))
        for i in range(a.big):
            (work / "src/big").mkdir(parents=True, exist_ok=True)
            (work / f"src/big/b{i}.bin").write_bytes(os.urandom(48 << 20))
        subprocess.run([*s5, "mb", f"s3://{a.bucket}"], env=env, capture_output=True)
        rows: dict[str, list[float]] = {}
        for run in range(a.runs):
            r = f"r{run}"
            cases = {
                "rclone_up_small": [rclone, "copy", "--transfers", c, f"{work}/src/small", f"lake:{a.bucket}/{r}/rc/s"],
                "s5cmd_up_small": [*s5, "--numworkers", c, "cp", f"{work}/src/small/*", f"s3://{a.bucket}/{r}/s5/s/"],
                "rclone_up_big": [
                    rclone,
                    "copy",
                    "--transfers",
                    "4",
                    "--s3-upload-concurrency",
                    "4",
                    "--s3-chunk-size",
                    "8Mi",
                    f"{work}/src/big",
                    f"lake:{a.bucket}/{r}/rc/b",
                ],
                "s5cmd_up_big": [
                    *s5,
                    "--numworkers",
                    "4",
                    "cp",
                    "-c",
                    "4",
                    "-p",
                    "8",
                    f"{work}/src/big/*",
                    f"s3://{a.bucket}/{r}/s5/b/",
                ],
                "rclone_down_small": [rclone, "copy", "--transfers", c, f"lake:{a.bucket}/{r}/rc/s", f"{work}/{r}/rcs"],
                "s5cmd_down_small": [*s5, "--numworkers", c, "cp", f"s3://{a.bucket}/{r}/s5/s/*", f"{work}/{r}/s5s/"],
                "single_stream_down_small": [
                    rclone,
                    "copy",
                    "--transfers",
                    "1",
                    "--checkers",
                    "1",
                    f"lake:{a.bucket}/{r}/rc/s",
                    f"{work}/{r}/one",
                ],
                "rclone_down_big": [rclone, "copy", "--transfers", "4", f"lake:{a.bucket}/{r}/rc/b", f"{work}/{r}/rcb"],
                "s5cmd_down_big": [
                    *s5,
                    "--numworkers",
                    "4",
                    "cp",
                    "-c",
                    "4",
                    "-p",
                    "8",
                    f"s3://{a.bucket}/{r}/s5/b/*",
                    f"{work}/{r}/s5b/",
                ],
                "rclone_resync_small": [
                    rclone,
                    "copy",
                    "--transfers",
                    c,
                    f"{work}/src/small",
                    f"lake:{a.bucket}/{r}/rc/s",
                ],
                "s5cmd_resync_small": [
                    *s5,
                    "--numworkers",
                    c,
                    "sync",
                    f"{work}/src/small/*",
                    f"s3://{a.bucket}/{r}/s5/s/",
                ],
            }
            for name, argv in cases.items():
                rows.setdefault(name, []).append(_timed(argv, env))
            shutil.rmtree(work / r, ignore_errors=True)
        small_MB, big_MB = a.small * 0.262144, a.big * 50.331648
        out = {}
        for name, ts in rows.items():
            med = statistics.median(ts)
            mb = big_MB if name.endswith("_big") else small_MB
            out[name] = {
                "median_s": round(med, 3),
                "cv": round(statistics.pstdev(ts) / statistics.mean(ts), 3),
                "MBps": round(mb / med, 1) if "resync" not in name else None,
                "runs": [round(t, 3) for t in ts],
            }
        print(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
