"""`kiln diff`: what the current spec changes on the deployed hosts, each change classified (kiln/plan/changes.py).

The recorded plan is what the last converge wrote beside the inventory (`<inventory>/deployed/<host>.json`, the
record play) or a file: one host's record (/etc/kiln/deployed-plan.json copied off a host) or an object of them by
host name. Exit codes: 0 nothing disruptive (no change, or live changes and additions only), 3 (EXIT_DISRUPTIVE) a
change needs a service restart, client remount, pair failover, host removal or reboot, 4 (EXIT_REFUSED) kiln refuses
a change, 2 a bad spec or no readable record.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kiln.cli.common import EXIT_DISRUPTIVE, EXIT_OK, EXIT_REFUSED, EXIT_SPEC, add_stack, load, result
from kiln.plan.changes import DISRUPTIVE, ORDER, Change, diff_records, worst
from kiln.plan.record import RECORD_SCHEMA, host_records

log = logging.getLogger(__name__)
SHOWN_HOSTS = 4


class RecordError(Exception):
    """The recorded plan cannot be read: the message names the file and the fix."""


def read_records(path: Path) -> dict[str, dict[str, Any]]:
    """Host name → recorded record, from an inventory directory, a `deployed/` directory or one JSON file."""
    if path.is_dir():
        folder = path / "deployed" if (path / "deployed").is_dir() else path
        files = sorted(folder.glob("*.json"))
        if not files:
            raise RecordError(f"{folder}: no recorded host (*.json); fix: converge with `kiln deploy`, whose "
                              "last play writes them, or give --recorded FILE")
        out: dict[str, dict[str, Any]] = {}
        for f in files:
            out.update(_records_in(f))
        return out
    if not path.is_file():
        raise RecordError(f"{path}: not found; fix: give the inventory directory of the last converge or a record "
                          "file (/etc/kiln/deployed-plan.json of a host)")
    return _records_in(path)


def _records_in(path: Path) -> dict[str, dict[str, Any]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: not a readable JSON record ({exc}); fix: restore it from the host's "
                          "/etc/kiln/deployed-plan.json") from None
    records = [doc] if isinstance(doc, dict) and "schema" in doc else list(doc.values()) if isinstance(doc, dict) \
        else []
    bad = [r for r in records if not isinstance(r, dict) or r.get("schema") != RECORD_SCHEMA
           or not isinstance(r.get("settings"), dict) or not isinstance(r.get("host"), str)]
    if not records or bad:
        raise RecordError(f"{path}: not a {RECORD_SCHEMA} host record; fix: give a file the record play wrote")
    return {r["host"]: r for r in records}


def _values(c: Change) -> str:
    if c.setting == "host":
        return f"{'+' if c.old is None else '-'} host ({c.new or c.old})"
    return f"{c.setting}: {json.dumps(c.old)} -> {json.dumps(c.new)}"


def render_text(stack: str, changes: list[Change], recorded: set[str], current: str) -> str:
    """The changes grouped by what changed, most disruptive first, with the hosts each touches."""
    head = f"kiln diff {stack}: recorded plan {', '.join(sorted(recorded))} -> current plan {current}"
    if not changes:
        return f"{head}\nno changes"
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for c in changes:
        groups.setdefault((c.change, _values(c), c.how, c.runbook), []).append(c.host)
    lines = [head]
    for (cls, values, how, runbook), hosts in sorted(groups.items(), key=lambda g: (-ORDER.index(g[0][0]), g[0])):
        shown = ", ".join(hosts[:SHOWN_HOSTS]) + (f", ... ({len(hosts)} hosts)" if len(hosts) > SHOWN_HOSTS else "")
        lines += [f"{cls:<16}{values}", f"{'':16}on {shown}", f"{'':16}{how} ({runbook})"]
    counts = {cls: sum(1 for c in changes if c.change == cls) for cls in ORDER}
    lines.append("changes: " + ", ".join(f"{n} {cls}" for cls, n in counts.items() if n))
    return "\n".join(lines)


def exit_code(changes: list[Change]) -> int:
    top = worst(changes)
    if top == "refused":
        return EXIT_REFUSED
    return EXIT_DISRUPTIVE if top in DISRUPTIVE else EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    _, plan = load(args.stack, args.stacks_dir)
    where = Path(args.recorded) if args.recorded else Path("inventory") / plan.stack
    try:
        recorded = read_records(where)
    except RecordError as exc:
        log.error("%s", exc)
        return EXIT_SPEC
    other = sorted({str(r.get("stack")) for r in recorded.values()} - {plan.stack})
    if other:
        log.error("%s: the recorded plan is of stack %s, not %s; fix: give the record of this stack's converge "
                  "(--recorded inventory/%s)", where, ", ".join(other), plan.stack, plan.stack)
        return EXIT_SPEC
    changes = diff_records(recorded, host_records(plan))
    digests = {str(r.get("plan_digest")) for r in recorded.values()}
    code = exit_code(changes)
    if args.json:
        result(json.dumps({
            "stack": plan.stack, "recorded_plan_digests": sorted(digests), "plan_digest": plan.spec_digest,
            "worst": worst(changes), "exit_code": code, "changes": [asdict(c) for c in changes],
        }, indent=args.indent))
    else:
        result(render_text(plan.stack, changes, digests, plan.spec_digest))
    return code


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser],
             parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    p = sub.add_parser("diff", parents=list(parents),
                       help="what the spec changes on the deployed hosts, classified (exit 3 disruptive, 4 refused)")
    add_stack(p)
    p.add_argument("--recorded", metavar="PATH",
                   help="the recorded plan: an inventory directory (its deployed/), or a record file "
                   "(default inventory/<stack>)")
    p.add_argument("--json", action="store_true", help="machine-readable changes for CI")
    p.add_argument("--indent", type=int, default=None, help="indent --json output")
    p.set_defaults(func=cmd_diff)
