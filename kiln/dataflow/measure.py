"""One measurement pass of the data-flow ratios on the host it runs on, against a real S3.

Run by the `dataflow.*` acceptance checks on a mover host (kiln/verify/checks/dataflow.py) and by hand:

  KILN_S3_ACCESS_KEY=... KILN_S3_SECRET_KEY=... python -m kiln.dataflow.measure --endpoint URL --bucket B \
      --work DIR [--concurrency N] [--part-MiB P] [--files 1000] [--file-KiB 128] [--shards 2] [--shard-MiB 64]

Prints one JSON object. Every figure is measured in this pass on the same data (the bucket prefix
`kiln-measure/` is emptied first and afterwards):
- stage_in_speedup: a naive sequential boto3 stream (list, GET each object, write it) ÷ the mover's stage of a
  dataset of many files (default 1000 × 128 KiB, the size of an ImageNet JPEG: per-file costs, not bandwidth,
  decide such a stage, and 1000 files keep the fixed per-run costs a few per cent of it);
- stage_in_efficiency: the stage's rate ÷ min(fast-tier write rate of the same files, S3 GET rate of the same
  objects with the mover's engine and tuning into memory, nothing written), all measured in this pass;
- resync_bytes, resync_share: a re-stage with nothing changed: bytes moved, and its time ÷ the full stage;
- checkpoint_blocked_ratio: (fast-tier write + upload) ÷ fast-tier write of a sharded checkpoint with its
  commit marker (the shards are generated before the clock starts: a trainer holds its state in memory);
- checkpoint_restore_ratio: restore of that checkpoint from the lake ÷ from the fast tier (its pages dropped
  from the page cache first, so the read goes to the disk);
- resume_lost_or_partial: an export killed mid-upload and run again: files missing or not checksum-identical
  in the lake, plus objects that were visible in the lake before the restart without being whole;
- repair_failures: a staged link of four objects gets two faults on the fast tier: a bad download (the file
  gone, a same-size copy with other bytes left in the mover's staging directory with the object's mtime, which is
  what a download damaged in transit leaves) and a corrupted copy (bytes overwritten in place); the files with
  wrong bytes under their name after the next pass plus those still not whole after the one after it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kiln.dataflow import engine, lake
from kiln.dataflow.checkpoints import Root, export_checkpoints
from kiln.dataflow.keys import STAGING
from kiln.dataflow.lake import Credentials
from kiln.dataflow.mover import LinkJob, Mover

PREFIX = "kiln-measure/"

_EXPORT = """
import os, sys
from pathlib import Path
from kiln.dataflow import engine
from kiln.dataflow.lake import Credentials
from kiln.dataflow.mover import LinkJob, Mover
endpoint, bucket, prefix, state, local, conc, part = sys.argv[1:8]
creds = Credentials(endpoint, os.environ["KILN_S3_ACCESS_KEY"], os.environ["KILN_S3_SECRET_KEY"])
m = Mover(creds, Path(state), engine.Tuning(int(conc), int(part)))
r = m.export(LinkJob("resume", bucket, prefix, Path(local)))
print(len(r.failed))
"""


def _drop_cache(root: Path) -> None:
    """Evict the files' pages from the page cache (after fsync), so the next read goes to the disk."""
    for p in root.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _read_all(root: Path) -> float:
    t0 = time.perf_counter()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            with open(p, "rb") as f:
                while f.read(8 << 20):
                    pass
    return time.perf_counter() - t0


def _naive_get(s3: Any, bucket: str, prefix: str, dest: Path) -> float:
    """One sequential stream: list, then GET each object and write it (a hand-run boto3 loop)."""
    t0 = time.perf_counter()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            path = dest / o["Key"][len(prefix) :]
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                shutil.copyfileobj(s3.get_object(Bucket=bucket, Key=o["Key"])["Body"], f, 8 << 20)
    return time.perf_counter() - t0


def _empty(s3: Any, bucket: str, prefix: str) -> None:
    keys = [{"Key": prefix + o.key} for o in lake.list_prefix(s3, bucket, prefix)]
    for i in range(0, len(keys), engine.LIST_PAGE):  # DeleteObjects takes at most 1000 keys too
        s3.delete_objects(Bucket=bucket, Delete={"Objects": keys[i : i + engine.LIST_PAGE], "Quiet": True})


def _write_dataset(root: Path, files: int, file_KiB: int) -> float:
    """Write the dataset's files (generated in memory first) to the fast tier; the seconds the writes took.

    They are written as the stage writes them (rclone's local backend: write, close, no fsync), so this is
    the fast tier's write rate for this dataset, through the same page cache."""
    data = [os.urandom(file_KiB << 10) for _ in range(files)]
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    for i, b in enumerate(data):
        with open(root / f"f{i:05d}.bin", "wb") as f:
            f.write(b)
    return time.perf_counter() - t0


def _stage_figures(
    creds: Credentials, s3: Any, bucket: str, work: Path, tuning: engine.Tuning, files: int, file_KiB: int
) -> dict[str, Any]:
    """Stage-in and re-sync against the naive stream and against min(fast-tier write, S3 GET), one dataset."""
    src = work / "src"
    write_s = _write_dataset(src, files, file_KiB)
    names = sorted(p.name for p in src.iterdir())
    # The prefix is empty: listing it (one request) is cheaper than a HEAD per file.
    engine.copy(creds, str(src), engine.remote(bucket, PREFIX + "ds/"), names, tuning, lake_objects=1)
    shutil.rmtree(src)
    naive_s = _naive_get(s3, bucket, PREFIX + "ds/", work / "naive")
    shutil.rmtree(work / "naive")
    # The lake's GET rate for this dataset with the mover's engine and tuning, data kept in memory, not written.
    t0 = time.perf_counter()
    engine.copy(creds, engine.remote(bucket, PREFIX + "ds/"), ":memory:", names, tuning, lake_objects=files)
    get_s = time.perf_counter() - t0
    mover = Mover(creds, work / "state", tuning)
    r = mover.stage(LinkJob("ds", bucket, PREFIX + "ds/", work / "fast" / "ds"))
    again = mover.stage(LinkJob("ds", bucket, PREFIX + "ds/", work / "fast" / "ds"))
    shutil.rmtree(work / "fast")
    return dict(
        stage_s=r.seconds, naive_s=naive_s, stage_in_speedup=naive_s / r.seconds, stage_bytes=r.bytes_moved,
        stage_files=r.files_moved, stage_failed=len(r.failed), fast_write_s=write_s, s3_get_s=get_s,
        # stage rate ÷ min(write rate, GET rate): the same bytes, so max(write_s, get_s) ÷ stage_s
        stage_in_efficiency=max(write_s, get_s) / r.seconds,
        resync_bytes=again.bytes_moved, resync_s=again.seconds, resync_share=again.seconds / r.seconds,
        **{f"stage_{k}_s": v for k, v in r.phases}, **{f"resync_{k}_s": v for k, v in again.phases},
    )


def _write_shards(root: Path, shards: list[bytes]) -> None:
    root.mkdir(parents=True)
    for i, data in enumerate(shards):
        with open(root / f"__{i}_0.distcp", "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def _resume(
    creds: Credentials, s3: Any, bucket: str, work: Path, tuning: engine.Tuning, big_MiB: int
) -> dict[str, int]:
    """Kill an export mid-upload, look at what the lake shows, run it again, count what is lost or was partial."""
    local = work / "resume"
    local.mkdir()
    for i in range(4):
        (local / f"part{i}.bin").write_bytes(os.urandom(big_MiB << 20))
    prefix = PREFIX + "resume/"
    env = dict(os.environ, KILN_S3_ACCESS_KEY=creds.access_key_id, KILN_S3_SECRET_KEY=creds.secret_key)
    argv = [sys.executable, "-c", _EXPORT, creds.endpoint, bucket, prefix, str(work / "resume-state"), str(local),
            str(tuning.concurrency), str(tuning.part_size_MiB)]
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    killed = False
    while time.monotonic() < deadline and proc.poll() is None:
        # Kill once the upload has started (rclone runs) and before it can have finished every file.
        if any(p.name == "rclone" or p.name.startswith("rclone") for p in _children(proc.pid)):
            time.sleep(0.3)
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.05)
    proc.wait()
    visible = {o.key: o for o in lake.list_prefix(s3, bucket, prefix)}
    partial = sum(
        1 for k, o in visible.items() if not lake.verify(s3, bucket, prefix + k, local / k, o.etag)[0]
    )
    again = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=600)
    after = {o.key: o for o in lake.list_prefix(s3, bucket, prefix)}
    lost = sum(
        1
        for p in local.iterdir()
        if p.name not in after or not lake.verify(s3, bucket, prefix + p.name, p, after[p.name].etag)[0]
    )
    return {"killed_mid_upload": int(killed and len(visible) < 4), "visible_before_restart": len(visible),
            "partial": partial, "lost": lost, "restart_rc": again.returncode}


def _repair(creds: Credentials, s3: Any, bucket: str, work: Path, tuning: engine.Tuning) -> dict[str, int]:
    """Damage two of four staged files on the fast tier as a bad download and as corruption; two passes repair."""
    prefix, local = PREFIX + "repair/", work / "repair"
    data = {f"r{i}.bin": os.urandom(256 << 10) for i in range(4)}
    for k, v in data.items():
        s3.put_object(Bucket=bucket, Key=prefix + k, Body=v)
    mover = Mover(creds, work / "state-repair", tuning)
    job = LinkJob("repair", bucket, prefix, local)
    mover.stage(job)
    st = (local / "r0.bin").stat()
    (local / "r0.bin").unlink()
    staged = local / STAGING / "r0.bin"
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_bytes(bytes(b ^ 0xFF for b in data["r0.bin"]))
    os.utime(staged, ns=(st.st_atime_ns, st.st_mtime_ns))
    with open(local / "r1.bin", "r+b") as f:
        f.write(b"\0" * 4096)

    def wrong() -> int:
        return sum(1 for k, v in data.items() if (local / k).exists() and (local / k).read_bytes() != v)

    first = mover.stage(job)
    visible = wrong()
    mover.stage(job)
    missing = sum(1 for k in data if not (local / k).exists())
    return {"bad_visible": visible, "unrepaired": wrong() + missing, "caught": int("r0.bin" in first.failed),
            "restored": len(first.repaired)}


def _children(pid: int) -> list[Path]:
    """The command names of the processes in pid's session (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.getsid(int(d.name)) == pid:
                out.append(Path((d / "comm").read_text().strip()))
        except (OSError, ValueError):
            continue
    return out


def measure(
    creds: Credentials,
    bucket: str,
    work: Path,
    tuning: engine.Tuning,
    files: int = 1000,
    file_KiB: int = 128,
    shards: int = 2,
    shard_MiB: int = 64,
) -> dict[str, Any]:
    """One pass of every figure (module docstring); `work` is a directory on the fast tier, emptied afterwards."""
    s3 = lake.client(creds)
    with contextlib.suppress(Exception):  # it exists already (or the store lets no one create buckets)
        s3.create_bucket(Bucket=bucket)
    _empty(s3, bucket, PREFIX)
    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    try:
        out.update(_stage_figures(creds=creds, s3=s3, bucket=bucket, work=work, tuning=tuning, files=files,
                                  file_KiB=file_KiB))
        mover = Mover(creds, work / "state", tuning)
        # Checkpoint: the trainer stand-in writes its shards and the commit marker to the fast tier.
        data = [os.urandom(shard_MiB << 20) for _ in range(shards)]
        ck = work / "ckpt" / "step1"
        t0 = time.perf_counter()
        _write_shards(ck, data)
        (ck / ".metadata").write_bytes(b"meta")
        write_s = time.perf_counter() - t0
        del data
        t1 = time.perf_counter()
        ex = export_checkpoints(mover, Root(name="ck", root=work / "ckpt", bucket=bucket, prefix=PREFIX + "ck/",
                                            marker=".metadata"), keep=1, release=False)
        upload_s = time.perf_counter() - t1
        _drop_cache(ck)
        fast_s = _read_all(ck)
        t2 = time.perf_counter()
        Mover(creds, work / "state-restore", tuning).stage(LinkJob("restore", bucket, PREFIX + "ck/",
                                                                   work / "restore"))
        lake_s = time.perf_counter() - t2
        out.update(checkpoint_write_s=write_s, checkpoint_export_s=upload_s,
                   checkpoint_blocked_ratio=(write_s + upload_s) / write_s, checkpoint_exported=len(ex.exported),
                   restore_fast_s=fast_s, restore_lake_s=lake_s, checkpoint_restore_ratio=lake_s / fast_s)
        resume = _resume(creds=creds, s3=s3, bucket=bucket, work=work, tuning=tuning, big_MiB=shard_MiB)
        out.update({f"resume_{k}": v for k, v in resume.items()})
        out["resume_lost_or_partial"] = out["resume_lost"] + out["resume_partial"]
        repair = _repair(creds=creds, s3=s3, bucket=bucket, work=work, tuning=tuning)
        out.update({f"repair_{k}": v for k, v in repair.items()})
        out["repair_failures"] = out["repair_bad_visible"] + out["repair_unrepaired"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
        _empty(s3, bucket, PREFIX)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--work", required=True, help="directory on the fast tier (created, removed afterwards)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--part-MiB", type=int, default=8)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--file-KiB", type=int, default=128)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--shard-MiB", type=int, default=64)
    a = ap.parse_args(argv)
    key, secret = os.environ.get("KILN_S3_ACCESS_KEY"), os.environ.get("KILN_S3_SECRET_KEY")
    if not key or not secret:
        print("KILN_S3_ACCESS_KEY and KILN_S3_SECRET_KEY must be set (never argv)", file=sys.stderr)
        return 2
    res = measure(creds=Credentials(a.endpoint, key, secret), bucket=a.bucket, work=Path(a.work),
                  tuning=engine.Tuning(a.concurrency, a.part_MiB), files=a.files, file_KiB=a.file_KiB, shards=a.shards,
                  shard_MiB=a.shard_MiB)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
