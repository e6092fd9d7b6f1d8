"""`kiln data`: stage a link in, export a link or the checkpoints back, show progress and lag.

Meant for a Slurm prolog (stage job N+1's data while job N trains) and epilog (export), or a timer:

  kiln data stage <stack> <link>        # import the link's selected objects the fast tier lacks
  kiln data export <stack> <link>       # write new or changed files of the link back to the lake
  kiln data export <stack> --checkpoints  # write committed checkpoints back, release all but the newest K
  kiln data run <stack> [--once] [--metrics-port N]  # the service loop: continuous links, checkpoint write-back
  kiln data status [--json]             # progress and lag of every link on this host

The S3 secret comes from $KILN_S3_SECRET_KEY (never argv). Exit 0 only when every moved file is verified.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from kiln.dataflow import engine, lake, progress
from kiln.dataflow.lake import Credentials
from kiln.dataflow.mover import LinkJob, Mover, export_checkpoints
from kiln.plan.model import DataflowPlan, Plan

STATE_DIR = "/var/lib/kiln-datamover"
TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"


class DataError(RuntimeError):
    pass


def _flow(plan: Plan) -> DataflowPlan:
    if plan.dataflow is None:
        raise DataError(f"stack {plan.stack} has no dataflow section; fix: add one (docs/dataflow.md)")
    return plan.dataflow


def _local(plan: Plan, mount_path: str, mount_point: str | None) -> Path:
    """The link's directory on this host; --mount-point stands a plain directory in for the Lustre mount."""
    if mount_point is None:
        return Path(mount_path)
    return Path(mount_point) / Path(mount_path).relative_to(plan.mount_point)


def _mover(plan: Plan, args: argparse.Namespace) -> Mover:
    secret = os.environ.get("KILN_S3_SECRET_KEY")
    if not secret:
        raise DataError(
            f"KILN_S3_SECRET_KEY is not set; fix: export the S3 secret of {plan.objectstore.access_key_id} "
            "(the datamover service reads it from its credentials file)"
        )
    flow = _flow(plan)
    # $KILN_S3_ACCESS_KEY (the rendered pods set it from the S3 Secret) overrides the plan's access key id.
    access = os.environ.get("KILN_S3_ACCESS_KEY") or plan.objectstore.access_key_id
    creds = Credentials(args.endpoint or plan.objectstore.endpoint, access, secret)
    tuning = engine.Tuning(args.concurrency or flow.concurrency, flow.part_size_MiB)
    textfile = Path(args.textfile_dir) if args.textfile_dir else None
    return Mover(creds, Path(args.state_dir), tuning, textfile)


def cmd_stage(args: argparse.Namespace) -> int:
    from kiln.cli import EXIT_FAIL, EXIT_OK, load

    _, plan = load(args.stack, args.stacks_dir)
    flow = _flow(plan)
    link = next((x for x in flow.links if x.name == args.link), None)
    if link is None:
        names = ", ".join(x.name for x in flow.links)
        raise DataError(f"no link {args.link!r} in {plan.stack}; fix: use one of {names}")
    metadata_only = args.metadata_only or link.import_policy in ("metadata", "on-access")
    job = LinkJob(
        name=link.name, bucket=link.bucket, prefix=link.prefix, local=_local(plan, link.mount_path, args.mount_point),
        include=link.include, exclude=link.exclude,
    )
    res = _mover(plan, args).stage(job, metadata_only=metadata_only)
    print(
        json.dumps(
            {
                "link": link.name,
                "bytes_moved": res.bytes_moved,
                "files_moved": res.files_moved,
                "files_verified": res.files_verified,
                "files_selected": res.files_selected,
                "seconds": round(res.seconds, 3),
                "failed": list(res.failed),
                "metadata_only": metadata_only,
            }
        )
    )
    return EXIT_FAIL if res.failed else EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from kiln.cli import EXIT_FAIL, EXIT_OK, load

    _, plan = load(args.stack, args.stacks_dir)
    flow = _flow(plan)
    mover = _mover(plan, args)
    if args.checkpoints:
        ck = flow.checkpoints
        if ck is None:
            raise DataError(f"stack {plan.stack} declares no dataflow.checkpoints; fix: add the section")
        root = _local(plan, ck.mount_path, args.mount_point)
        r = export_checkpoints(
            mover=mover,
            name="checkpoints",
            root=root,
            bucket=ck.bucket,
            prefix=ck.prefix,
            marker=ck.commit_marker,
            keep=ck.keep_resident,
            release=ck.release_after_verify,
        )
        print(
            json.dumps(
                {
                    "exported": list(r.exported),
                    "released": list(r.released),
                    "pending": list(r.pending),
                    "bytes_moved": r.bytes_moved,
                }
            )
        )
        return EXIT_OK
    link = next((x for x in flow.links if x.name == args.link), None)
    if link is None or link.export_policy == "none":
        names = [x.name for x in flow.links if x.export_policy != "none"]
        raise DataError(f"no exportable link {args.link!r}; fix: use one of {names} or set its export_policy")
    job = LinkJob(
        name=link.name, bucket=link.bucket, prefix=link.prefix, local=_local(plan, link.mount_path, args.mount_point),
        include=link.include, exclude=link.exclude,
    )
    res = mover.export(job)
    print(
        json.dumps(
            {
                "link": link.name,
                "bytes_moved": res.bytes_moved,
                "files_moved": res.files_moved,
                "failed": list(res.failed),
            }
        )
    )
    return EXIT_FAIL if res.failed else EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """The service loop: every movers.poll_s, stage continuous links, export continuous links, write back
    checkpoints. A failed pass is logged and retried on the next cycle; --once runs one cycle."""
    import logging

    from kiln.cli import EXIT_FAIL, EXIT_OK, load

    log = logging.getLogger("kiln.dataflow")
    _, plan = load(args.stack, args.stacks_dir)
    flow = _flow(plan)
    mover = _mover(plan, args)
    if args.metrics_port:
        # every status file in the state directory: this loop's and, where the directory is shared (Lustre on
        # Kubernetes), the stage Jobs' and model distribution pods'
        progress.serve(Path(args.state_dir), args.metrics_port)
        log.info("metrics of %s on :%d/metrics", args.state_dir, args.metrics_port)
    while True:
        failed = 0
        for link in flow.links:
            job = LinkJob(
                name=link.name,
                bucket=link.bucket,
                prefix=link.prefix,
                local=_local(plan, link.mount_path, args.mount_point),
                include=link.include,
                exclude=link.exclude,
            )
            metadata_only = link.import_policy in ("metadata", "on-access")
            kinds = [
                k
                for k, on in (
                    ("import", link.import_trigger == "continuous"),
                    ("export", link.export_policy == "continuous"),
                )
                if on
            ]
            for kind in kinds:
                try:
                    res = mover.stage(job, metadata_only=metadata_only) if kind == "import" else mover.export(job)
                    failed += bool(res.failed)
                except (engine.EngineError, lake.ListError) as exc:  # the next poll tries again
                    failed += 1
                    log.error("%s %s: %s", link.name, kind, exc)
        ck = flow.checkpoints
        if ck is not None:
            try:
                r = export_checkpoints(
                    mover=mover,
                    name="checkpoints",
                    root=_local(plan, ck.mount_path, args.mount_point),
                    bucket=ck.bucket,
                    prefix=ck.prefix,
                    marker=ck.commit_marker,
                    keep=ck.keep_resident,
                    release=ck.release_after_verify,
                )
                if r.exported or r.released:
                    log.info("checkpoints: exported %s, released %s", list(r.exported), list(r.released))
            except (engine.EngineError, lake.ListError) as exc:
                failed += 1
                log.error("checkpoints: %s", exc)
        if args.once:
            return EXIT_FAIL if failed else EXIT_OK
        time.sleep(flow.poll_s)


def cmd_models(args: argparse.Namespace) -> int:
    """Follow the lake's change events for dataflow.models[i] and distribute each new object (runs until stopped)."""
    import shutil
    import threading

    from kiln.cli import EXIT_OK, load
    from kiln.dataflow.model_distribution import distribute, follow

    _, plan = load(args.stack, args.stacks_dir)
    flow = _flow(plan)
    if not flow.models:
        raise DataError(f"stack {plan.stack} declares no dataflow.models; fix: add an entry (docs/dataflow.md)")
    if not 0 <= args.index < len(flow.models):
        raise DataError(f"dataflow.models[{args.index}] does not exist; fix: use 0..{len(flow.models) - 1}")
    m = flow.models[args.index]
    if m.events != "filer-subscribe":
        raise DataError(f"dataflow.models[{args.index}].events is {m.events}; fix: run `kiln data stage` on a timer")
    weed = args.weed or shutil.which("weed")
    if not weed:
        raise DataError("no weed binary for the filer subscription; fix: pass --weed PATH or put weed on PATH")
    mover = _mover(plan, args)
    targets = [Path(t) for t in args.target or m.targets or (m.target,)]
    relay = Path(args.relay)

    def on_key(key: str) -> None:
        d = distribute(
            mover=mover, name=f"models{args.index}", bucket=m.bucket, prefix=m.prefix, keys=[key], relay=relay,
            targets=targets,
        )
        print(json.dumps({"key": key, "lake_bytes": d.lake_bytes, "copies": d.copies}), flush=True)

    follow(
        weed=weed, filer=args.filer, bucket=m.bucket, prefix=m.prefix, on_key=on_key, stop=threading.Event(),
        time_ago=args.time_ago,
    )
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from kiln.cli import EXIT_OK

    rows = progress.read_all(Path(args.state_dir))
    if args.json:
        print(json.dumps(rows, indent=1))
        return EXIT_OK
    print(
        f"{'link':<16} {'direction':<10} {'state':<12} {'done':>14} {'backlog':>14} {'rate MB/s':>9} "
        f"{'eta s':>7} {'lag s':>7} updated"
    )
    for r in rows:
        done = f"{r['files_done']}/{r['files_total']} files"
        eta = "-" if r["eta_s"] is None else f"{r['eta_s']:.0f}"
        print(
            f"{r['link']:<16} {r['direction']:<10} {r['state']:<12} {done:>14} {r['backlog_bytes'] / 1e6:>11.1f} MB "
            f"{r['rate_Bps'] / 1e6:>9.1f} {eta:>7} {r['lag_s']:>7.0f} {time.ctime(r['updated'])}"
            + (f"  error: {r['error']}" if r["error"] else "")
        )
    return EXIT_OK


def register(sub: argparse._SubParsersAction, parents: Sequence[argparse.ArgumentParser] = ()) -> None:  # type: ignore[type-arg]
    from kiln.cli import add_stack

    p = sub.add_parser(
        "data",
        parents=list(parents),
        help="move data between the lake and the fast tier (stage, export, status)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dsub = p.add_subparsers(dest="data_command", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument(
            "--state-dir",
            default=os.environ.get("KILN_DATA_STATE_DIR", STATE_DIR),
            help=f"manifests and status files (default $KILN_DATA_STATE_DIR or {STATE_DIR})",
        )

    def moving(q: argparse.ArgumentParser) -> None:
        add_stack(q)
        common(q)
        q.add_argument("--endpoint", help="S3 endpoint (default the plan's objectstore endpoint)")
        q.add_argument("--mount-point", help="directory standing in for the Lustre mount point (the lab's fast tier)")
        q.add_argument("--concurrency", type=int, help="parallel transfers (default the plan's)")
        q.add_argument(
            "--textfile-dir",
            default=os.environ.get("KILN_DATA_TEXTFILE_DIR"),
            help=f"write Prometheus textfile metrics here (e.g. {TEXTFILE_DIR})",
        )

    q = dsub.add_parser("stage", parents=list(parents), help="import a link's objects to the fast tier")
    moving(q)
    q.add_argument("link", help="link name (dataflow.links[].name)")
    q.add_argument("--metadata-only", action="store_true", help="list and report the backlog, move nothing")
    q.set_defaults(func=cmd_stage)
    q = dsub.add_parser("export", parents=list(parents), help="write a link or the checkpoints back to the lake")
    moving(q)
    q.add_argument("link", nargs="?", help="link name (or --checkpoints)")
    q.add_argument("--checkpoints", action="store_true", help="committed checkpoints; release all but the newest K")
    q.set_defaults(func=cmd_export)
    q = dsub.add_parser(
        "run",
        parents=list(parents),
        help="the mover service: continuous links and checkpoint write-back every dataflow.movers.poll_s",
    )
    moving(q)
    q.add_argument("--once", action="store_true", help="one cycle, then exit (1 if anything failed)")
    q.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        help="serve the metrics of every status file in --state-dir over HTTP on this port "
        "(the textfile's names and labels; 0 = off, the default)",
    )
    q.set_defaults(func=cmd_run)
    q = dsub.add_parser(
        "models",
        parents=list(parents),
        help="push new model objects to the fast tier as the "
        "lake announces them (SeaweedFS filer subscription); runs until stopped",
    )
    moving(q)
    q.add_argument("--index", type=int, default=0, help="which dataflow.models entry (default 0)")
    q.add_argument("--filer", required=True, help="SeaweedFS filer host:port")
    q.add_argument("--weed", help="weed binary (default: weed on PATH)")
    q.add_argument("--relay", required=True, help="relay directory on the shared fast tier (Lustre)")
    q.add_argument("--target", action="append", default=[], help="receiver directory (default the plan's targets)")
    q.add_argument("--time-ago", default="0s", help="also replay events this far back (e.g. 1h) after a restart")
    q.set_defaults(func=cmd_models)
    q = dsub.add_parser("status", parents=list(parents), help="progress and lag of every link on this host")
    common(q)
    q.add_argument("--json", action="store_true", help="one JSON object per link and direction")
    q.set_defaults(func=cmd_status)
