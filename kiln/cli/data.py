"""`kiln data`: stage a link in, export a link or the checkpoints back, show progress and lag.

Meant for a Slurm prolog (stage job N+1's data while job N trains) and epilog (export), or a timer:

  kiln data stage <stack> <link>        # import the link's selected objects the fast tier lacks
  kiln data export <stack> <link>       # write new or changed files of the link back to the lake
  kiln data export <stack> --checkpoints  # write committed checkpoints back, release all but the newest K
  kiln data restore <stack> --latest    # the newest complete checkpoint: on the fast tier, else from the lake
  kiln data run <stack> [--once] [--metrics-port N]  # the service loop: continuous links, checkpoint write-back
  kiln data status [--json]             # progress and lag of every link on this host

The S3 secret comes from $KILN_S3_SECRET_KEY (never argv). Exit 0 only when every moved file is verified.
One mover at a time per link: a second waits --lock-wait seconds for the first, then exits 1 naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kiln.cli.common import EXIT_FAIL, EXIT_OK, add_stack, load, result
from kiln.dataflow import progress, service
from kiln.dataflow.service import STATE_DIR, TEXTFILE_DIR, Follow, Site


def _stop_on_sigterm() -> None:
    """SIGTERM (systemd stopping the unit, a Job's deadline) ends a pass as an exception would: its status file
    says failed, rclone is stopped, the link's lock released."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def _site(args: argparse.Namespace) -> Site:
    _stop_on_sigterm()
    return Site(
        state_dir=Path(args.state_dir),
        mount_point=Path(args.mount_point) if args.mount_point else None,
        endpoint=args.endpoint,
        concurrency=args.concurrency,
        textfile_dir=Path(args.textfile_dir) if args.textfile_dir else None,
        lock_wait_s=args.lock_wait,
    )


def _moved(doc: dict[str, Any]) -> int:
    result(json.dumps(doc))
    return EXIT_FAIL if doc["failed"] or doc.get("errors") else EXIT_OK


def cmd_stage(args: argparse.Namespace) -> int:
    _, plan = load(args.stack, args.stacks_dir)
    return _moved(service.stage(plan, _site(args), args.link, metadata_only=args.metadata_only))


def cmd_export(args: argparse.Namespace) -> int:
    _, plan = load(args.stack, args.stacks_dir)
    if args.checkpoints:
        return _moved(service.export_committed_checkpoints(plan, _site(args)))
    return _moved(service.export(plan, _site(args), args.link))


def cmd_restore(args: argparse.Namespace) -> int:
    _, plan = load(args.stack, args.stacks_dir)
    doc = service.restore(plan, _site(args))
    result(json.dumps(doc))
    return EXIT_OK if doc["checkpoint"] else EXIT_FAIL


def cmd_run(args: argparse.Namespace) -> int:
    _, plan = load(args.stack, args.stacks_dir)
    failed = service.run(plan, _site(args), once=args.once, metrics_port=args.metrics_port)
    return EXIT_FAIL if failed else EXIT_OK


def cmd_models(args: argparse.Namespace) -> int:
    _, plan = load(args.stack, args.stacks_dir)
    how = Follow(index=args.index, filer=args.filer, relay=Path(args.relay), weed=args.weed,
                 targets=[Path(t) for t in args.target], time_ago=args.time_ago)
    service.follow_models(plan, _site(args), how, lambda doc: result(json.dumps(doc)))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    rows = progress.read_all(Path(args.state_dir))
    result(json.dumps(rows, indent=1) if args.json else service.status_table(rows))
    return EXIT_OK


def _state_dir(q: argparse.ArgumentParser) -> None:
    q.add_argument(
        "--state-dir",
        default=os.environ.get("KILN_DATA_STATE_DIR", STATE_DIR),
        help=f"manifests and status files (default $KILN_DATA_STATE_DIR or {STATE_DIR})",
    )


def _moving(q: argparse.ArgumentParser) -> None:
    add_stack(q)
    _state_dir(q)
    q.add_argument("--endpoint", help="S3 endpoint (default the plan's objectstore endpoint)")
    q.add_argument("--mount-point", help="directory standing in for the Lustre mount point (the lab's fast tier)")
    q.add_argument("--concurrency", type=int, help="parallel transfers (default the plan's)")
    q.add_argument(
        "--textfile-dir",
        default=os.environ.get("KILN_DATA_TEXTFILE_DIR"),
        help=f"write Prometheus textfile metrics here (e.g. {TEXTFILE_DIR})",
    )
    q.add_argument("--lock-wait", type=float, default=600.0, metavar="SECONDS",
                   help="wait this long for another mover holding the same link, then exit 1 naming it (default 600)")


def _add_stage_export(dsub: argparse._SubParsersAction[argparse.ArgumentParser],
                      parents: list[argparse.ArgumentParser]) -> None:
    q = dsub.add_parser("stage", parents=parents, help="import a link's objects to the fast tier")
    _moving(q)
    q.add_argument("link", help="link name (dataflow.links[].name)")
    q.add_argument("--metadata-only", action="store_true", help="list and report the backlog, move nothing")
    q.set_defaults(func=cmd_stage)
    q = dsub.add_parser("export", parents=parents, help="write a link or the checkpoints back to the lake")
    _moving(q)
    q.add_argument("link", nargs="?", help="link name (or --checkpoints)")
    q.add_argument("--checkpoints", action="store_true", help="committed checkpoints; release all but the newest K")
    q.set_defaults(func=cmd_export)
    q = dsub.add_parser("restore", parents=parents,
                        help="the newest checkpoint whose marker and every file verify: fast tier first, lake second")
    _moving(q)
    q.add_argument("--latest", action="store_true", required=True,
                   help="the newest complete checkpoint (the only choice so far)")
    q.set_defaults(func=cmd_restore)


def _add_run_models(dsub: argparse._SubParsersAction[argparse.ArgumentParser],
                    parents: list[argparse.ArgumentParser]) -> None:
    q = dsub.add_parser(
        "run", parents=parents,
        help="the mover service: continuous links and checkpoint write-back every dataflow.movers.poll_s",
    )
    _moving(q)
    q.add_argument("--once", action="store_true", help="one cycle, then exit (1 if anything failed)")
    q.add_argument(
        "--metrics-port", type=int, default=0,
        help="serve the metrics of every status file in --state-dir over HTTP on this port "
        "(the textfile's names and labels; 0 = off, the default)",
    )
    q.set_defaults(func=cmd_run)
    q = dsub.add_parser(
        "models", parents=parents,
        help="push new model objects to the fast tier as the "
        "lake announces them (SeaweedFS filer subscription); runs until stopped",
    )
    _moving(q)
    q.add_argument("--index", type=int, default=0, help="which dataflow.models entry (default 0)")
    q.add_argument("--filer", required=True, help="SeaweedFS filer host:port")
    q.add_argument("--weed", help="weed binary (default: weed on PATH)")
    q.add_argument("--relay", required=True, help="relay directory on the shared fast tier (Lustre)")
    q.add_argument("--target", action="append", default=[], help="receiver directory (default the plan's targets)")
    q.add_argument("--time-ago", default="0s", help="also replay events this far back (e.g. 1h) after a restart")
    q.set_defaults(func=cmd_models)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser],
             parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    p = sub.add_parser(
        "data",
        parents=list(parents),
        help="move data between the lake and the fast tier (stage, export, status)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dsub = p.add_subparsers(dest="data_command", required=True)
    _add_stage_export(dsub, list(parents))
    _add_run_models(dsub, list(parents))
    q = dsub.add_parser("status", parents=list(parents), help="progress and lag of every link on this host")
    _state_dir(q)
    q.add_argument("--json", action="store_true", help="one JSON object per link and direction")
    q.set_defaults(func=cmd_status)
