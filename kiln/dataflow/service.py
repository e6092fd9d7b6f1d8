"""What `kiln data` does on one host for a stack's plan: stage a link in, export a link or the checkpoints
back, the service loop, model distribution, and the status table.

The CLI (kiln/cli/data.py) parses arguments, calls these and prints what they return. The S3 secret comes
from $KILN_S3_SECRET_KEY (never argv); $KILN_S3_ACCESS_KEY (the rendered pods set it from the S3 Secret)
overrides the plan's access key id.
"""

from __future__ import annotations

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
from kiln.dataflow.lake import Credentials
from kiln.dataflow.model_distribution import distribute, follow
from kiln.dataflow.mover import CheckpointResult, LinkJob, Mover, export_checkpoints
from kiln.plan.model import CheckpointFlowPlan, DataflowPlan, DataLinkPlan, Plan

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
    environment."""
    secret = os.environ.get("KILN_S3_SECRET_KEY")
    if not secret:
        raise DataError(
            f"KILN_S3_SECRET_KEY is not set; fix: export the S3 secret of {plan.objectstore.access_key_id} "
            "(the datamover service reads it from its credentials file)"
        )
    flow = dataflow(plan)
    access = os.environ.get("KILN_S3_ACCESS_KEY") or plan.objectstore.access_key_id
    creds = Credentials(endpoint=site.endpoint or plan.objectstore.endpoint, access_key_id=access, secret_key=secret)
    tuning = engine.Tuning(concurrency=site.concurrency or flow.concurrency, part_size_MiB=flow.part_size_MiB)
    return Mover(creds, site.state_dir, tuning, site.textfile_dir)


def _job(plan: Plan, link: DataLinkPlan, mount_point: Path | None) -> LinkJob:
    return LinkJob(name=link.name, bucket=link.bucket, prefix=link.prefix,
                   local=local_dir(plan, link.mount_path, mount_point), include=link.include, exclude=link.exclude)


def _metadata_only(link: DataLinkPlan) -> bool:
    return link.import_policy in ("metadata", "on-access")


def stage(plan: Plan, site: Site, link_name: str, *, metadata_only: bool = False) -> dict[str, Any]:
    """Import the link's selected objects the fast tier lacks; the JSON document `kiln data stage` prints."""
    flow = dataflow(plan)
    link = next((x for x in flow.links if x.name == link_name), None)
    if link is None:
        names = ", ".join(x.name for x in flow.links)
        raise DataError(f"no link {link_name!r} in {plan.stack}; fix: use one of {names}")
    metadata_only = metadata_only or _metadata_only(link)
    res = mover_for(plan, site).stage(_job(plan, link, site.mount_point), metadata_only=metadata_only)
    return {
        "link": link.name,
        "bytes_moved": res.bytes_moved,
        "files_moved": res.files_moved,
        "files_verified": res.files_verified,
        "files_selected": res.files_selected,
        "seconds": round(res.seconds, 3),
        "failed": list(res.failed),
        "metadata_only": metadata_only,
    }


def export(plan: Plan, site: Site, link_name: str | None) -> dict[str, Any]:
    """Write a link's new or changed files back to the lake; the JSON document `kiln data export` prints."""
    flow = dataflow(plan)
    m = mover_for(plan, site)
    link = next((x for x in flow.links if x.name == link_name), None)
    if link is None or link.export_policy == "none":
        names = [x.name for x in flow.links if x.export_policy != "none"]
        raise DataError(f"no exportable link {link_name!r}; fix: use one of {names} or set its export_policy")
    res = m.export(_job(plan, link, site.mount_point))
    return {"link": link.name, "bytes_moved": res.bytes_moved, "files_moved": res.files_moved,
            "failed": list(res.failed)}


def _write_back(m: Mover, plan: Plan, ck: CheckpointFlowPlan, mount_point: Path | None) -> CheckpointResult:
    root = local_dir(plan, ck.mount_path, mount_point)
    return export_checkpoints(
        mover=m, name="checkpoints", root=root, bucket=ck.bucket, prefix=ck.prefix, marker=ck.commit_marker,
        keep=ck.keep_resident, release=ck.release_after_verify,
    )


def export_committed_checkpoints(plan: Plan, site: Site) -> dict[str, Any]:
    """Write committed checkpoints back and release all but the newest K; what `kiln data export
    --checkpoints` prints."""
    flow = dataflow(plan)
    m = mover_for(plan, site)
    if flow.checkpoints is None:
        raise DataError(f"stack {plan.stack} declares no dataflow.checkpoints; fix: add the section")
    r = _write_back(m, plan, flow.checkpoints, site.mount_point)
    return {"exported": list(r.exported), "released": list(r.released), "pending": list(r.pending),
            "bytes_moved": r.bytes_moved}


def _continuous(m: Mover, plan: Plan, link: DataLinkPlan, mount_point: Path | None) -> int:
    """One pass of each continuous direction of a link; the number that failed (the next cycle retries)."""
    job = _job(plan, link, mount_point)
    kinds = [k for k, on in (("import", link.import_trigger == "continuous"),
                             ("export", link.export_policy == "continuous")) if on]
    failed = 0
    for kind in kinds:
        try:
            res = m.stage(job, metadata_only=_metadata_only(link)) if kind == "import" else m.export(job)
            failed += bool(res.failed)
        except (engine.EngineError, lake.ListError) as exc:  # the next poll tries again
            failed += 1
            log.error("%s %s: %s", link.name, kind, exc)
    return failed


def cycle(plan: Plan, m: Mover, mount_point: Path | None) -> int:
    """One cycle of the service: continuous links, then checkpoint write-back; the number of failed passes."""
    flow = dataflow(plan)
    failed = sum(_continuous(m, plan, link, mount_point) for link in flow.links)
    if flow.checkpoints is not None:
        try:
            r = _write_back(m, plan, flow.checkpoints, mount_point)
            if r.exported or r.released:
                log.info("checkpoints: exported %s, released %s", list(r.exported), list(r.released))
        except (engine.EngineError, lake.ListError) as exc:
            failed += 1
            log.error("checkpoints: %s", exc)
    return failed


def run(plan: Plan, site: Site, *, once: bool, metrics_port: int = 0) -> int:
    """The service loop: a cycle every dataflow.movers.poll_s; a failed pass is logged and retried on the next
    cycle. With once, one cycle and the number of failed passes; otherwise it runs until stopped."""
    flow = dataflow(plan)
    m = mover_for(plan, site)
    if metrics_port:
        # every status file in the state directory: this loop's and, where the directory is shared (Lustre on
        # Kubernetes), the stage Jobs' and model distribution pods'
        progress.serve(site.state_dir, metrics_port)
        log.info("metrics of %s on :%d/metrics", site.state_dir, metrics_port)
    while True:
        failed = cycle(plan, m, site.mount_point)
        if once:
            return failed
        time.sleep(flow.poll_s)


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
            + (f"  error: {r['error']}" if r["error"] else "")
        )
    return "\n".join(lines)
