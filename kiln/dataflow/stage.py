"""The import pass (`kiln data stage`): list the lake, decide per object, copy into the staging directory,
verify, rename into place, record; then deletions and directories.

Every download lands under `<link>/.kiln-staging/` first (rclone's, a large object's ranged fetch, a symlink),
is verified there by checksum and only then renamed to its path; what fails verification is deleted, so the
next pass fetches it again. A file rclone finished before the mover was killed stays in staging and is verified
by the next pass instead of being fetched again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kiln.dataflow import engine, fetch, lake, posix
from kiln.dataflow.decide import Act, Decision, conflict_import, deletion_guard, import_one
from kiln.dataflow.job import LinkJob, PassResult, Tally, conclude, freeze
from kiln.dataflow.keys import LINK_SUFFIX, PARTIAL_SUFFIX, STAGING, escape, inside, refusal
from kiln.dataflow.manifest import Entry, Manifest, chunks
from kiln.dataflow.progress import Status

if TYPE_CHECKING:
    from kiln.dataflow.mover import Mover

log = logging.getLogger(__name__)

#: Verified files recorded per manifest transaction while a pass places them.
RECORD_BATCH = 500


@dataclass(frozen=True, slots=True)
class Move:
    o: lake.Obj
    rel: str  # the local path (a symlink's object key without LINK_SUFFIX)
    st: os.stat_result | None  # the destination as the decision saw it
    dec: Decision
    new: bool  # the manifest had no entry for it


@dataclass
class Decided:
    todo: list[Move] = field(default_factory=list)
    adopt: list[Move] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    listed: int = 0
    selected: int = 0
    selected_bytes: int = 0


def local_rel(key: str) -> str:
    return key[: -len(LINK_SUFFIX)] if key.endswith(LINK_SUFFIX) else key


def lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None


def same(a: os.stat_result | None, b: os.stat_result | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.st_ino, a.st_size, a.st_mtime_ns) == (b.st_ino, b.st_size, b.st_mtime_ns)


def stage_pass(m: Mover, job: LinkJob, manifest: Manifest, status: Status, metadata_only: bool) -> PassResult:
    t0 = time.monotonic()
    staging = job.local / STAGING
    job.local.mkdir(parents=True, exist_ok=True)
    clean_staging(staging, keep_complete=True)
    tally = Tally()
    propagate = job.deletions == "propagate" and job.only is None
    if propagate:
        manifest.begin_seen()
    d = decide(m, job, manifest, tally, propagate)
    adopt(m, job, manifest, d, tally)
    vanished = manifest.unseen() if propagate else []
    gone = renames(job, manifest, d, [k for k in vanished if job.wants(k)], tally)
    t_list = time.monotonic()
    status.files_total = status.backlog_files = len(d.todo)
    status.bytes_total = status.backlog_bytes = sum(mv.o.size for mv in d.todo)
    if metadata_only:
        conclude(status, tally)
        return freeze(tally, res=engine.NOTHING, selected=(d.selected, d.selected_bytes),
                      seconds=time.monotonic() - t0)
    status.state = "transferring"
    m.report(status)
    res, errors = transfer(m, job, d, staging, status)
    t_engine = time.monotonic()
    status.state = "verifying"
    m.report(status)
    place(m, job, manifest, d.todo, res=res, errors=errors, tally=tally, status=status)
    t_verify = time.monotonic()
    delete_vanished(job, manifest, gone, tally)
    make_dirs(job, d.dirs, tally)
    clean_staging(staging, keep_complete=False)
    status.backlog_bytes = sum(mv.o.size for mv in d.todo if mv.o.key in tally.failed)
    conclude(status, tally)
    t_end = time.monotonic()
    return freeze(tally, res=res, selected=(d.selected, d.selected_bytes), seconds=t_end - t0,
                  phases=(("list", t_list - t0), ("engine", t_engine - t_list), ("verify", t_verify - t_engine),
                          ("record", t_end - t_verify)))


def decide(m: Mover, job: LinkJob, manifest: Manifest, tally: Tally, propagate: bool) -> Decided:
    """List the prefix a page at a time and decide per object; refused keys fail here, before anything moves."""
    d = Decided()
    for page in chunks(lake.list_prefix(m.s3, job.bucket, job.prefix, dirs=True), engine.LIST_PAGE):
        d.listed += len(page)
        objs = [o for o in page if accept(job, o, d, tally)]
        if propagate:
            manifest.add_seen(o.key for o in objs)
        entries = manifest.get_many(o.key for o in objs)
        for o in objs:
            one(job, o, entries.get(o.key), d, tally)
    return d


def accept(job: LinkJob, o: lake.Obj, d: Decided, tally: Tally) -> bool:
    """Whether the object is one of the link's files; a directory marker is noted, a refused key fails."""
    if o.key.endswith("/"):
        if refusal(o.key.rstrip("/")) is None and job.wants(o.key):
            d.dirs.append(o.key.rstrip("/"))
        return False
    why = refusal(o.key)
    if why is not None:
        tally.fail(o.key, f"refused: {why}")
        return False
    if not inside(job.local, local_rel(o.key)):
        tally.fail(o.key, "refused: a symlink on its path leads outside the link's directory")
        return False
    return job.wants(o.key)


def one(job: LinkJob, o: lake.Obj, e: Entry | None, d: Decided, tally: Tally) -> None:
    rel = local_rel(o.key)
    st = lstat(job.local / rel)
    dec = import_one(o, e, st, policy=job.conflict, two_way=job.two_way, propagate=job.deletions == "propagate")
    d.selected += 1
    d.selected_bytes += o.size
    mv = Move(o, rel, st, dec, e is None)
    if dec.act in (Act.MOVE, Act.REPAIR, Act.OVERWRITE):
        d.todo.append(mv)
    elif dec.act is Act.ADOPT:
        d.adopt.append(mv)
    elif dec.act is Act.SKIP:
        tally.conflicts[o.key] = dec.why
    elif dec.act is Act.FAIL:
        tally.fail(o.key, dec.why)


def matches(m: Mover, job: LinkJob, key: str, path: Path, etag: str) -> tuple[bool, str]:
    """Whether the local file (or symlink) holds the object's bytes, by checksum."""
    if key.endswith(LINK_SUFFIX):
        target = os.readlink(path).encode() if path.is_symlink() else b""
        ok = lake.is_md5_etag(etag) and hashlib.md5(target, usedforsecurity=False).hexdigest() == etag
        return ok, "symlink target md5 = ETag" if ok else "symlink target differs"
    if path.is_symlink():
        return False, "a symlink stands where a file goes"
    return lake.verify(m.s3, job.bucket, job.prefix + key, path, etag)


def adopt(m: Mover, job: LinkJob, manifest: Manifest, d: Decided, tally: Tally) -> None:
    """A local file without a record and of the object's size: recorded if identical, else a conflict."""
    for mv in d.adopt:
        ok, _how = matches(m, job, mv.o.key, job.local / mv.rel, mv.o.etag)
        if ok and mv.st is not None:
            manifest.put_many([(mv.o.key, Entry(mv.o.size, mv.o.etag, mv.st.st_mtime_ns))])
            continue
        assert mv.st is not None
        dec = conflict_import(mv.o, mv.st, job.conflict, "the local file was not put there by the mover and differs")
        if dec.act is Act.OVERWRITE:
            d.todo.append(Move(mv.o, mv.rel, mv.st, dec, True))
        elif dec.act is Act.SKIP:
            tally.conflicts[mv.o.key] = dec.why
        else:
            tally.fail(mv.o.key, dec.why)


def renames(job: LinkJob, manifest: Manifest, d: Decided, vanished: list[str], tally: Tally) -> list[str]:
    """With deletions propagated, an object that vanished and one that appeared with its size and ETag are a
    rename: the local file is renamed, no byte moves. The vanished keys left to delete."""
    entries = manifest.get_many(vanished)
    clean = {}
    for k in vanished:
        e, st = entries[k], lstat(job.local / local_rel(k))
        if st is not None and (st.st_size, st.st_mtime_ns) == (e.size, e.mtime_ns):
            clean[(e.size, e.etag)] = k
    keep = []
    for mv in d.todo:
        src = clean.pop((mv.o.size, mv.o.etag), None) if mv.new and mv.st is None else None
        if src is None or mv.o.key.endswith(LINK_SUFFIX) or src.endswith(LINK_SUFFIX):
            keep.append(mv)
            continue
        dest = job.local / mv.rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(job.local / local_rel(src), dest)
        manifest.put_many([(mv.o.key, Entry(mv.o.size, mv.o.etag, dest.lstat().st_mtime_ns))])
        manifest.delete_many([src])
        tally.renamed.append((src, mv.o.key))
        tally.verified += 1
    d.todo = keep
    moved = {s for s, _ in tally.renamed}
    return [k for k in vanished if k not in moved]


def transfer(m: Mover, job: LinkJob, d: Decided, staging: Path, status: Status) -> tuple[engine.Result, dict[str, str]]:
    """Copy the objects into staging: rclone for most, ranged fetches for large ones, symlinks by GET. The engine's
    result (its bytes plus the others') and the keys that failed with why."""
    links, large, small = split(d.todo, m.tuning.ranged_min_MiB << 20)

    def on_stats(stats: dict[str, Any]) -> None:
        status.from_engine(stats)
        m.report(status)

    res = engine.run(m.creds, engine.remote(job.bucket, job.prefix), str(staging), small, m.tuning,
                     on_stats=on_stats, lake_objects=d.listed)
    errors = {k: f"not copied: {why}" for k, why in res.failed}
    extra = 0
    for mv in large:
        try:
            extra += fetch.fetch(m.s3, job.bucket, job.prefix + mv.o.key, size=mv.o.size, etag=mv.o.etag,
                                 staged=staging / mv.o.key, part=m.tuning.part_size_MiB << 20,
                                 workers=m.tuning.concurrency)
        except Exception as exc:  # one object's failure is that object's
            errors[mv.o.key] = f"not copied: {lake.error_class(exc)}: {exc}"
    for mv in links:
        try:
            extra += get_link(m, job, mv.o.key, staging / mv.rel)
        except Exception as exc:
            errors[mv.o.key] = f"not copied: {lake.error_class(exc)}: {exc}"
    counted = res.files + len(large) + len(links) - sum(1 for mv in [*large, *links] if mv.o.key in errors)
    return replace(res, bytes=res.bytes + extra, files=counted), errors


def split(todo: Sequence[Move], big: int) -> tuple[list[Move], list[Move], list[str]]:
    """(symlinks, objects of at least `big` bytes, the keys of the rest: rclone's)."""
    links, large, small = [], [], []
    for mv in todo:
        if mv.o.key.endswith(LINK_SUFFIX):
            links.append(mv)
        elif mv.o.size >= big:
            large.append(mv)
        else:
            small.append(mv.o.key)
    return links, large, small


def get_link(m: Mover, job: LinkJob, key: str, staged: Path) -> int:
    """A symlink object (its bytes are the target) as a symlink in staging; its bytes."""
    body = m.s3.get_object(Bucket=job.bucket, Key=job.prefix + key)["Body"].read()
    staged.parent.mkdir(parents=True, exist_ok=True)
    if staged.is_symlink() or staged.exists():
        staged.unlink()
    os.symlink(body.decode(), staged)
    return len(body)


def place(m: Mover, job: LinkJob, manifest: Manifest, todo: Sequence[Move], res: engine.Result,
          errors: dict[str, str], tally: Tally, status: Status) -> None:
    """Verify each staged file, then rename it into place and record it; what fails is deleted from staging."""
    staging = job.local / STAGING
    batch: list[tuple[str, Entry]] = []
    for mv, (ok, how) in zip(todo, verdicts(m, job, todo, res, errors), strict=True):
        staged = staging / (mv.rel if mv.o.key.endswith(LINK_SUFFIX) else mv.o.key)
        if not ok:
            _unlink(staged)
            tally.fail(mv.o.key, how)
            continue
        why = put_in_place(m, job, mv, staged)
        if why:
            _unlink(staged)
            tally.fail(mv.o.key, why)
            continue
        batch.append((mv.o.key, Entry(mv.o.size, mv.o.etag, (job.local / mv.rel).lstat().st_mtime_ns)))
        note(mv, tally)
        status.files_done += 1
        status.backlog_files -= 1
        if len(batch) >= RECORD_BATCH:
            manifest.put_many(batch)
            batch = []
    manifest.put_many(batch)


def note(mv: Move, tally: Tally) -> None:
    tally.verified += 1
    if mv.dec.act is Act.REPAIR:
        tally.repaired.append(mv.o.key)
        log.warning("%s: %s", escape(mv.o.key), mv.dec.why)
    elif mv.dec.act is Act.OVERWRITE:
        tally.overwritten.append(mv.o.key)
        log.warning("%s: replaced by the lake's object (conflict policy): %s", escape(mv.o.key), mv.dec.why)


def verdicts(m: Mover, job: LinkJob, todo: Sequence[Move], res: engine.Result,
             errors: dict[str, str]) -> list[tuple[bool, str]]:
    """(ok, how) for each staged file, in order. rclone checked the MD5 of each file it logged as copied against
    the object's before renaming it in staging; where the ETag is that MD5 (a single-part object) this is the
    checksum check, and reading the file again would only repeat it. Every other file (a multipart ETag, a file
    rclone skipped as already staged, a ranged fetch) is hashed here, on a few threads (hashlib releases the
    GIL)."""
    staging = job.local / STAGING

    def one(mv: Move) -> tuple[bool, str]:
        if mv.o.key in errors:
            return False, errors[mv.o.key]
        path = staging / (mv.rel if mv.o.key.endswith(LINK_SUFFIX) else mv.o.key)
        if not os.path.lexists(path):
            return False, f"not copied: rclone exited {res.rc}: {res.error or 'no message'}"
        if mv.o.key in res.copied and lake.is_md5_etag(mv.o.etag):
            ok = path.stat().st_size == mv.o.size
            return (True, "md5 = ETag (rclone)") if ok else (False, "size differs")
        ok, how = matches(m, job, mv.o.key, path, mv.o.etag)
        return ok, how if ok else f"not verified ({how}); deleted, fetched again next pass"

    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) + 1)) as pool:
        return list(pool.map(one, todo))


def put_in_place(m: Mover, job: LinkJob, mv: Move, staged: Path) -> str:
    """Rename a verified staged file to its path, with its metadata; why not, or ''."""
    dest = job.local / mv.rel
    if not same(lstat(dest), mv.st):
        return "the local file changed during the pass; left as it is, moved again next pass"
    if not inside(job.local, mv.rel):
        return "refused: a symlink on its path leads outside the link's directory"
    try:
        if job.posix_metadata:
            head = lake.head(m.s3, job.bucket, job.prefix + mv.o.key)
            posix.apply(str(staged), posix.from_metadata(head.get("Metadata", {})))
        posix.strip_setid(str(staged))
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, dest)
    except OSError as exc:
        return f"not placed: {exc.strerror or exc}"
    except Exception as exc:  # the object's HEAD: one file's trouble is that file's
        return f"not placed: {lake.error_class(exc)}: {exc}"
    return ""


def delete_vanished(job: LinkJob, manifest: Manifest, vanished: list[str], tally: Tally) -> None:
    """Delete local files whose object is gone (deletions: propagate), under the deletion guard."""
    if not vanished:
        return
    entries = manifest.get_many(vanished)
    doomed, dropped = [], []
    for k in vanished:
        st = lstat(job.local / local_rel(k))
        if st is None:
            dropped.append(k)
        elif (st.st_size, st.st_mtime_ns) == (entries[k].size, entries[k].mtime_ns) or job.conflict == "overwrite":
            doomed.append(k)
        elif job.conflict == "skip":
            tally.conflicts[k] = "deleted in the lake, changed locally; kept"
        else:
            tally.fail(k, "conflict: deleted in the lake, changed locally; kept; fix: delete it by hand or set the "
                       "link's conflict policy")
    why = deletion_guard(len(doomed), len(manifest), job.max_delete_fraction)
    if why:
        tally.errors.append(why)
        log.error("%s: %s", job.name, why)
        doomed = []
    for k in doomed:
        (job.local / local_rel(k)).unlink()
        tally.deleted.append(k)
    manifest.delete_many([*doomed, *dropped])


def make_dirs(job: LinkJob, dirs: Sequence[str], tally: Tally) -> None:
    """The lake's directory markers (keys ending in '/') as directories: empty directories travel too."""
    for rel in dirs:
        if inside(job.local, rel + "/x"):
            try:
                (job.local / rel).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                tally.fail(rel + "/", f"directory not made: {exc.strerror or exc}")


def clean_staging(staging: Path, keep_complete: bool) -> None:
    """Empty the staging directory but for what a pass resumes: ranged fetches with their journal, and (at the
    start of a pass, `keep_complete`) files rclone finished before a kill, which the pass verifies instead of
    fetching them again. rclone's own partial files always go."""
    if not staging.exists():
        return
    for p in _files(staging):
        if not ranged(p) and (p.name.endswith(PARTIAL_SUFFIX) or not keep_complete):
            p.unlink()
    for dirpath, _dirs, _names in sorted(os.walk(staging), key=lambda w: -len(w[0])):
        if not os.listdir(dirpath):
            os.rmdir(dirpath)


def ranged(p: Path) -> bool:
    """Whether p is half of a ranged fetch in progress: its data (with a journal) or its journal (with data)."""
    journal = PARTIAL_SUFFIX + ".parts"
    if p.name.endswith(PARTIAL_SUFFIX):
        return p.with_name(p.name + ".parts").exists()
    return p.name.endswith(journal) and p.with_name(p.name[: -len(".parts")]).exists()


def _files(root: Path) -> Iterator[Path]:
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            yield Path(dirpath) / f


def _unlink(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
