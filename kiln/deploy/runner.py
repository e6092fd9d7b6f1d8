"""Run ansible-playbook and follow it: the whole output to a log file, a short progress per play and host to the
caller, and the PLAY RECAP as the result.

The output read is ansible's own `ansible.builtin.default` stdout callback (`ansible_env` forces it, with one-line
JSON results), whose status lines have not changed in years: `PLAY [name]`, `TASK [role : name]`, `ok: [host]`,
`changed: [host]`, `fatal: [host]: FAILED! => {...}`, `failed: [host] (item=...) => {...}`,
`fatal: [host]: UNREACHABLE! => {...}`, `...ignoring` and the recap's `host : ok=N changed=N ...` lines.
`kiln deploy` and `kiln lab up` both run their playbooks through `run_playbook`.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

Report = Callable[[str], None]

_STATUS = re.compile(r"^(ok|changed|skipping|fatal|failed): \[([^\]\s]+)(?: -> [^\]]+)?\]")
_RECAP = re.compile(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$")
_MSG_LINE = re.compile(r'^\s*"msg": "(.*)",?$')
_MSG_LIMIT = 400  # characters of a failure's message shown in the progress (the log has all of it)


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """One task that failed (or could not reach its host) and was not ignored."""

    play: str
    task: str
    host: str
    message: str
    unreachable: bool = False

    def line(self) -> str:
        what = "unreachable" if self.unreachable else "failed"
        return f"{self.host} {what} in {self.task}: {self.message}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlaybookResult:
    """What a run ended with: ansible-playbook's exit status, its PLAY RECAP (host → counter → n) and the failures."""

    returncode: int
    recap: Mapping[str, Mapping[str, int]]
    failures: tuple[Failure, ...]
    log: Path

    def hosts_with(self, counter: str) -> dict[str, int]:
        return {h: c[counter] for h, c in self.recap.items() if c.get(counter, 0)}

    @property
    def changed_total(self) -> int:
        return sum(c.get("changed", 0) for c in self.recap.values())

    def summary(self) -> list[str]:
        """The lines a user reads at the end: hosts, what changed and where, what failed and why."""
        changed, failed = self.hosts_with("changed"), self.hosts_with("failed")
        unreachable = self.hosts_with("unreachable")
        lines = [f"{_hosts(len(self.recap))}, changed={self.changed_total}"
                 + (" (nothing to do: converged)" if self.recap and not self.changed_total else "")]
        lines.append("changed: " + (_counts(changed) or "none"))
        lines.append("failed: " + (_counts(failed) or "none"))
        lines.append("unreachable: " + (_counts(unreachable) or "none"))
        lines += [f"  {f.line()}" for f in self.failures]
        return lines


def _hosts(n: int) -> str:
    return f"{n} host" if n == 1 else f"{n} hosts"


def _counts(by_host: Mapping[str, int]) -> str:
    return ", ".join(f"{h} ({n})" for h, n in sorted(by_host.items()))


@dataclass
class Progress:
    """Reads ansible-playbook's output line by line and reports each play's outcome per host when it ends."""

    report: Report
    play: str = ""
    task: str = ""
    plays: int = 0
    host: str = ""  # the host of the last status line (a debug task's msg lines follow it)
    per_host: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    recap: dict[str, dict[str, int]] = field(default_factory=dict)
    in_recap: bool = False
    pending: list[str] | None = None  # the lines of a failure's result printed over several lines (`=> {` ... `}`)

    def feed(self, line: str) -> None:
        text = line.rstrip("\n")
        if self.pending is not None:
            self._collect(self.pending, text)
        elif text.startswith("PLAY RECAP"):  # the last recap counts (a log may hold several runs)
            self.end_play()
            self.in_recap, self.recap = True, {}
        elif text.startswith("PLAY ["):
            self.end_play()
            self.in_recap, self.play, self.plays = False, _bracketed(text), self.plays + 1
            self.report(f"play {self.plays}: {self.play}")
        elif self.in_recap:
            self._recap_line(text)
        elif text.startswith(("TASK [", "RUNNING HANDLER [")):
            self.task = _bracketed(text)
        elif text.startswith("...ignoring") and self.failures:
            self._ignore_last()
        elif not self._status(text) and "not applicable" in text.lower():
            # a role's "not applicable on this host: <reason>" (docs/playbooks.md), from a debug task's "msg" line
            m = _MSG_LINE.match(text)
            self.report(f"  {self.host}: {m.group(1) if m else text.strip()}")

    def _status(self, text: str) -> bool:
        m = _STATUS.match(text)
        if not m:
            return False
        status, host = m.groups()
        self.host = host
        counts = self.per_host.setdefault(host, {"ok": 0, "changed": 0, "failed": 0})
        if status in ("ok", "changed"):
            counts[status] += 1
        elif status in ("fatal", "failed"):
            counts["failed"] += 1
            self.failures.append(Failure(play=self.play, task=self.task, host=host, message=_message(text),
                                         unreachable="UNREACHABLE!" in text))
            if text.endswith("=> {"):
                self.pending = ["{"]
        return True

    def _collect(self, pending: list[str], text: str) -> None:
        """One more line of a multi-line failure result; at its closing brace the failure gets the result's msg."""
        pending.append(text)
        if text == "}":
            self.failures[-1] = replace(self.failures[-1], message=_message("=> " + "".join(pending)))
            self.pending = None

    def _ignore_last(self) -> None:
        last = self.failures.pop()
        self.per_host[last.host]["failed"] -= 1

    def _recap_line(self, text: str) -> None:
        m = _RECAP.match(text.strip())
        if m:
            self.recap[m.group(1)] = {k: int(v) for k, v in (kv.split("=") for kv in m.group(2).split())}

    def end_play(self) -> None:
        """The finished play's outcome: hosts that ran, changed hosts with their count, failed hosts with the task."""
        if not self.play:
            return
        hosts = self.per_host
        changed = {h: c["changed"] for h, c in hosts.items() if c["changed"]}
        failed = [f for f in self.failures if f.play == self.play]
        parts = [_hosts(len(hosts)) if hosts else "no hosts matched"]
        if hosts and not changed and not failed:
            parts[0] += ", no change"
        if changed:
            parts.append("changed: " + _counts(changed))
        if failed:
            parts.append("failed: " + ", ".join(sorted({f.host for f in failed})))
        self.report(f"  {'; '.join(parts)}")
        for f in failed:
            self.report(f"  {f.line()}")
        self.play, self.task, self.per_host = "", "", {}


def _bracketed(text: str) -> str:
    start, end = text.find("["), text.rfind("]")
    return text[start + 1:end] if 0 <= start < end else text


def _message(text: str) -> str:
    """The `msg` of a failure line's JSON result (what the module or assert said), else the line itself."""
    _, sep, payload = text.partition("=> ")
    message = text
    if sep:
        try:
            data = json.loads(payload)
        except ValueError:
            data = None
        if isinstance(data, dict):
            message = str(data.get("msg") or data.get("stderr") or data.get("reason") or payload)
    message = " ".join(message.split())
    return message if len(message) <= _MSG_LIMIT else message[:_MSG_LIMIT] + " … (see the log)"


def parse_recap(text: str) -> dict[str, dict[str, int]]:
    """The PLAY RECAP of an ansible-playbook log: host → {ok, changed, failed, ...}."""
    progress = Progress(report=lambda _line: None)
    for line in text.splitlines():
        progress.feed(line)
    return progress.recap


def ansible_env(base: Mapping[str, str], collections: Sequence[Path] = ()) -> dict[str, str]:
    """The environment an ansible run gets: `base`, the output this module reads, and `collections` first on the
    collections path (before what the user or ansible.cfg already names)."""
    env = {
        **base,
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "PYTHONUNBUFFERED": "1",
    }
    if collections:
        rest = [p for p in (base.get("ANSIBLE_COLLECTIONS_PATH") or "").split(":") if p]
        env["ANSIBLE_COLLECTIONS_PATH"] = ":".join([*(str(c) for c in collections), *rest])
    return env


def run_playbook(cmd: Sequence[str], *, env: Mapping[str, str], cwd: Path, log: Path,
                 report: Report) -> PlaybookResult:
    """Run `cmd` (an ansible-playbook command line), writing every line of its output to `log` and reporting the
    progress through `report`; returns when it exits."""
    log.parent.mkdir(parents=True, exist_ok=True)
    progress = Progress(report=report)
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(env), cwd=cwd)
        if proc.stdout is None:  # never: stdout is a pipe
            raise RuntimeError("ansible-playbook's output could not be read")
        for line in proc.stdout:
            fh.write(line)
            progress.feed(line)
        returncode = proc.wait()
    progress.end_play()
    return PlaybookResult(returncode=returncode, recap=progress.recap, failures=tuple(progress.failures), log=log)
