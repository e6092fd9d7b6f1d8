"""What `kiln data` does on one host for a stack's plan: stage a link in, export a link or the checkpoints
back, the service loop, model distribution, and the status table.

The CLI (kiln/cli/data.py) parses arguments, calls these and prints what they return. The S3 secret comes
from $KILN_S3_SECRET_KEY (never argv); $KILN_S3_ACCESS_KEY (the rendered pods set it from the S3 Secret)
overrides the plan's access key id.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln.dataflow import engine, lake, progress
from kiln.dataflow.checkpoints import CheckpointResult, Root, export_checkpoints, restore_latest
from kiln.dataflow.keys import escape
from kiln.dataflow.lake import Credentials
from kiln.dataflow.lock import LockBusy
from kiln.dataflow.model_distribution import distribute, follow
from kiln.dataflow.mover import LinkJob, Mover, PassResult
from kiln.plan.model import CheckpointFlowPlan, DataflowPlan, DataLinkPlan, Plan
from kiln.redact import register_secret

STATE_DIR = "/var/lib/kiln-datamover"
TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"

log = logging.getLogger(__name__)


class DataError(RuntimeError):
    """A stack or an environment the mover cannot work with; the message says the fix."""


@dataclass(frozen=True, kw_only=True)
class Site:
    """Where this host's mover works, and what it overrides of the plan."""

    state_dir: Path  # manifests and status files
    mount_point: Path | None = None  # a plain directory standing in for the Lustre mount (the lab's fast tier)
    endpoint: str | None = None  # default: the plan's object-store endpoint
    concurrency: int | None = None  # default: the plan's
    textfile_dir: Path | None = None  # Prometheus textfile metrics, if given
    lock_wait_s: float | None = None  # how long a pass waits for another mover on its link (None: no limit)


def dataflow(plan: Plan) -> DataflowPlan:
    """The plan's dataflow section; DataError when the stack declares none."""
    if plan.dataflow is None:
        raise DataError(f"stack {plan.stack} has no dataflow section; fix: add one (docs/dataflow.md)")
    return plan.dataflow


def local_dir(plan: Plan, mount_path: str, mount_point: Path | None) -> Path:
    """The link's directory on this host; a mount point stands a plain directory in for the Lustre mount."""
    if mount_point is None:
        return Path(mount_path)
    return mount_point / Path(mount_path).relative_to(plan.mount_point)


def mover_for(plan: Plan, site: Site) -> Mover:
    """This host's mover: the plan's endpoint and tuning as the site overrides them, the secret from the
    environment (registered for redaction: it never reaches a log line or a status file)."""
    secret = os.environ.get("KILN_S3_SECRET_KEY")
    if not secret:
        raise DataError(
            f"KILN_S3_SECRET_KEY is not set; fix: export the S3 secret of {plan.objectstore.access_key_id} "
            "(the datamover service reads it from its credentials file)"
        )
    register_secret(secret)
    flow = dataflow(plan)
    access = os.environ.get("KILN_S3_ACCESS_KEY") or plan.objectstore.access_key_id
    creds = Credentials(endpoint=site.endpoint or plan.objectstore.endpoint, access_key_id=access, secret_key=secret)
    tuning = engine.Tuning(concurrency=site.concurrency or flow.concurrency, part_size_MiB=flow.part_size_MiB)
    return Mover(creds, site.state_dir, tuning, site.textfile_dir, lock_wait_s=site.lock_wait_s)


def _job(plan: Plan, link: DataLinkPlan, mount_point: Path | None) -> LinkJob:
    return LinkJob(name=link.name, bucket=link.bucket, prefix=link.prefix,
                   local=local_dir(plan, link.mount_path, mount_point), include=link.include, exclude=link.exclude,
                   conflict=link.conflict, deletions=link.deletions, max_delete_fraction=link.max_delete_fraction,
                   posix_metadata=link.posix_metadata, two_way=link.export_policy != "none")


def _metadata_only(link: DataLinkPlan) -> bool:
    return link.import_policy in ("metadata", "on-access")


def _link(flow: DataflowPlan, plan: Plan, name: str | None) -> DataLinkPlan:
    link = next((x for x in flow.links if x.name == name), None)
    if link is None:
        names = ", ".join(x.name for x in flow.links)
        raise DataError(f"no link {name!r} in {plan.stack}; fix: use one of {names}")
    return link


def outcome(res: PassResult) -> dict[str, Any]:
    """What a pass did, for people and scripts: counts, and each file that failed or was settled, escaped."""
    def listed(pairs: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
        return [{"key": escape(k), "reason": why} for k, why in pairs]

    return {
        "bytes_moved": res.bytes_moved, "files_moved": res.files_moved, "files_verified": res.files_verified,
        "files_selected": res.files_selected, "seconds": round(res.seconds, 3), "failed": listed(res.reasons),
        "conflicts": listed(res.conflicts), "overwritten": [escape(k) for k in res.overwritten],
        "repaired": [escape(k) for k in res.repaired], "deleted": [escape(k) for k in res.deleted],
        "renamed": [[escape(a), escape(b)] for a, b in res.renamed], "errors": list(res.errors),
    }


def stage(plan: Plan, site: Site, link_name: str, *, metadata_only: bool = False) -> dict[str, Any]:
    """Import the link's selected objects the fast tier lacks; the JSON document `kiln data stage` prints."""
    link = _link(dataflow(plan), plan, link_name)
    metadata_only = metadata_only or _metadata_only(link)
    res = mover_for(plan, site).stage(_job(plan, link, site.mount_point), metadata_only=metadata_only)
    return {"link": link.name, **outcome(res), "metadata_only": metadata_only}


def export(plan: Plan, site: Site, link_name: str | None) -> dict[str, Any]:
    """Write a link's new or changed files back to the lake; the JSON document `kiln data export` prints."""
    flow = dataflow(plan)
    m = mover_for(plan, site)
    link = next((x for x in flow.links if x.name == link_name), None)
    if link is None or link.export_policy == "none":
        names = [x.name for x in flow.links if x.export_policy != "none"]
        raise DataError(f"no exportable link {link_name!r}; fix: use one of {names} or set its export_policy")
    return {"link": link.name, **outcome(m.export(_job(plan, link, site.mount_point)))}


def _root(plan: Plan, ck: CheckpointFlowPlan, mount_point: Path | None) -> Root:
    return Root(name="checkpoints", root=local_dir(plan, ck.mount_path, mount_point), bucket=ck.bucket,
                prefix=ck.prefix, marker=ck.commit_marker)


def _checkpoints(plan: Plan) -> CheckpointFlowPlan:
    ck = dataflow(plan).checkpoints
    if ck is None:
        raise DataError(f"stack {plan.stack} declares no dataflow.checkpoints; fix: add the section")
    return ck


def _write_back(m: Mover, plan: Plan, ck: CheckpointFlowPlan, mount_point: Path | None) -> CheckpointResult:
    return export_checkpoints(m, _root(plan, ck, mount_point), keep=ck.keep_resident,
                              release=ck.release_after_verify)


def export_committed_checkpoints(plan: Plan, site: Site) -> dict[str, Any]:
    """Write committed checkpoints back and release all but the newest K; what `kiln data export
    --checkpoints` prints."""
    ck = _checkpoints(plan)
    r = _write_back(mover_for(plan, site), plan, ck, site.mount_point)
    return {"exported": list(r.exported), "released": list(r.released), "pending": list(r.pending),
            "bytes_moved": r.bytes_moved, "failed": [{"checkpoint": n, "reason": w} for n, w in r.failed]}


def restore(plan: Plan, site: Site) -> dict[str, Any]:
    """The newest checkpoint complete in the lake, on the fast tier (staged from the lake where the fast tier does
    not hold it verified); what `kiln data restore --latest` prints."""
    ck = _checkpoints(plan)
    return restore_latest(mover_for(plan, site), _root(plan, ck, site.mount_point))


def _continuous(m: Mover, plan: Plan, link: DataLinkPlan, mount_point: Path | None) -> int:
    """One pass of each continuous direction of a link, import first; the number that failed (the next cycle
    retries)."""
    job = _job(plan, link, mount_point)
    failed = 0
    if link.import_trigger == "continuous":
        failed += _guarded(f"{link.name} import", lambda: m.stage(job, metadata_only=_metadata_only(link)).ok)
    if link.export_policy == "continuous":
        failed += _guarded(f"{link.name} export", lambda: m.export(job).ok)
    return failed


def _guarded(what: str, one_pass: Callable[[], bool]) -> int:
    """Run one pass; 1 if it failed (whatever it raised: the loop goes on, the status file says why), else 0. A
    link another mover holds is skipped this cycle, not failed."""
    try:
        return 0 if one_pass() else 1
    except LockBusy as exc:
        log.info("%s: skipped this cycle: %s", what, exc)
        return 0
    except Exception as exc:
        log.error("%s: %s: %s", what, lake.error_class(exc), exc)
        return 1


def cycle(plan: Plan, m: Mover, mount_point: Path | None) -> int:
    """One cycle of the service: continuous links, then checkpoint write-back; the number of failed passes."""
    flow = dataflow(plan)
    failed = sum(_continuous(m, plan, link, mount_point) for link in flow.links)
    ck = flow.checkpoints
    if ck is not None:
        def write_back() -> bool:
            assert ck is not None
            r = _write_back(m, plan, ck, mount_point)
            if r.exported or r.released:
                log.info("checkpoints: exported %s, released %s", list(r.exported), list(r.released))
            return not r.failed
        failed += _guarded("checkpoints", write_back)
    return failed


#: The longest wait between cycles after failures, in poll intervals.
BACKOFF_MAX = 8


def backoff_s(poll_s: float, failed_cycles: int) -> float:
    """Seconds to the next cycle: poll_s, doubled after each cycle in a row that failed, at most BACKOFF_MAX × poll_s
    (a lake outage is not hammered; a recovered lake is found within that)."""
    return poll_s * min(2 ** failed_cycles, BACKOFF_MAX) if failed_cycles else poll_s


def run(plan: Plan, site: Site, *, once: bool, metrics_port: int = 0,
        sleep: Callable[[float], None] = time.sleep) -> int:
    """The service loop: a cycle every dataflow.movers.poll_s, backing off while cycles fail; a failed pass is
    logged, its status file says why, and the next cycle retries. With once, one cycle and the number of failed
    passes; otherwise it runs until stopped."""
    flow = dataflow(plan)
    m = mover_for(plan, dataclasses.replace(site, lock_wait_s=0))  # a link another mover holds waits a cycle
    if metrics_port:
        # every status file in the state directory: this loop's and, where the directory is shared (Lustre on
        # Kubernetes), the stage Jobs' and model distribution pods'
        progress.serve(site.state_dir, metrics_port)
        log.info("metrics of %s on :%d/metrics", site.state_dir, metrics_port)
    streak = 0
    while True:
        failed = cycle(plan, m, site.mount_point)
        if once:
            return failed
        streak = streak + 1 if failed else 0
        sleep(backoff_s(flow.poll_s, streak))


@dataclass(frozen=True, kw_only=True)
class Follow:
    """How `kiln data models` follows the lake: which dataflow.models entry, the filer, the relay."""

    index: int
    filer: str  # SeaweedFS filer host:port
    relay: Path  # relay directory on the shared fast tier
    weed: str | None = None  # default: weed on PATH
    targets: Sequence[Path] = ()  # default: the plan's
    time_ago: str = "0s"  # replay events this far back after a restart


def follow_models(plan: Plan, site: Site, how: Follow, report: Callable[[dict[str, Any]], None]) -> None:
    """Follow the lake's change events for dataflow.models[i] and distribute each new object, calling report
    with what was copied; runs until stopped."""
    flow = dataflow(plan)
    if not flow.models:
        raise DataError(f"stack {plan.stack} declares no dataflow.models; fix: add an entry (docs/dataflow.md)")
    if not 0 <= how.index < len(flow.models):
        raise DataError(f"dataflow.models[{how.index}] does not exist; fix: use 0..{len(flow.models) - 1}")
    mf = flow.models[how.index]
    if mf.events != "filer-subscribe":
        raise DataError(f"dataflow.models[{how.index}].events is {mf.events}; fix: run `kiln data stage` on a timer")
    weed = how.weed or shutil.which("weed")
    if not weed:
        raise DataError("no weed binary for the filer subscription; fix: pass --weed PATH or put weed on PATH")
    m = mover_for(plan, site)
    targets = list(how.targets) or [Path(t) for t in mf.targets or (mf.target,)]

    def on_key(key: str) -> None:
        d = distribute(
            mover=m, name=f"models{how.index}", bucket=mf.bucket, prefix=mf.prefix, keys=[key], relay=how.relay,
            targets=targets,
        )
        report({"key": key, "lake_bytes": d.lake_bytes, "copies": d.copies})

    follow(
        weed=weed, filer=how.filer, bucket=mf.bucket, prefix=mf.prefix, on_key=on_key, stop=threading.Event(),
        time_ago=how.time_ago,
    )


def status_table(rows: Sequence[dict[str, Any]]) -> str:
    """Progress and lag of every link and direction (progress.read_all's rows), one line each under a header."""
    lines = [
        f"{'link':<16} {'direction':<10} {'state':<12} {'done':>14} {'backlog':>14} {'rate MB/s':>9} "
        f"{'eta s':>7} {'lag s':>7} updated"
    ]
    for r in rows:
        done = f"{r['files_done']}/{r['files_total']} files"
        eta = "-" if r["eta_s"] is None else f"{r['eta_s']:.0f}"
        lines.append(
            f"{r['link']:<16} {r['direction']:<10} {r['state']:<12} {done:>14} {r['backlog_bytes'] / 1e6:>11.1f} MB "
            f"{r['rate_Bps'] / 1e6:>9.1f} {eta:>7} {r['lag_s']:>7.0f} {time.ctime(r['updated'])}"
            + (f"  error: {r.get('error_class') or 'error'}: {r['error']}" if r["error"] else "")
        )
    return "\n".join(lines)
