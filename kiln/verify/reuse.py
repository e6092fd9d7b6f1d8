"""Reusing a still-valid measurement: a re-verification after a change measures again only what the change could
have moved.

A benchmark row of an earlier report is reused when nothing it depends on changed:

- the same stack, plan digest (the whole plan: targets, tunables, hosts), kiln version and report schema;
- the same protocol and options (acceptance block, check variables, launcher, S3 endpoint): what the runs were;
- the same facts of every host the row depends on (its subject's hosts, and the object-store or Lustre server
  hosts where the check requires them; a check that requires nothing depends on every host): kernel, boot, the
  digest of the configuration files the roles write, driver, firmware, Lustre and tool versions
  (kiln/verify/facts.py); a host whose facts could not be read reuses nothing;
- the row was measured (PASS, WARN or FAIL with its samples), no longer ago than `reuse_max_age_h`.

Conformance rows are never reused: they are cheap, and they are what shows that the hosts still hold the planned
state. Nor are NOT APPLICABLE or ERROR rows (nothing was measured). A reused row is judged again against the
current target and says "reused from <time of the measurement>"; `kiln verify --full` measures everything.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln.plan.groups import LUSTRE_SERVERS, OBJECTSTORE
from kiln.plan.model import AcceptanceTarget, Plan
from kiln.plan.serialize import target_dict
from kiln.spec.models import Acceptance
from kiln.verify.checks.check import Subject
from kiln.verify.facts import HostFacts
from kiln.verify.provenance import KILN_VERSION, REPORT_SCHEMA, acceptance_dict, kiln_build

#: Options that say which rows run and how they are reached, not what a run measures: a change of these keeps
#: earlier measurements valid.
SELECTION_OPTIONS = ("strict", "only", "hosts_pattern", "workers", "backend_template", "command_timeout_s",
                     "full", "reuse_from", "reuse_max_age_h")


def settings_key(acceptance: dict[str, Any], options: dict[str, Any]) -> str:
    """What the runs were: the protocol and every option that changes a measurement."""
    kept = {k: v for k, v in options.items() if k not in SELECTION_OPTIONS}
    return json.dumps({"acceptance": acceptance, "options": kept}, sort_keys=True, default=str)


def parse_time(text: str | None) -> float | None:
    try:
        return dt.datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reusable:
    """An earlier row that may stand for this run's, with where its raw files are."""

    row: dict[str, Any]
    report_dir: Path
    measured_at: float


def load_report(path: Path) -> tuple[dict[str, Any], Path] | None:
    """An earlier report.json (a file, or a report directory) and its directory; None when there is none."""
    file = path / "report.json" if path.is_dir() else path
    try:
        return json.loads(file.read_text(encoding="utf-8")), file.parent
    except (OSError, ValueError):
        return None


class Reuse:
    """Which rows of an earlier report still stand (see the module docstring)."""

    def __init__(self, *, previous: dict[str, Any] | None, previous_dir: Path | None, current: dict[str, Any],
                 facts: dict[str, HostFacts], max_age_s: float, now: float) -> None:
        self.previous_dir = previous_dir or Path(".")
        self.facts = facts
        self.max_age_s, self.now = max_age_s, now
        self.why_not = self._report_mismatch(previous, current)
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self.old_facts: dict[str, dict[str, Any]] = {}
        if previous is not None and not self.why_not:
            self.rows = {(r["check"], r["subject"]): r for r in previous.get("results", [])}
            self.old_facts = dict(previous.get("host_facts") or {})

    @staticmethod
    def _report_mismatch(previous: dict[str, Any] | None, current: dict[str, Any]) -> str:
        if previous is None:
            return "no earlier report"
        for key in ("schema", "stack", "plan_digest", "kiln_version", "kiln_build"):
            if previous.get(key) != current.get(key):
                return f"the earlier report's {key} differs ({previous.get(key)} → {current.get(key)})"
        old = settings_key(previous.get("acceptance") or {}, previous.get("options") or {})
        if old != settings_key(current["acceptance"], current["options"]):
            return "the earlier report ran with other protocol or options"
        return ""

    def _facts_same(self, hosts: Iterable[str]) -> bool:
        for h in hosts:
            now = self.facts.get(h)
            old = self.old_facts.get(h)
            if now is None or now.error or old is None or old.get("error") or now.as_dict() != old:
                return False
        return True

    def find(self, target: AcceptanceTarget, subject: Subject, depends_on: Iterable[str]) -> Reusable | None:
        """The earlier row for (target, subject) if it still stands, else None."""
        row = self.rows.get((target.check, subject.label))
        if row is None or row.get("kind") == "conformance" or not row.get("samples"):
            return None
        if row.get("verdict") not in ("PASS", "WARN", "FAIL") or row.get("target") != target_dict(target):
            return None
        at = parse_time(row.get("measured_at"))
        if at is None or self.now - at > self.max_age_s:
            return None
        if not self._facts_same(depends_on):
            return None
        return Reusable(row=row, report_dir=self.previous_dir, measured_at=at)


def identity(*, plan: Plan, plan_digest: str, acceptance: Acceptance, options: dict[str, Any]) -> dict[str, Any]:
    """This run's side of the comparison with an earlier report (the keys report.json records)."""
    return {"schema": REPORT_SCHEMA, "stack": plan.stack, "plan_digest": plan_digest, "kiln_version": KILN_VERSION,
            "kiln_build": kiln_build(), "acceptance": acceptance_dict(acceptance), "options": options}


def depends_on(plan: Plan, target: AcceptanceTarget, subject: Subject, selected: list[str]) -> list[str]:
    """The hosts whose facts a row's measurement depends on."""
    if not target.requires:
        return list(selected)
    hosts = set(subject.hosts)
    if "objectstore" in target.requires:
        hosts |= set(plan.groups.get(OBJECTSTORE, ()))
    if "lustre" in target.requires:
        hosts |= set(plan.groups.get(LUSTRE_SERVERS, ()))
    return sorted(h for h in hosts if h in selected)


def carry_raw(found: Reusable, out_dir: Path) -> list[str]:
    """The reused row's raw files, copied beside this report when it is written elsewhere (evidence stays with
    the report); the relative paths the row links."""
    kept = []
    for rel in found.row.get("raw") or []:
        src, dst = found.report_dir / rel, out_dir / rel
        if src.resolve() != dst.resolve() and src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        if dst.is_file():
            kept.append(rel)
    return kept
