"""The export pass (`kiln data export`, checkpoint write-back): walk the directory (or take the given files),
decide per file against the manifest and the lake, upload, verify in the lake, record; then deletions.

Regular files go through rclone (with `--metadata` where the link keeps POSIX metadata); a symlink becomes an
object of its target's bytes named <path>.rclonelink, and an empty directory a marker object <path>/, both
written by kiln with FSx's POSIX metadata (kiln/dataflow/posix.py). The lake is read only where a file is
candidate for upload or deletion: a pass with nothing changed lists nothing.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import stat
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from kiln.dataflow import engine, lake, posix
from kiln.dataflow.decide import Act, Decision, clean_local, deletion_guard, export_one, resolve
from kiln.dataflow.job import LinkJob, PassResult, Tally, conclude, freeze
from kiln.dataflow.keys import LINK_SUFFIX, PARTIAL_SUFFIX, STAGING, escape, refusal
from kiln.dataflow.manifest import Entry, Manifest, chunks
from kiln.dataflow.progress import Status
from kiln.dataflow.stage import lstat, matches, same

if TYPE_CHECKING:
    from kiln.dataflow.mover import Mover

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Local:
    rel: str
    key: str  # the object key: rel, or rel + LINK_SUFFIX for a symlink
    st: os.stat_result
    entry: Entry | None


@dataclass
class Walked:
    candidates: list[Local] = field(default_factory=list)  # not clean: upload, adopt or conflict
    dirs: list[str] = field(default_factory=list)  # empty directories
    selected: int = 0
    selected_bytes: int = 0


def object_key(rel: str, st: os.stat_result) -> str:
    return rel + LINK_SUFFIX if stat.S_ISLNK(st.st_mode) else rel


def export_pass(m: Mover, job: LinkJob, manifest: Manifest, status: Status, files: Sequence[str] | None,
                extra: Sequence[str]) -> PassResult:
    t0 = time.monotonic()
    tally = Tally()
    propagate = files is None and job.deletions == "propagate"
    if propagate:
        manifest.begin_seen()
    w = walk(job, manifest, files, tally, propagate)
    vanished = [k for k in manifest.unseen() if job.wants(k)] if propagate else []
    now = lake_objects(m, job, [c.key for c in w.candidates] + vanished, len(manifest))
    todo = decide(m, job, manifest, w.candidates, now=now, tally=tally)
    todo = renames(m, job, manifest, todo, vanished=vanished, now=now, tally=tally)
    status.files_total = status.backlog_files = len(todo)
    status.bytes_total = status.backlog_bytes = sum(c.st.st_size for c in todo)
    status.lag_s = time.time() - min((c.st.st_mtime for c in todo), default=time.time())
    status.state = "transferring"
    m.report(status)
    res, errors = upload(m, job, todo, w.dirs, status=status, held=len(manifest), extra=extra)
    status.state = "verifying"
    m.report(status)
    record(m, job, manifest, todo, errors=errors, held=len(manifest), tally=tally, status=status)
    delete_vanished(m, job, manifest, [k for k in vanished if k not in {s for s, _ in tally.renamed}], now=now,
                    tally=tally)
    status.backlog_bytes = sum(c.st.st_size for c in todo if c.key in tally.failed)
    status.lag_s = 0.0 if not tally.failed else status.lag_s
    conclude(status, tally)
    return freeze(tally, res=res, selected=(w.selected, w.selected_bytes), seconds=time.monotonic() - t0)


def local_files(job: LinkJob, files: Sequence[str] | None, dirs: list[str]) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of the given files, or of every file and symlink under the link's directory (its
    staging directory and partial files left out; empty directories noted in `dirs`)."""
    if files is not None:
        for rel in files:
            st = lstat(job.local / rel)
            if st is not None:
                yield rel, st
        return
    stack = [""]
    while stack:
        top = stack.pop()
        with os.scandir(job.local / top) as it:
            entries = [e for e in it if not (top == "" and e.name == STAGING) and not e.name.endswith(PARTIAL_SUFFIX)]
        if not entries and top:
            dirs.append(top)
        for e in entries:
            rel = f"{top}/{e.name}" if top else e.name
            if e.is_dir(follow_symlinks=False):
                stack.append(rel)
            elif e.is_file(follow_symlinks=False) or e.is_symlink():
                yield rel, e.stat(follow_symlinks=False)


def walk(job: LinkJob, manifest: Manifest, files: Sequence[str] | None, tally: Tally, propagate: bool) -> Walked:
    """The files that are not as last verified, a batch of manifest lookups at a time; refused names fail."""
    w = Walked()
    for batch in chunks(local_files(job, files, w.dirs)):
        batch = [(rel, st) for rel, st in batch if accept(job, rel, st, tally)]
        keys = [object_key(rel, st) for rel, st in batch]
        if propagate:
            manifest.add_seen(keys)
        entries = manifest.get_many(keys)
        for (rel, st), key in zip(batch, keys, strict=True):
            w.selected += 1
            w.selected_bytes += st.st_size
            e = entries.get(key)
            if not clean_local(st, e):
                w.candidates.append(Local(rel, key, st, e))
    if files is not None:
        for rel in files:
            if lstat(job.local / rel) is None:
                tally.fail(rel, "not on the fast tier")
    return w


def accept(job: LinkJob, rel: str, st: os.stat_result, tally: Tally) -> bool:
    why = refusal(rel)
    if why is not None:
        tally.fail(rel, f"refused: {why}")
        return False
    return job.wants(object_key(rel, st))


def lake_objects(m: Mover, job: LinkJob, keys: Sequence[str], held: int) -> dict[str, lake.Obj]:
    """The lake's objects of these keys (absent ones left out): one listing where that is fewer requests, else a
    HEAD each. Nothing is asked for no keys."""
    if not keys:
        return {}
    if engine.traverse(len(keys), held + len(keys)):
        wanted = set(keys)
        return {o.key: o for o in lake.list_prefix(m.s3, job.bucket, job.prefix) if o.key in wanted}

    def one(key: str) -> lake.Obj | None:
        try:
            h = lake.head(m.s3, job.bucket, job.prefix + key)
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return lake.Obj(key, int(h["ContentLength"]), str(h["ETag"]).strip('"'), str(h.get("LastModified", "")))

    with ThreadPoolExecutor(max_workers=8) as pool:
        return {o.key: o for o in pool.map(one, keys) if o is not None}


def decide(m: Mover, job: LinkJob, manifest: Manifest, candidates: Sequence[Local], now: dict[str, lake.Obj],
           tally: Tally) -> list[Local]:
    """The candidates to upload; adopted ones recorded, conflicts settled by the link's policy."""
    todo = []
    for c in candidates:
        o = now.get(c.key)
        dec = export_one(c.st, c.entry, o, policy=job.conflict)
        if dec.act is Act.ADOPT and o is not None:
            if matches(m, job, c.key, job.local / c.rel, o.etag)[0]:
                manifest.put_many([(c.key, Entry(c.st.st_size, o.etag, c.st.st_mtime_ns))])
                continue
            dec = resolve(job.conflict, dec.why, dest_newer=bool(o.modified) and
                          posix.modified_ns(o.modified) > c.st.st_mtime_ns)
        if settle(c.key, dec, tally):
            todo.append(c)
    return todo


def settle(key: str, dec: Decision, tally: Tally) -> bool:
    """Whether the file is uploaded; a conflict left or refused is tallied."""
    if dec.act is Act.SKIP:
        tally.conflicts[key] = dec.why
    elif dec.act is Act.FAIL:
        tally.fail(key, dec.why)
    elif dec.act is Act.OVERWRITE:
        tally.overwritten.append(key)
        log.warning("%s: the lake's object replaced (conflict policy): %s", escape(key), dec.why)
    return dec.act in (Act.MOVE, Act.OVERWRITE)


def renames(m: Mover, job: LinkJob, manifest: Manifest, todo: list[Local], vanished: Sequence[str],
            now: dict[str, lake.Obj], tally: Tally) -> list[Local]:
    """With deletions propagated, a new file with the size and mtime of a file that vanished (whose object is still
    as recorded, written in one part) is a rename: the lake copies the object and deletes the old one, no byte is
    uploaded."""
    entries = manifest.get_many(vanished)
    gone = {(e.size, e.mtime_ns): (k, e) for k, e in entries.items()
            if k in now and now[k].etag == e.etag and lake.is_md5_etag(e.etag) and not k.endswith(LINK_SUFFIX)}
    keep = []
    for c in todo:
        src = gone.pop((c.st.st_size, c.st.st_mtime_ns), None) if c.entry is None and c.key not in now else None
        if src is None or c.key.endswith(LINK_SUFFIX):
            keep.append(c)
            continue
        k, e = src
        out = m.s3.copy_object(Bucket=job.bucket, Key=job.prefix + c.key,
                               CopySource={"Bucket": job.bucket, "Key": job.prefix + k})
        if str(out.get("CopyObjectResult", {}).get("ETag", "")).strip('"') != e.etag:
            keep.append(c)  # not the same bytes after all: upload it
            continue
        m.s3.delete_object(Bucket=job.bucket, Key=job.prefix + k)
        manifest.put_many([(c.key, Entry(e.size, e.etag, c.st.st_mtime_ns))])
        manifest.delete_many([k])
        tally.renamed.append((k, c.key))
        tally.verified += 1
    return keep


def upload(m: Mover, job: LinkJob, todo: Sequence[Local], dirs: Sequence[str], status: Status, held: int,
           extra: Sequence[str]) -> tuple[engine.Result, dict[str, str]]:
    """rclone for files; kiln for symlinks and directory markers. The result, and the keys that failed with why."""
    errors: dict[str, str] = {}
    sent = 0
    for c in todo:
        if c.key.endswith(LINK_SUFFIX):
            try:
                sent += put_small(m, job, c.key, os.readlink(job.local / c.rel).encode(), c.st)
            except Exception as exc:
                errors[c.key] = f"not uploaded: {lake.error_class(exc)}: {exc}"
    for rel in dirs:
        if refusal(rel) is None and job.wants(rel + "/"):
            put_small(m, job, rel + "/", b"", (job.local / rel).lstat())

    def on_stats(stats: dict[str, Any]) -> None:
        status.from_engine(stats)
        m.report(status)

    files = [c.rel for c in todo if not c.key.endswith(LINK_SUFFIX)]
    meta = ["--metadata"] if job.posix_metadata or extra else []
    res = engine.run(m.creds, str(job.local), engine.remote(job.bucket, job.prefix), files, m.tuning,
                     on_stats=on_stats, lake_objects=held + len(files), extra=[*meta, *extra])
    errors.update({k: f"not uploaded: {why}" for k, why in res.failed})
    return replace(res, bytes=res.bytes + sent), errors


def put_small(m: Mover, job: LinkJob, key: str, body: bytes, st: os.stat_result | None) -> int:
    """One small object written by kiln (a symlink's target, a directory marker, a checkpoint's index), with FSx's
    POSIX metadata of `st` where given; the store checks its bytes against the MD5 sent with it."""
    md5 = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()
    m.s3.put_object(Bucket=job.bucket, Key=job.prefix + key, Body=body, ContentMD5=md5,
                    Metadata=posix.to_metadata(st) if st is not None else {})
    return len(body)


def record(m: Mover, job: LinkJob, manifest: Manifest, todo: Sequence[Local], errors: dict[str, str], held: int,
           tally: Tally, status: Status) -> None:
    """Verify each uploaded file in the lake by checksum and record it; what fails is named with why."""
    after = lake_objects(m, job, [c.key for c in todo if c.key not in errors], held)
    batch = []
    for c in todo:
        why = errors.get(c.key) or check(m, job, c, after.get(c.key))
        if why:
            tally.fail(c.key, why)
            continue
        batch.append((c.key, Entry(c.st.st_size, after[c.key].etag, c.st.st_mtime_ns)))
        tally.verified += 1
        status.files_done += 1
        status.backlog_files -= 1
    manifest.put_many(batch)


def check(m: Mover, job: LinkJob, c: Local, o: lake.Obj | None) -> str:
    """Why the lake's object is not a verified copy of the file as listed, or ''."""
    if o is None:
        return "not in the lake after the upload"  # rclone named no error for it: its exit is in the status
    if not same(lstat(job.local / c.rel), c.st):
        return "the file changed while it was exported; exported again next pass"
    if o.size != c.st.st_size:
        return (f"the lake holds {o.size} bytes, the file had {c.st.st_size} when listed: it changed while it was "
                "exported; exported again next pass")
    ok, how = matches(m, job, c.key, job.local / c.rel, o.etag)
    return "" if ok else f"not verified in the lake ({how}); uploaded again next pass"


def delete_vanished(m: Mover, job: LinkJob, manifest: Manifest, vanished: Sequence[str], now: dict[str, lake.Obj],
                    tally: Tally) -> None:
    """Delete objects whose file is gone (deletions: propagate), under the deletion guard."""
    if not vanished:
        return
    entries = manifest.get_many(vanished)
    doomed, dropped = [], []
    for k in vanished:
        o = now.get(k)
        if o is None:
            dropped.append(k)
        elif o.etag == entries[k].etag or job.conflict == "overwrite":
            doomed.append(k)
        elif job.conflict == "skip":
            tally.conflicts[k] = "deleted locally, changed in the lake; kept"
        else:
            tally.fail(k, "conflict: deleted locally, changed in the lake; kept; fix: delete the object by hand or "
                       "set the link's conflict policy")
    why = deletion_guard(len(doomed), len(manifest), job.max_delete_fraction)
    if why:
        tally.errors.append(why)
        log.error("%s: %s", job.name, why)
        doomed = []
    for batch in chunks(doomed, engine.LIST_PAGE):
        m.s3.delete_objects(Bucket=job.bucket, Delete={"Objects": [{"Key": job.prefix + k} for k in batch],
                                                       "Quiet": True})
    tally.deleted.extend(doomed)
    manifest.delete_many([*doomed, *dropped])

