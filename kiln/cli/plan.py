"""`kiln validate`, `kiln plan` and `kiln inventory`: a stack's spec, its plan, and the inventory the roles read."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from kiln.cli.common import EXIT_OK, EXIT_SPEC, add_stack, load, result, result_parts, write_files
from kiln.plan.bulk import cyclic_gc_paused
from kiln.plan.serialize import plan_json, plan_to_dict
from kiln.render.inventory import render_inventory
from kiln.render.report import render_plan

log = logging.getLogger(__name__)


def cmd_validate(args: argparse.Namespace) -> int:
    """Errors stop the plan (exit 2, from load); warnings are printed, and with --fail-on warning fail too (exit 2)."""
    _, plan = load(args.stack, args.stacks_dir)
    for w in plan.warnings:
        log.warning("%s", w.line())
    shape = (f"{len(plan.hosts)} hosts, {plan.sizing.gpus_total} GPUs, "
             f"{sum(1 for t in plan.lustre_targets if t.kind == 'ost')} OSTs")
    if args.fail_on == "warning" and plan.warnings:
        n = len(plan.warnings)
        result(f"{args.stack}: spec has {n} warning{'s' if n != 1 else ''}, which --fail-on warning fails ({shape})")
        return EXIT_SPEC
    result(f"{args.stack}: spec is valid ({shape})")
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    if args.json and args.indent is None:
        # One line by default, written a chunk of hosts at a time without the intermediate dictionaries, and a
        # 100,000-node plan is never one string; the collector stays paused from the plan to the last byte.
        with cyclic_gc_paused():
            _, plan = load(args.stack, args.stacks_dir)
            result_parts(plan_json(plan, include_hosts=not args.no_hosts))
        return EXIT_OK
    _, plan = load(args.stack, args.stacks_dir)
    if args.json:
        result(json.dumps(plan_to_dict(plan, include_hosts=not args.no_hosts), indent=args.indent))
    else:
        result(render_plan(plan, args.format, summary_only=args.summary))
    return EXIT_OK


def cmd_inventory(args: argparse.Namespace) -> int:
    _, plan = load(args.stack, args.stacks_dir)
    files = render_inventory(plan)
    out = Path(args.out) if args.out else Path("inventory") / plan.stack
    write_files(out, files)
    result(
        f"wrote {len(files)} files to {out}/ "
        f"(next: kiln deploy {args.stack} --inventory {out}; it runs this kiln's kiln.cluster playbooks)"
    )
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser],
             parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    p = sub.add_parser("validate", parents=list(parents),
                       help="validate a stack's spec (exit 2 with the field path and the fix)")
    add_stack(p)
    p.add_argument("--fail-on", choices=("error", "warning"), default="error",
                   help="the least severity that fails validation (exit 2): error (default) or warning, for CI that "
                   "takes no warning")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("plan", parents=list(parents),
                       help="the plan: a one-screen summary, then layers, capacity, checkpoint, tuning, targets")
    add_stack(p)
    p.add_argument("--summary", action="store_true", help="print only the one-screen summary")
    p.add_argument("--format", choices=("text", "md", "html"), default="text",
                   help="report format: text (default), md (Markdown) or html; md and html chart the layer limits")
    p.add_argument("--json", action="store_true", help="machine-readable plan (schema kiln.plan/v2, docs/plan-json.md)")
    p.add_argument("--no-hosts", action="store_true", help="leave the per-host list out of --json")
    p.add_argument("--indent", type=int, default=None, help="indent --json output (default: one line; or pipe to jq)")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("inventory", parents=list(parents),
                       help="write the Ansible inventory, group_vars and host_vars the roles consume")
    add_stack(p)
    p.add_argument("--out", help="output directory (default inventory/<stack>)")
    p.set_defaults(func=cmd_inventory)
