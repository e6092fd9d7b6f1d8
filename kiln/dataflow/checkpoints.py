"""Checkpoint write-back, release and restore.

A checkpoint is a subdirectory of the checkpoint root holding the commit marker (PyTorch DCP writes `.metadata`
last). Write-back uploads a committed checkpoint's files first and its marker last, so a lake reader that waits
for the marker never sees half a checkpoint. The marker is per version of the directory's contents: before the
files of a changed checkpoint (a directory name used again) go up, the lake's marker of the old version is
deleted; once they are verified, objects of the old version that the new one lacks are deleted, an index of the
new version is written (`<checkpoint>/.kiln-checkpoint.json`: every file's size and ETag, the marker's mtime, and
the version, a SHA-256 over them), and the marker goes up last carrying that version (x-amz-meta-kiln-version). A
checkpoint is complete in the lake when its marker's version is its index's and every file of the index is there
with its size and ETag.

`restore_latest` picks the newest checkpoint complete in the lake; if the fast tier holds it as verified (every
file recorded with its current size and mtime) it is used there, else it is staged from the lake, files first,
marker last. One checkpoint that fails (a file that does not verify, a refused name) fails alone: the others are
written back and released as usual.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln.dataflow import lake
from kiln.dataflow.export import object_key, put_small
from kiln.dataflow.job import LinkJob
from kiln.dataflow.keys import escape
from kiln.dataflow.mover import Mover

log = logging.getLogger(__name__)

INDEX = ".kiln-checkpoint.json"
VERSION_META = "kiln-version"


class RestoreError(RuntimeError):
    """A checkpoint complete in the lake did not arrive verified on the fast tier."""


@dataclass(frozen=True, slots=True)
class CheckpointResult:
    exported: tuple[str, ...]  # checkpoint directories written back in this pass
    released: tuple[str, ...]  # older checkpoints deleted from the fast tier (verified in the lake)
    pending: tuple[str, ...]  # directories without the commit marker: not touched
    bytes_moved: int
    failed: tuple[tuple[str, str], ...] = ()  # (checkpoint, why) for those that could not be written back


@dataclass(frozen=True, slots=True, kw_only=True)
class Root:
    """A checkpoint root and where it goes in the lake."""

    name: str  # the mover's name for it (its lock, manifest and status)
    root: Path
    bucket: str
    prefix: str
    marker: str

    def job(self, **kw: Any) -> LinkJob:
        return LinkJob(name=self.name, bucket=self.bucket, prefix=self.prefix, local=self.root, conflict="overwrite",
                       **kw)


def committed(root: Path, marker: str) -> tuple[list[Path], list[Path]]:
    """(checkpoint directories holding the marker, oldest marker first; directories without it)."""
    dirs = [d for d in root.iterdir() if d.is_dir() and not d.is_symlink()] if root.exists() else []
    done = sorted((d for d in dirs if (d / marker).is_file()), key=lambda d: ((d / marker).stat().st_mtime_ns, d.name))
    return done, sorted(d for d in dirs if not (d / marker).is_file())


def files_of(root: Path, d: Path) -> list[str]:
    """Every file and symlink of a checkpoint directory, relative to the root (symlinks not followed)."""
    out = []
    for dirpath, _dirs, names in os.walk(d):
        out += [os.path.relpath(os.path.join(dirpath, n), root) for n in names]
    return sorted(out)


def export_checkpoints(mover: Mover, ck: Root, keep: int, release: bool) -> CheckpointResult:
    """Write committed checkpoints back (marker last, per version), then release all but the newest `keep` once
    verified; under the root's lock."""
    with mover.session(f"{ck.name}.checkpoint"), mover.verdict(ck.name, "checkpoint") as failures:
        done, pending = committed(ck.root, ck.marker)
        exported, failed, moved = [], [], 0
        for d in done:
            files = files_of(ck.root, d)
            if mover.verified(ck.name, ck.root, files):
                continue
            why, n = write_back(mover, ck, d, files)
            moved += n
            if why:
                failed.append((d.name, why))
                failures.append(f"checkpoint {d.name}: {why}")
                log.error("%s: checkpoint %s not written back: %s", ck.name, d.name, why)
            else:
                exported.append(d.name)
        released = release_old(mover, ck, done, keep) if release else []
    return CheckpointResult(tuple(exported), tuple(released), tuple(p.name for p in pending), moved, tuple(failed))


def write_back(mover: Mover, ck: Root, d: Path, files: Sequence[str]) -> tuple[str, int]:
    """One checkpoint: old marker out, files up, stale objects out, index, marker up. (why it failed or '', bytes)."""
    marker = f"{d.name}/{ck.marker}"
    body = [f for f in files if f != marker]
    mover.s3.delete_object(Bucket=ck.bucket, Key=ck.prefix + marker)
    with mover.session(f"{ck.name}.checkpoint") as m:
        m.delete_many([marker])
    r1 = mover.export(ck.job(), body, direction="checkpoint")
    if not r1.ok:
        return f"{len(r1.failed)} file(s) failed, e.g. {escape(r1.reasons[0][0])}: {r1.reasons[0][1]}", r1.bytes_moved
    index = version_index(mover, ck, d, body)
    drop_stale(mover, ck, d, set(index["files"]))
    put_small(mover, ck.job(), f"{d.name}/{INDEX}", json.dumps(index, sort_keys=True).encode(), None)
    r2 = mover.export(ck.job(), [marker], direction="checkpoint",
                      extra=["--metadata-set", f"{VERSION_META}={index['version']}"])
    if not r2.ok:
        return "the commit marker failed verification", r1.bytes_moved + r2.bytes_moved
    return "", r1.bytes_moved + r2.bytes_moved


def version_index(mover: Mover, ck: Root, d: Path, body: Sequence[str]) -> dict[str, Any]:
    """The index of this version: each file's object (size, ETag, as verified), the marker's size, MD5 and mtime."""
    keys = [object_key(f, (ck.root / f).lstat()) for f in body]
    with mover.session(f"{ck.name}.checkpoint") as m:
        entries = m.get_many(keys)
    marker = d / ck.marker
    files = {k: {"size": entries[k].size, "etag": entries[k].etag} for k in sorted(keys)}
    meta = {"size": marker.stat().st_size, "md5": lake.file_md5(marker).hex(), "mtime_ns": marker.stat().st_mtime_ns}
    version = hashlib.sha256(json.dumps([files, meta], sort_keys=True).encode()).hexdigest()[:32]
    return {"version": version, "checkpoint": d.name, "files": files, "marker": meta}


def drop_stale(mover: Mover, ck: Root, d: Path, keep: set[str]) -> None:
    """Delete the checkpoint's objects that this version does not hold (an earlier version's files)."""
    ours = {f"{d.name}/{ck.marker}", f"{d.name}/{INDEX}", *keep}
    stale = [o.key for o in lake.list_prefix(mover.s3, ck.bucket, f"{ck.prefix}{d.name}/", dirs=True)]
    stale = [f"{d.name}/{k}" for k in stale if f"{d.name}/{k}" not in ours]
    if stale:
        mover.s3.delete_objects(Bucket=ck.bucket, Delete={"Objects": [{"Key": ck.prefix + k} for k in stale],
                                                          "Quiet": True})
        with mover.session(f"{ck.name}.checkpoint") as m:
            m.delete_many(stale)


def release_old(mover: Mover, ck: Root, done: Sequence[Path], keep: int) -> list[str]:
    released = []
    for d in done[: max(0, len(done) - keep)]:
        if mover.verified(ck.name, ck.root, files_of(ck.root, d)):
            shutil.rmtree(d)
            released.append(d.name)
        else:
            log.warning("%s: %s not released: not every file is verified in the lake", ck.name, d.name)
    return released


@dataclass(frozen=True, slots=True)
class InLake:
    name: str
    index: dict[str, Any]


def complete_in_lake(mover: Mover, ck: Root) -> tuple[list[InLake], list[tuple[str, str]]]:
    """The checkpoints complete in the lake, newest marker first, and (name, why) of those that are not."""
    by_ckpt: dict[str, dict[str, lake.Obj]] = {}
    for o in lake.list_prefix(mover.s3, ck.bucket, ck.prefix):
        if "/" in o.key:
            by_ckpt.setdefault(o.key.split("/", 1)[0], {})[o.key] = o
    good, bad = [], []
    for name, objs in by_ckpt.items():
        why, index = lake_verdict(mover, ck, name, objs)
        if why:
            bad.append((name, why))
        else:
            good.append(InLake(name, index))
    good.sort(key=lambda c: (c.index["marker"]["mtime_ns"], c.name), reverse=True)
    return good, bad


def lake_verdict(mover: Mover, ck: Root, name: str, objs: dict[str, lake.Obj]) -> tuple[str, dict[str, Any]]:
    marker, index_key = f"{name}/{ck.marker}", f"{name}/{INDEX}"
    if marker not in objs:
        return "no commit marker in the lake", {}
    if index_key not in objs:
        return "no version index (written back by an earlier kiln, or not by kiln)", {}
    index = json.loads(mover.s3.get_object(Bucket=ck.bucket, Key=ck.prefix + index_key)["Body"].read())
    version = lake.head(mover.s3, ck.bucket, ck.prefix + marker).get("Metadata", {}).get(VERSION_META)
    if version != index.get("version"):
        return f"the marker's version {version} is not the index's {index.get('version')}", {}
    for key, want in index["files"].items():
        o = objs.get(key)
        if o is None or (o.size, o.etag) != (want["size"], want["etag"]):
            return f"{key} is missing or not the indexed version", {}
    return "", index


def restore_latest(mover: Mover, ck: Root) -> dict[str, Any]:
    """The newest checkpoint complete in the lake: on the fast tier where it is verified there, else staged from
    the lake (files, then the marker). What `kiln data restore --latest` prints."""
    with mover.session(f"{ck.name}.checkpoint"):
        good, bad = complete_in_lake(mover, ck)
        if not good:
            return {"checkpoint": None, "source": None, "skipped": [{"checkpoint": n, "why": w} for n, w in bad]}
        newest = good[0]
        d = ck.root / newest.name
        files = [*newest.index["files"], f"{newest.name}/{ck.marker}"]
        local_files = [f[: -len(".rclonelink")] if f.endswith(".rclonelink") else f for f in files]
        moved, source = 0, "fast-tier"
        if not (d.is_dir() and mover.verified(ck.name, ck.root, local_files)):
            moved, source = stage_from_lake(mover, ck, newest), "lake"
    return {"checkpoint": newest.name, "path": str(d), "source": source, "bytes_moved": moved,
            "skipped": [{"checkpoint": n, "why": w} for n, w in bad]}


def stage_from_lake(mover: Mover, ck: Root, c: InLake) -> int:
    """Stage the checkpoint's indexed files, then its marker; raises if any does not verify."""
    moved = 0
    for keys in (set(c.index["files"]), {f"{c.name}/{ck.marker}"}):
        r = mover.stage(ck.job(only=frozenset(keys)), scope="checkpoint")
        moved += r.bytes_moved
        if not r.ok:
            raise RestoreError(f"restore of {c.name}: {len(r.failed)} file(s) did not verify, e.g. "
                               f"{escape(r.reasons[0][0])}: {r.reasons[0][1]}")
    return moved
