"""The `kiln` command line. Exit codes: 0 ok, 1 failure, 2 bad spec or usage (nothing written), 3 and 4 `kiln diff`'s
disruptive and refused changes (kiln/cli/diff.py), 130 interrupted.

A stack is named (`dev` → stacks/Pulumi.dev.yaml under --stacks-dir, $KILN_STACKS_DIR or ./stacks; see
kiln.spec.stack_path) or given as a path. The command's output (the plan, the report, what was written)
goes to stdout; diagnostics go through `logging` to stderr, set up once in `main`. No traceback reaches
the user unless asked for with -v/--debug.

Layout: kiln.cli.common holds what every command shares (loading a stack, writing files, the shared
options, the exit codes, the reporting path); one module per command group registers its subcommands
(init; plan: validate, plan, inventory; diff; deploy; render: render, monitoring; verify; lab; data). Command
modules import kiln.cli.common, never this module; nothing outside kiln.cli imports the CLI.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib import metadata

from kiln import __version__
from kiln.cli import data, deploy, diff, init, lab, plan, render, verify
from kiln.cli.common import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, EXIT_SPEC, common_options, setup_logging
from kiln.spec import SpecError

__all__ = ["EXIT_FAIL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_SPEC", "main", "parser", "version"]

COMMAND_GROUPS = (init, plan, diff, deploy, render, verify, lab, data)  # in the order `kiln --help` lists them

log = logging.getLogger(__name__)


def version() -> str:
    """The installed distribution's version; the package's own when kiln runs from a checkout uninstalled."""
    try:
        return metadata.version("kiln")
    except metadata.PackageNotFoundError:
        return __version__


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kiln", description="GPU training clusters from one spec per environment.",
                                 parents=[common_options(top=True)])
    ap.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = ap.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.register(sub, [common_options()])
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    setup_logging(args.debug)
    try:
        return int(args.func(args))
    except SpecError as exc:
        log.error("%s", exc.render())
        return EXIT_SPEC
    except BrokenPipeError:
        # The reader went away (`kiln plan dev | head`): not an error; keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        log.error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # anything unexpected: one line, the traceback only when asked for
        if args.debug:
            log.error("%s: %s", type(exc).__name__, exc, exc_info=True)
        else:
            log.error("%s (run with -v/--debug for the traceback)", _one_line(exc))
        return EXIT_FAIL


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The arguments; what follows the first `--` is `args.passthrough`, for a command that hands it on (`kiln deploy
    STACK -- ANSIBLE_ARGS`: argparse cannot take options after a trailing list of positionals)."""
    words = list(argv)
    cut = words.index("--") if "--" in words else len(words)
    ap = parser()
    args = ap.parse_args(words[:cut])
    args.passthrough = words[cut + 1:]
    if args.passthrough and not getattr(args, "passthrough_to", None):
        ap.error(f"kiln {args.command} takes no arguments after --: {' '.join(args.passthrough)}")
    return args


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text}"
