"""`kiln deploy <stack>`: configure the stack's hosts with the playbooks of the kiln.cluster collection this kiln
carries (`ansible-playbook kiln.cluster.site`), after a pre-flight; kiln.deploy does the work.

Without --inventory the inventory is written from the current spec to inventory/<stack>/ first (as `kiln
inventory` does); with --inventory DIR that directory is used and refused when it is not the current plan's.
Everything after `--` goes to ansible-playbook unchanged (connection options also to the pre-flight's reachability
check). The run's whole output goes to a log file; the terminal shows each play's outcome per host and a summary.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from kiln.cli.common import EXIT_FAIL, EXIT_OK, EXIT_SPEC, add_stack, load, result, write_files
from kiln.deploy import PLAYBOOKS, Deployment
from kiln.deploy.collection import DeployToolError
from kiln.deploy.preflight import fixes
from kiln.render.inventory import render_inventory

log = logging.getLogger(__name__)


def cmd_deploy(args: argparse.Namespace) -> int:
    _, plan = load(args.stack, args.stacks_dir)
    inventory = Path(args.inventory) if args.inventory else Path("inventory") / plan.stack
    if not args.inventory:
        files = render_inventory(plan)
        write_files(inventory, files)
        result(f"inventory: wrote {len(files)} files to {inventory}/ (plan {plan.spec_digest})")
    run = Deployment(plan=plan, stack=args.stack, inventory=inventory, playbook=args.playbook, limit=args.limit,
                     tags=args.tags, skip_tags=args.skip_tags, check=args.check, diff=args.diff,
                     ansible_args=tuple(args.passthrough), os_check=not args.no_os_check)
    try:
        problems = run.preflight(result)
        if problems:
            for problem in problems:
                log.error("%s", problem.line())
            for fix in fixes(problems):
                log.error("fix: %s", fix)
            log.error("deploy %s: %d pre-flight problem(s); nothing was changed", plan.stack, len(problems))
            return EXIT_SPEC if all(p.check == "inventory" for p in problems) else EXIT_FAIL
        logfile = Path(args.log) if args.log else Path(".kiln") / plan.stack / "logs" / _log_name()
        result(f"ansible-playbook kiln.cluster.{args.playbook}{' --check' if args.check else ''} (log: {logfile})")
        outcome = run.run(logfile, result)
    except DeployToolError as exc:
        log.error("%s", exc)
        return EXIT_FAIL
    for line in outcome.summary():
        result(line)
    if outcome.returncode != 0:
        log.error("deploy %s: ansible-playbook exited %d; the log has every task: %s", plan.stack,
                  outcome.returncode, outcome.log)
        return EXIT_FAIL
    return EXIT_OK


def _log_name() -> str:
    return f"deploy-{time.strftime('%Y%m%dT%H%M%S')}.log"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser],
             parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    p = sub.add_parser(
        "deploy", parents=list(parents),
        help="configure the stack's hosts with the kiln.cluster playbooks (pre-flight, progress, summary)",
        description="Writes the inventory from the current spec (or checks --inventory against it), checks that every "
        "host of the run is reachable and runs a supported OS, then runs ansible-playbook kiln.cluster.<playbook>. "
        "Arguments after -- go to ansible-playbook: kiln deploy prod -- -e @site-vars.yml --private-key KEY.",
    )
    add_stack(p)
    p.add_argument("--playbook", choices=PLAYBOOKS, default="site",
                   help="site: the whole cluster (default); storage: Lustre servers, layouts; compute: compute nodes")
    p.add_argument("--inventory", metavar="DIR",
                   help="use this inventory (written by `kiln inventory`) instead of writing inventory/<stack>/; "
                   "refused unless it is the current spec's plan")
    p.add_argument("--limit", metavar="PATTERN", help="only these hosts or groups (ansible-playbook --limit)")
    p.add_argument("--tags", metavar="TAGS", help="only these roles or steps (docs/playbooks.md lists the tags)")
    p.add_argument("--skip-tags", metavar="TAGS", help="skip these tags")
    p.add_argument("--check", action="store_true", help="change nothing; report what would change")
    p.add_argument("--diff", action="store_true", help="show the changes to files (the log has them)")
    p.add_argument("--no-os-check", action="store_true",
                   help="run on hosts whose operating system the roles do not support (unsupported)")
    p.add_argument("--log", metavar="FILE", help="where ansible-playbook's output goes "
                   "(default .kiln/<stack>/logs/deploy-<time>.log)")
    p.set_defaults(func=cmd_deploy, passthrough_to="ansible-playbook")
