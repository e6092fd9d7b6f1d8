"""`kiln lab up|down|status`: needs a kiln checkout (ansible/, roles/, scripts/); see kiln.lab.lifecycle."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from kiln.cli.common import EXIT_FAIL, EXIT_OK, result
from kiln.lab.lifecycle import STEPS, Lab, LabError
from kiln.lab.podman import PodmanError

log = logging.getLogger(__name__)


def cmd_lab(args: argparse.Namespace) -> int:
    try:
        lab = Lab.load(args.stack, args.stacks_dir)
        if args.action == "up":
            return lab.up(skip_prepare=args.skip_prepare, only=args.only, steps=args.steps)
        if args.action == "down":
            lab.down()
            return EXIT_OK
        for kind, rows in lab.status().items():
            result(f"{kind}: {len(rows)}")
            for row in rows:
                result(f"  {row}")
        return EXIT_OK
    except (LabError, PodmanError) as exc:
        log.error("%s", exc)
        return EXIT_FAIL


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser],
             parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    p = sub.add_parser(
        "lab", parents=list(parents),
        help="the local podman lab of a stack: up (deploy, configure, verify), down, status; run in a kiln checkout "
        "(or set KILN_CHECKOUT=DIR)",
    )
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--stack", default="lab", help="stack to run as a lab, a name or a path (default: lab; names "
                   "resolve against the checkout's stacks/ unless --stacks-dir or KILN_STACKS_DIR is given)")
    p.add_argument("--skip-prepare", action="store_true", help="skip host packages, image and tool builds")
    p.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), metavar="STEP",
                   help=f"run only these steps of `up`, in their order ({', '.join(STEPS)}; default: all); e.g. "
                   "`--steps prepare hosts inventory` for hosts that `kiln deploy` then configures")
    p.add_argument("--only", nargs="+", metavar="CHECK", default=None,
                   help="verify only these checks (ids, prefixes or globs, as `kiln verify --only`; default: all)")
    p.set_defaults(func=cmd_lab)
