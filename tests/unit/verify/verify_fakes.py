# TEST DOUBLE: a Remote that answers from canned rules or runs the command in a local shell whose PATH starts
# with fake tools (sysctl, systemctl, lctl, ...). It backs unit tests of the checks' logic only; no
# performance or hardware claim rests on it (real hosts: tests/lab/test_lab_e2e.py).
from __future__ import annotations

import os
import re
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kiln.plan import build_plan
from kiln.plan.model import Plan
from kiln.render.inventory import render_inventory
from kiln.spec import load_stack
from kiln.spec.models import Acceptance
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Options
from kiln.verify.hosts import CommandResult
from kiln.verify.inventory import Inventory, inventory_from_files

Answer = tuple[int, str, str] | Callable[[str], tuple[int, str, str]]


@dataclass
class FakeRemote:
    name: str
    bin_dir: Path | None = None
    rules: list[tuple[re.Pattern[str], Answer]] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    spec: str = "fake://"

    def on(self, pattern: str, answer: Answer) -> FakeRemote:
        self.rules.insert(0, (re.compile(pattern, re.S), answer))
        return self

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        self.commands.append(command)
        start = time.monotonic()
        for pat, ans in self.rules:
            if pat.search(command):
                rc, out, err = ans(command) if callable(ans) else ans
                return CommandResult(command, rc, out, err, time.monotonic() - start)
        env = dict(os.environ)
        if self.bin_dir:
            env["PATH"] = f"{self.bin_dir}:{env['PATH']}"
        p = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=60, check=False)
        return CommandResult(command, p.returncode, p.stdout, p.stderr, time.monotonic() - start)

    secret_files: dict[str, tuple[str, int]] = field(default_factory=dict)  # remote path → (content, local mode)

    def put(self, local: Path, remote_path: str, mode: int = 0o755) -> None:
        self.commands.append(f"PUT {local} {remote_path}")

    def put_secret(self, local: Path, remote_path: str) -> None:
        self.commands.append(f"PUT_SECRET {local} {remote_path}")
        self.secret_files[remote_path] = (local.read_text(), local.stat().st_mode & 0o777)


def fake_tool(bin_dir: Path, name: str, script: str) -> None:
    """A fake executable in bin_dir (bash script body)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    p = bin_dir / name
    p.write_text("#!/usr/bin/env bash\n# TEST DOUBLE\n" + script + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


_LAB: tuple[Plan, Inventory, Acceptance] | None = None


def lab() -> tuple[Plan, Inventory, Acceptance]:
    global _LAB
    if _LAB is None:
        spec = load_stack("lab")
        plan = build_plan(spec, source="lab")
        _LAB = (plan, inventory_from_files(render_inventory(plan), "test"), plan.acceptance)
    return _LAB


def context(remotes: dict[str, FakeRemote], options: Options | None = None, **acc: float) -> Context:
    plan, inv, a = lab()
    if acc:
        a = Acceptance.model_validate({**a.model_dump(), **acc})
    return Context(plan, a, inv, dict(remotes), options or Options())  # type: ignore[arg-type]
