"""`kiln lab up|down|status`: needs a kiln checkout (ansible/, roles/, scripts/); see kiln.lab.lifecycle."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from kiln.lab.lifecycle import Lab, LabError
from kiln.lab.podman import PodmanError

log = logging.getLogger(__name__)


def _run(args: argparse.Namespace) -> int:
    try:
        lab = Lab.load(args.stack, getattr(args, "stacks_dir", None))
        if args.action == "up":
            return lab.up(skip_prepare=args.skip_prepare, only=args.only)
        if args.action == "down":
            lab.down()
            return 0
        for kind, rows in lab.status().items():
            print(f"{kind}: {len(rows)}")
            for row in rows:
                print(f"  {row}")
        return 0
    except (LabError, PodmanError) as exc:
        log.error("%s", exc)
        return 1


def register(sub: argparse._SubParsersAction, parents: Sequence[argparse.ArgumentParser] = ()) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "lab", parents=list(parents),
        help="the local podman lab of a stack: up (deploy, configure, verify), down, status; run in a kiln checkout "
        "(or set KILN_CHECKOUT=DIR)",
    )
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--stack", default="lab", help="stack to run as a lab, a name or a path (default: lab; names "
                   "resolve against the checkout's stacks/ unless --stacks-dir or KILN_STACKS_DIR is given)")
    p.add_argument("--skip-prepare", action="store_true", help="skip host packages, image and tool builds")
    p.add_argument("--only", nargs="+", metavar="CHECK", default=None,
                   help="verify only these checks (ids, prefixes or globs, as `kiln verify --only`; default: all)")
    p.set_defaults(func=_run)
