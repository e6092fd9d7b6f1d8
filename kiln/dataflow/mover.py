"""The mover: one pass of a link (stage in, export), under the link's lock, with its manifest and its status.

Guarantees (docs/dataflow.md, "Guarantees", each with the test that proves it):
- incremental: a file moves only when it differs from the manifest entry recorded after its last verified move;
  a re-run with nothing changed moves 0 bytes;
- nothing partial or unverified visible: a download lands in the link's staging directory (keys.STAGING) and is
  renamed into place only after its checksum verified; what fails verification is deleted, and the next pass
  fetches it again; an upload is visible only when its multipart upload completes; a checkpoint's commit marker
  goes last;
- one mover per link: the link's lock (kiln/dataflow/lock.py) is held for the whole pass;
- a pass keeps what it verified: each file is recorded as it verifies, and a file that fails (refused key,
  failed copy, failed checksum, conflict) fails alone, named with its reason;
- the status file ends every pass in a terminal state (done or failed, with the error's class).
The import pass is kiln/dataflow/stage.py, the export pass kiln/dataflow/export.py.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kiln.dataflow import engine, lake, lock, progress
from kiln.dataflow.decide import clean_local
from kiln.dataflow.export import export_pass, object_key
from kiln.dataflow.job import LinkJob, PassResult, selected
from kiln.dataflow.manifest import Manifest
from kiln.dataflow.stage import lstat, stage_pass
from kiln.redact import redact

__all__ = ["LinkJob", "Mover", "PassResult", "selected"]

log = logging.getLogger(__name__)


class Mover:
    def __init__(
        self,
        creds: lake.Credentials,
        state_dir: Path,
        tuning: engine.Tuning | None = None,
        textfile_dir: Path | None = None,
        lock_wait_s: float | None = None,
    ) -> None:
        """`lock_wait_s`: how long a pass waits for another mover holding its link (None: as long as it takes)."""
        self.creds = creds
        self.state_dir = state_dir
        self.tuning = tuning or engine.Tuning()
        self.textfile_dir = textfile_dir
        self.lock_wait_s = lock_wait_s
        self.s3: Any = lake.client(creds)
        self._open: dict[str, Manifest] = {}
        self._last: dict[tuple[str, str], progress.Status] = {}

    def report(self, status: progress.Status) -> None:
        self._last[(status.link, status.direction)] = status
        progress.write(status, self.state_dir, self.textfile_dir)

    @contextmanager
    def verdict(self, link: str, direction: str) -> Iterator[list[str]]:
        """Around several passes that make one operation (a checkpoint write-back): the failures they add to the
        list, or an exception, leave the status file failed (with the last pass's figures), whatever a later pass
        of the operation wrote."""
        failures: list[str] = []
        try:
            yield failures
        except Exception as exc:
            self._failed(link, direction, redact(f"{lake.error_class(exc)}: {exc}"), lake.error_class(exc))
            raise
        if failures:
            self._failed(link, direction, "; ".join(failures), "CheckpointFailures")

    def _failed(self, link: str, direction: str, error: str, error_class: str) -> None:
        st = dataclasses.replace(self._last.get((link, direction)) or progress.Status(link, direction))
        st.state, st.error, st.error_class = "failed", error, error_class
        self.report(st)

    @contextmanager
    def session(self, name: str) -> Iterator[Manifest]:
        """The manifest `name` under its lock, held until the outermost session of this mover ends (a checkpoint
        write-back runs several passes under one lock)."""
        if name in self._open:
            yield self._open[name]
            return
        base, scope = name.rsplit(".", 1)
        legacy = [self.state_dir / f"{base}.{d}.manifest.json" for d in _LEGACY[scope]]
        with lock.hold(self.state_dir / f"{name}.lock", name, self.lock_wait_s), \
                Manifest(self.state_dir, name, legacy=legacy) as m:
            self._open[name] = m
            try:
                yield m
            finally:
                del self._open[name]

    @contextmanager
    def status(self, link: str, direction: str) -> Iterator[progress.Status]:
        """The pass's status, written now; whatever ends the pass, it ends terminal (failed with the error's
        class where an exception did)."""
        st = progress.Status(link, direction, state="listing")
        self.report(st)
        try:
            yield st
        except BaseException as exc:
            st.state, st.error_class = "failed", lake.error_class(exc)
            st.error = redact(f"{st.error_class}: {exc}")
            raise
        finally:
            if st.state not in ("done", "failed"):
                st.state, st.error, st.error_class = "failed", "the pass ended without a verdict", "Interrupted"
            self.report(st)

    def stage(self, job: LinkJob, metadata_only: bool = False, scope: str = "link") -> PassResult:
        """Import: bring every selected object of the link that the fast tier lacks (or that changed). `scope`
        "checkpoint": a restore, recorded in the checkpoint root's manifest."""
        direction = "restore" if scope == "checkpoint" else "import"
        with self.session(f"{job.name}.{scope}") as manifest, self.status(job.name, direction) as st:
            return stage_pass(self, job, manifest, st, metadata_only)

    def export(self, job: LinkJob, files: Sequence[str] | None = None, direction: str = "export",
               extra: Sequence[str] = ()) -> PassResult:
        """Export: upload every selected local file that is new or changed since its last verified move.
        `files`: exactly these paths (relative to job.local), no walk and no deletions (a checkpoint's)."""
        scope = "checkpoint" if direction == "checkpoint" else "link"
        with self.session(f"{job.name}.{scope}") as manifest, self.status(job.name, direction) as st:
            return export_pass(self, job, manifest, st, files=files, extra=extra)

    def verified(self, name: str, root: Path, files: Sequence[str]) -> bool:
        """Whether every file (a checkpoint's) is recorded as verified in the lake with its current size and
        mtime."""
        stats = {rel: lstat(root / rel) for rel in files}
        if any(st is None for st in stats.values()):
            return False
        keys = {rel: object_key(rel, st) for rel, st in stats.items() if st is not None}
        with self.session(f"{name}.checkpoint") as m:
            entries = m.get_many(keys.values())
        return all(clean_local(stats[rel], entries.get(key)) for rel, key in keys.items())


#: The JSON manifests of earlier versions that a manifest reads in on first use, by scope.
_LEGACY = {"link": ("import", "export"), "checkpoint": ("checkpoint",)}
