"""`kiln init <name>`: write a commented starter stack (stacks/Pulumi.<name>.yaml) from a handful of answers.

Each answer is a flag (`--gpu-nodes 16`); on a terminal, `kiln init` asks for those not given (Enter keeps the
default), else it takes the defaults. The text is validated and planned before it is written: a problem names the
answer (flag), the value and the fix, and nothing is written. An existing file is kept unless --force is given.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from kiln.cli.common import EXIT_OK, EXIT_SPEC, result, write_files
from kiln.plan import build_plan
from kiln.render.starter import QUESTIONS, Answer, Question, question_for, render_starter
from kiln.spec import SpecError
from kiln.spec.loader import parse_stack_text
from kiln.spec.types import NAME_PATTERN

log = logging.getLogger(__name__)
NAME = re.compile(NAME_PATTERN)  # the spec's `name` (kiln.spec.types.Name)


def cmd_init(args: argparse.Namespace) -> int:
    if not NAME.fullmatch(args.name):
        log.error("init: name = %r: not a stack name; nothing written. Fix: 1-31 lower-case letters, digits and -, "
                  "starting with a letter and not ending in - (e.g. %s)", args.name, _suggest(args.name))
        return EXIT_SPEC
    out = Path(args.out) if args.out else Path(args.stacks_dir or "stacks") / f"Pulumi.{args.name}.yaml"
    if out.exists() and not args.force:
        log.error("init: %s exists; nothing written. Fix: pick another name or --out FILE, or pass --force to "
                  "replace it", out)
        return EXIT_SPEC
    answers = _answers(args)
    text = render_starter(args.name, answers)
    try:
        plan = build_plan(parse_stack_text(text, source=str(out)), source=str(out))
    except SpecError as exc:
        for line in _problems(exc, answers):
            log.error("%s", line)
        log.error("init: %d problem(s) in the answers; nothing written", len(exc.issues))
        return EXIT_SPEC
    write_files(out.parent, {out.name: text})
    result(f"wrote {out}: {len(plan.hosts)} hosts, {plan.sizing.gpus_total} GPUs, read bottleneck "
           f"{plan.sizing.read_bottleneck}. Next: `kiln plan {args.name}`, edit the hardware names to yours, then "
           f"`kiln deploy {args.name}`")
    for warning in plan.warnings:
        log.warning("%s", warning.line())
    return EXIT_OK


def _suggest(name: str) -> str:
    word = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-").lstrip("0123456789-")[:31].rstrip("-")
    return word or "prod"


def _answers(args: argparse.Namespace) -> dict[str, Answer]:
    """The flags given; on a terminal the others are asked for, else they take their defaults."""
    answers: dict[str, Answer] = {}
    ask = sys.stdin.isatty() and not args.defaults
    for q in QUESTIONS:
        given = getattr(args, q.key)
        answers[q.key] = given if given is not None else (_ask(q) if ask else q.default)
    return answers


def _ask(q: Question) -> Answer:
    while True:
        reply = input(f"{q.text} [{q.default}]: ").strip()
        if not reply:
            return q.default
        try:
            return q.kind(reply)
        except ValueError:
            log.warning("%r is not a%s %s; try again", reply, "n" if q.kind is int else "", q.kind.__name__)


def _problems(exc: SpecError, answers: dict[str, Answer]) -> list[str]:
    """Each problem as the answer that caused it: `--flag = value (spec field): problem; fix: ...`."""
    lines = []
    for issue in exc.issues:
        q = question_for(issue.path)
        where = f"{q.flag} = {answers[q.key]!r} ({issue.path})" if q else f"{issue.path} = {issue.value!r}"
        lines.append(f"{where}: {issue.problem}; fix: {issue.fix}")
    return lines


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser],
             parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    p = sub.add_parser("init", parents=list(parents),
                       help="write a commented starter stack from a few answers (validated before it is written)")
    p.add_argument("name", help="the stack's name (stacks/Pulumi.<name>.yaml; also the environment name)")
    p.add_argument("--out", metavar="FILE", help="where to write it (default stacks/Pulumi.<name>.yaml, or under "
                   "--stacks-dir)")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.add_argument("--defaults", action="store_true", help="ask nothing: take the default of every answer not given")
    for q in QUESTIONS:
        p.add_argument(q.flag, type=q.kind, default=None, metavar=q.kind.__name__.upper(),
                       help=f"{q.text} (default {q.default})")
    p.set_defaults(func=cmd_init)
