"""What every `kiln` command shares: the exit codes, loading a stack, writing files, the options every
subcommand accepts, and the one reporting path.

Reporting: a command's result (the plan, the report, what was written) goes to stdout through `result`;
diagnostics go through `logging` (the `kiln` logger) to stderr, through the `StderrHandler` that
`kiln.cli.main` sets up once. Nothing here imports a command module, and no adapter imports the CLI.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterable
from pathlib import Path

from kiln.plan import build_plan
from kiln.plan.model import Plan
from kiln.redact import RedactFilter
from kiln.spec import ClusterSpec, load_stack

EXIT_OK = 0  # done (kiln verify: ACCEPTED)
EXIT_FAIL = 1  # the command ran and something failed (kiln verify: REJECTED; a policy violation, an unexpected error)
EXIT_SPEC = 2  # bad spec or usage: nothing written (kiln validate --fail-on warning: a warning)
EXIT_INCOMPLETE = 3  # kiln verify: INCOMPLETE, evidence a sign-off needs was not measured
EXIT_WAIVED = 4  # kiln verify: ACCEPTED WITH WAIVERS, every FAIL is waived (acceptance.waivers)
EXIT_DISRUPTIVE = 3  # kiln diff: a change needs a restart, remount, failover, removal or reboot
EXIT_REFUSED = 4  # kiln diff: a change kiln refuses to apply (a reformat, a loss of data)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)

STACK_HELP = "stack name (dev → stacks/Pulumi.dev.yaml) or path to a stack file (anything with a / or ending in .yaml)"


def load(stack: str, stacks_dir: str | None = None) -> tuple[ClusterSpec, Plan]:
    """The stack's spec and its plan; a bad spec raises SpecError, which `main` turns into EXIT_SPEC."""
    spec = load_stack(stack, stacks_dir)
    return spec, build_plan(spec, source=stack)


def write_files(out: Path, files: dict[str, str]) -> None:
    """Write rendered files atomically-per-file under `out` (renders fully first, then writes)."""
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)


def result(text: str) -> None:
    """A command's result on stdout, newline-terminated and flushed (a prolog or a pipe reads it at once)."""
    sys.stdout.write(text if text.endswith("\n") else f"{text}\n")
    sys.stdout.flush()


def result_parts(parts: Iterable[str]) -> None:
    """A result too large to hold as one string (a large plan's JSON), written piece by piece, then as result()."""
    for part in parts:
        sys.stdout.write(part)
    result("")


def common_options(top: bool = False) -> argparse.ArgumentParser:
    """-v/--debug and --stacks-dir, accepted before and after the subcommand (`kiln -v plan dev`, `kiln plan dev -v`).

    The subcommand's copy defaults to SUPPRESS, so it never overwrites what was given before the subcommand."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("-v", "--debug", action="store_true", default=False if top else argparse.SUPPRESS,
                   help="debug logging, and the traceback of an unexpected error")
    p.add_argument("--stacks-dir", metavar="DIR", default=None if top else argparse.SUPPRESS,
                   help="where stack names are looked up (default: $KILN_STACKS_DIR, then ./stacks)")
    return p


def add_stack(p: argparse.ArgumentParser) -> None:
    p.add_argument("stack", help=STACK_HELP)


class StderrHandler(logging.Handler):
    """`kiln: <level>: <message>` on whatever sys.stderr is at the time (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"kiln: {record.levelname.lower()}: {self.format(record)}\n")
        except Exception:
            self.handleError(record)


def setup_logging(debug: bool) -> None:
    """Diagnostics of kiln's modules (the `kiln` logger) to stderr; INFO and up, DEBUG with -v/--debug."""
    logger = logging.getLogger("kiln")
    handler = StderrHandler()
    handler.addFilter(RedactFilter())  # no signed URL or registered secret reaches stderr (kiln/redact.py)
    logger.handlers[:] = [h for h in logger.handlers if not isinstance(h, StderrHandler)] + [handler]
    logger.setLevel(logging.DEBUG if debug else logging.INFO)
