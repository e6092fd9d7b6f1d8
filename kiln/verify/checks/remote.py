"""What checks do on a host besides a plain command: find a tool, run it and accept its run only when it finished,
put secrets there (never on a command line)."""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kiln.verify.checks.check import CheckError
from kiln.verify.checks.context import Context
from kiln.verify.hosts import CommandResult

T = TypeVar("T")


def quote(s: str) -> str:
    return shlex.quote(s)


def need_tool(ctx: Context, host: str, tool: str, hint: str) -> str:
    """The tool's path on the host, or CheckError saying how to get it."""
    r = ctx.run(host, f"command -v {quote(tool)}", 30)
    if not r.ok or not r.stdout.strip():
        raise CheckError(f"{host}: {tool} is not installed ({hint})")
    return r.stdout.strip().splitlines()[0]


def tool_finished(host: str, tool: str, r: CommandResult) -> None:
    """CheckError when a tool (or its launcher) exited non-zero, even if its output parsed.

    Callers parse first, so that the tool's own error text is the reason when there is one; a run that
    printed a plausible table and then aborted (MPI_ABORT, a killed rank, a timeout) is still an ERROR.
    """
    if r.ok:
        return
    hint = " (timed out)" if r.timed_out else ""
    tail = (r.stderr.strip() or r.stdout.strip())[-300:]
    raise CheckError(f"{host}: {tool} exited with rc {r.rc}{hint}" + (f": {tail}" if tail else ""))


def run_tool(ctx: Context, host: str, *, tool: str, command: str, timeout: float,
             parse: Callable[[str, str], T]) -> tuple[T, CommandResult]:
    """Run a benchmark and check that it ran correctly: its output parsed (ParseError with the tool's own error
    text), then its exit status (tool_finished). The caller takes the figure from the parsed result."""
    r = ctx.run(host, command, timeout)
    parsed = parse(r.stdout, r.stderr)
    tool_finished(host, tool, r)
    return parsed, r


def push_env_file(ctx: Context, host: str, name: str, values: dict[str, str]) -> str:
    """Put `values` as a 0600 shell env file on the host and return its path; for secrets.

    The file is written locally with mode 0600 in a private temporary directory and copied by file transfer
    (Remote.put_secret) into <workdir>/secrets (mode 0700), so no secret is ever part of a command line: not
    in the local ssh/podman argv, not in the remote `sh -c`, not in `ps` on a shared node. Commands load it
    with `. FILE` (set -a exports) and remove it afterwards (`drop_env_file`).
    """
    secrets_dir = ctx.workdir("secrets")
    remote_path = f"{secrets_dir}/{name}"
    ctx.must(host, f"mkdir -p {quote(secrets_dir)} && chmod 700 {quote(secrets_dir)}", 60,
             what=f"creating {secrets_dir}")
    with tempfile.TemporaryDirectory(prefix="kiln-secret-") as d:
        local = Path(d) / name
        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(f"{k}={shlex.quote(v)}\n" for k, v in values.items()))
        ctx.remote(host).put_secret(local, remote_path)
    return remote_path


def with_env_file(path: str, command: str) -> str:
    """`command` run with the variables of an env file exported (the file is read by the shell, not passed)."""
    return f"set -a && . {quote(path)} && set +a && {command}"


def drop_env_file(ctx: Context, host: str, path: str) -> None:
    ctx.run(host, f"rm -f {quote(path)}", 30)

