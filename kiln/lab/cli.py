"""`kiln lab up|down|status`."""

from __future__ import annotations

import argparse
import sys

from kiln.lab.lifecycle import Lab, LabError
from kiln.lab.podman import PodmanError


def _run(args: argparse.Namespace) -> int:
    try:
        lab = Lab.load(args.stack)
        if args.action == "up":
            return lab.up(skip_prepare=args.skip_prepare)
        if args.action == "down":
            lab.down()
            return 0
        for kind, rows in lab.status().items():
            print(f"{kind}: {len(rows)}")
            for row in rows:
                print(f"  {row}")
        return 0
    except (LabError, PodmanError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("lab", help="the local podman lab of a stack: up (deploy, configure, verify), down, status")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--stack", default="lab", help="stack to run as a lab (default: lab)")
    p.add_argument("--skip-prepare", action="store_true", help="skip host packages, image and tool builds")
    p.set_defaults(func=_run)
