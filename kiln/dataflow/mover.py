"""Stage a link in, export a directory, write checkpoints back: decide, move (rclone), verify, record.

Guarantees (docs/dataflow.md):
- incremental: a file moves only when its size + ETag (import) or size + mtime (export) differs from the
  manifest entry recorded after its last verified move; a re-run with nothing changed moves 0 bytes;
- no partial file visible: downloads land under a *.kiln-partial name and are renamed by rclone when whole;
  uploads become visible only when the multipart upload completes; a checkpoint's commit marker goes last;
- verified: every moved file is checked by checksum against the object before the manifest records it
  (on import, rclone's own MD5 check of the copy where the ETag is the object's MD5, else kiln hashes it),
  and a local checkpoint is released only when every file of it is recorded;
- resumable: killed mid-pass, the next pass deletes stale *.kiln-partial files and moves what the manifest
  lacks; files rclone finished before the kill are identical at the destination and not sent again.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import shutil
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kiln.dataflow import engine, lake, progress
from kiln.dataflow.manifest import Entry, Manifest

log = logging.getLogger(__name__)


@cache
def _glob_re(pattern: str) -> re.Pattern[str]:
    """'**' matches across '/', '*' and '?' within one path segment, '[...]' a class, '{a,b}' alternatives."""
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif c == "*":
            out, i = out + "[^/]*", i + 1
        elif c == "?":
            out, i = out + "[^/]", i + 1
        elif c == "{":
            end = pattern.index("}", i)
            out += "(?:" + "|".join(re.escape(a) for a in pattern[i + 1 : end].split(",")) + ")"
            i = end + 1
        elif c == "[":
            end = pattern.index("]", i + 1)
            out += fnmatch.translate(pattern[i : end + 1])[4:-3]
            i = end + 1
        else:
            out, i = out + re.escape(c), i + 1
    return re.compile(out + r"\Z")


def selected(path: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether a relative path is moved: matches an include (or there are none) and no exclude.

    A pattern without '/' matches the base name anywhere (as rclone filters do)."""

    def match(p: str) -> bool:
        target = path if "/" in p else path.rsplit("/", 1)[-1]
        return bool(_glob_re(p).match(target))

    return (not include or any(match(p) for p in include)) and not any(match(p) for p in exclude)


@dataclass(frozen=True, slots=True)
class LinkJob:
    name: str
    bucket: str
    prefix: str
    local: Path  # the directory on the fast tier
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    only: frozenset[str] | None = None  # exact keys (relative to the prefix), e.g. from change events


@dataclass(frozen=True, slots=True)
class PassResult:
    bytes_moved: int
    files_moved: int
    files_verified: int
    files_selected: int
    bytes_selected: int
    seconds: float
    failed: tuple[str, ...] = ()  # relative paths whose checksum did not match
    # Where the seconds went (import): list + decide, the engine (rclone start, its listing, the transfers),
    # verify, record (manifest and status); for the measurement pass and operators' reading of a slow stage.
    phases: tuple[tuple[str, float], ...] = ()


class Mover:
    def __init__(
        self,
        creds: lake.Credentials,
        state_dir: Path,
        tuning: engine.Tuning | None = None,
        textfile_dir: Path | None = None,
    ) -> None:
        self.creds = creds
        self.state_dir = state_dir
        self.tuning = tuning or engine.Tuning()
        self.textfile_dir = textfile_dir
        self.s3: Any = lake.client(creds)

    def _manifest(self, name: str, direction: str) -> Manifest:
        return Manifest(self.state_dir / f"{name}.{direction}.manifest.json")

    def _report(self, status: progress.Status) -> None:
        progress.write(status, self.state_dir, self.textfile_dir)

    @staticmethod
    def clean_partials(root: Path) -> int:
        """Delete downloads an earlier, killed pass left under their temporary name; how many."""
        n = 0
        if root.exists():
            for p in root.rglob(f"*{engine.PARTIAL_SUFFIX}"):
                p.unlink()
                n += 1
        return n

    def stage(self, job: LinkJob, metadata_only: bool = False) -> PassResult:
        """Import: bring every selected object of the link that the manifest lacks (or that changed) to local."""
        t0 = time.monotonic()
        status = progress.Status(job.name, "import", state="listing")
        self._report(status)
        job.local.mkdir(parents=True, exist_ok=True)
        stale = self.clean_partials(job.local)
        if stale:
            log.info("%s: removed %d partial download(s) of an interrupted pass", job.name, stale)
        manifest = self._manifest(job.name, "import")
        listed = list(lake.list_prefix(self.s3, job.bucket, job.prefix))
        objects = [
            o for o in listed if selected(o.key, job.include, job.exclude) and (job.only is None or o.key in job.only)
        ]
        todo = []
        for o in objects:
            have = manifest.entries.get(o.key)
            local = job.local / o.key
            if have is None or (have.size, have.etag) != (o.size, o.etag) or not self._same_local(local, have):
                todo.append(o)
        t_list = time.monotonic()
        status.files_total, status.bytes_total = len(todo), sum(o.size for o in todo)
        status.backlog_files, status.backlog_bytes = status.files_total, status.bytes_total
        if metadata_only:
            status.state = "done"
            self._report(status)
            return PassResult(
                bytes_moved=0, files_moved=0, files_verified=0, files_selected=len(objects),
                bytes_selected=sum(o.size for o in objects), seconds=time.monotonic() - t0,
            )
        status.state = "transferring"
        self._report(status)

        def on_stats(stats: dict[str, Any]) -> None:
            status.from_engine(stats)
            self._report(status)

        try:
            res = engine.copy(
                creds=self.creds,
                src=engine.remote(job.bucket, job.prefix),
                dst=str(job.local),
                files=(o.key for o in todo),
                tuning=self.tuning,
                on_stats=on_stats,
                lake_objects=len(listed),
            )
        except engine.EngineError as exc:
            status.state, status.error = "failed", str(exc)
            self._report(status)
            raise
        t_engine = time.monotonic()
        status.state = "verifying"
        self._report(status)
        failed = []
        checked = self._verify_staged(job, todo, res.copied)
        t_verify = time.monotonic()
        for o, (ok, how) in zip(todo, checked, strict=True):
            local = job.local / o.key
            if not ok:
                failed.append(o.key)
                log.error("%s: %s not verified: %s", job.name, o.key, how)
                continue
            manifest.entries[o.key] = Entry(o.size, o.etag, local.stat().st_mtime_ns)
            status.files_done += 1
            status.backlog_files -= 1
        if todo:  # a pass that moved nothing leaves the manifest as it was
            manifest.save()
        status.backlog_bytes = sum(o.size for o in todo if o.key in failed)
        status.state = "failed" if failed else "done"
        status.error = f"{len(failed)} file(s) failed verification" if failed else ""
        if not failed:
            status.last_success = time.time()
        self._report(status)
        t_end = time.monotonic()
        return PassResult(
            bytes_moved=res.bytes,
            files_moved=res.files,
            files_verified=status.files_done,
            files_selected=len(objects),
            bytes_selected=sum(o.size for o in objects),
            seconds=t_end - t0,
            failed=tuple(failed),
            phases=(("list", t_list - t0), ("engine", t_engine - t_list), ("verify", t_verify - t_engine),
             ("record", t_end - t_verify)),
        )

    def _verify_staged(self, job: LinkJob, todo: Sequence[lake.Obj], copied: frozenset[str]) -> list[tuple[bool, str]]:
        """(ok, how) for each downloaded object, in order. rclone checked the MD5 of each file it logged as copied
        against the object's before renaming it into place; where the ETag is that MD5 (a single-part object)
        this is the checksum check, and reading the file again would only repeat it. Every other file (a
        multipart ETag, or one rclone skipped as already there) is hashed here, on a few threads (hashlib
        releases the GIL)."""

        def by_rclone(o: lake.Obj) -> tuple[bool, str] | None:
            """rclone's verdict, or None where the mover must hash the file itself."""
            try:
                size = (job.local / o.key).stat().st_size
            except FileNotFoundError:
                return False, "missing after the copy"
            if o.key in copied and lake.is_md5_etag(o.etag):
                return (True, "md5 = ETag (rclone, on the copy)") if size == o.size else (False, "size differs")
            return None

        out = [by_rclone(o) for o in todo]
        rest = [i for i, r in enumerate(out) if r is None]
        if rest:
            with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) + 1)) as pool:
                hashed = pool.map(
                    lambda o: lake.verify(self.s3, job.bucket, job.prefix + o.key, job.local / o.key, o.etag),
                    [todo[i] for i in rest],
                )
                for i, r in zip(rest, hashed, strict=True):
                    out[i] = r
        return [r for r in out if r is not None]

    @staticmethod
    def _same_local(local: Path, have: Entry) -> bool:
        try:
            st = local.stat()
        except FileNotFoundError:
            return False
        return st.st_size == have.size and st.st_mtime_ns == have.mtime_ns

    def export(self, job: LinkJob, files: Sequence[str] | None = None, direction: str = "export") -> PassResult:
        """Export: upload every selected local file that is new or changed since its last verified upload."""
        t0 = time.monotonic()
        status = progress.Status(job.name, direction, state="listing")
        self._report(status)
        manifest = self._manifest(job.name, direction)
        if files is None:
            files = sorted(
                str(p.relative_to(job.local))
                for p in job.local.rglob("*")
                if p.is_file() and not p.name.endswith(engine.PARTIAL_SUFFIX)
            )
        chosen = [f for f in files if selected(f, job.include, job.exclude)]
        todo: list[tuple[str, os.stat_result]] = []
        for rel in chosen:
            st = (job.local / rel).stat()
            have = manifest.entries.get(rel)
            if have is None or (have.size, have.mtime_ns) != (st.st_size, st.st_mtime_ns):
                todo.append((rel, st))
        status.files_total = status.backlog_files = len(todo)
        status.bytes_total = status.backlog_bytes = sum(st.st_size for _, st in todo)
        status.lag_s = time.time() - min((st.st_mtime for _, st in todo), default=time.time())
        status.state = "transferring"
        self._report(status)

        def on_stats(stats: dict[str, Any]) -> None:
            status.from_engine(stats)
            self._report(status)

        try:
            res = engine.copy(
                creds=self.creds,
                src=str(job.local),
                dst=engine.remote(job.bucket, job.prefix),
                files=(rel for rel, _ in todo),
                tuning=self.tuning,
                on_stats=on_stats,
                # The lake side holds at least what this link exported before (its manifest).
                lake_objects=len(manifest.entries) + len(todo),
            )
        except engine.EngineError as exc:
            status.state, status.error = "failed", str(exc)
            self._report(status)
            raise
        status.state = "verifying"
        self._report(status)
        remote = {o.key: o for o in lake.list_prefix(self.s3, job.bucket, job.prefix)}
        failed = []
        for rel, st in todo:
            obj = remote.get(rel)
            local = job.local / rel
            ok, how = (
                (False, "not in the lake after the copy")
                if obj is None
                else lake.verify(self.s3, job.bucket, job.prefix + rel, local, obj.etag)
            )
            if ok and obj is not None and obj.size == st.st_size:
                manifest.entries[rel] = Entry(st.st_size, obj.etag, st.st_mtime_ns)
                status.files_done += 1
                status.backlog_files -= 1
            else:
                failed.append(rel)
                log.error("%s: %s not verified in the lake: %s", job.name, rel, how)
        if todo:
            manifest.save()
        status.backlog_bytes = sum(st.st_size for rel, st in todo if rel in failed)
        status.lag_s = 0.0 if not failed else status.lag_s
        status.state = "failed" if failed else "done"
        if not failed:
            status.last_success = time.time()
        self._report(status)
        return PassResult(
            bytes_moved=res.bytes,
            files_moved=res.files,
            files_verified=status.files_done,
            files_selected=len(chosen),
            bytes_selected=sum((job.local / f).stat().st_size for f in chosen),
            seconds=time.monotonic() - t0,
            failed=tuple(failed),
        )

    def verified(self, name: str, direction: str, root: Path, files: Sequence[str]) -> bool:
        """Whether every file is recorded as verified in the lake with its current size and mtime."""
        entries = self._manifest(name, direction).entries
        for rel in files:
            have = entries.get(rel)
            if have is None or not self._same_local(root / rel, have):
                return False
        return True


@dataclass(frozen=True, slots=True)
class CheckpointResult:
    exported: tuple[str, ...]  # checkpoint directories written back in this pass
    released: tuple[str, ...]  # older checkpoints deleted from the fast tier (verified in the lake)
    pending: tuple[str, ...]  # directories without the commit marker: not touched
    bytes_moved: int


def committed(root: Path, marker: str) -> tuple[list[Path], list[Path]]:
    """(checkpoint directories holding the marker, oldest marker first; directories without it)."""
    dirs = [d for d in root.iterdir() if d.is_dir()] if root.exists() else []
    done = sorted((d for d in dirs if (d / marker).is_file()), key=lambda d: ((d / marker).stat().st_mtime_ns, d.name))
    return done, sorted(d for d in dirs if not (d / marker).is_file())


def export_checkpoints(
    mover: Mover, name: str, root: Path, bucket: str, prefix: str, marker: str, keep: int, release: bool
) -> CheckpointResult:
    """Write committed checkpoints back (marker last), then release all but the newest `keep` once verified."""
    done, pending = committed(root, marker)
    exported, moved = [], 0
    for d in done:
        files = sorted(str(p.relative_to(root)) for p in d.rglob("*") if p.is_file())
        if mover.verified(name, "checkpoint", root, files):
            continue
        body = [f for f in files if f != f"{d.name}/{marker}"]
        job = LinkJob(name, bucket, prefix, root)
        # The shards first; the marker only once they are all verified, so a lake reader that waits
        # for the marker never sees a partial checkpoint.
        r1 = mover.export(job, body, direction="checkpoint")
        if r1.failed:
            raise engine.EngineError(f"checkpoint {d.name}: {len(r1.failed)} file(s) failed verification")
        r2 = mover.export(job, [f"{d.name}/{marker}"], direction="checkpoint")
        if r2.failed:
            raise engine.EngineError(f"checkpoint {d.name}: the commit marker failed verification")
        exported.append(d.name)
        moved += r1.bytes_moved + r2.bytes_moved
    released = []
    if release:
        for d in done[: max(0, len(done) - keep)]:
            files = sorted(str(p.relative_to(root)) for p in d.rglob("*") if p.is_file())
            if mover.verified(name, "checkpoint", root, files):
                shutil.rmtree(d)
                released.append(d.name)
            else:
                log.warning("%s: %s not released: not every file is verified in the lake", name, d.name)
    return CheckpointResult(tuple(exported), tuple(released), tuple(p.name for p in pending), moved)
