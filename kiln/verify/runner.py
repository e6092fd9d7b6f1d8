"""Running the suite: select targets and hosts, decide applicability, repeat, judge, keep the raw output.

Parallelism: conformance checks, and benchmarks whose hosts share nothing (local NVMe fio, GPU copies, NCCL
inside a node), run on up to `workers` hosts at once (threads: the work is waiting on remote commands).
Benchmarks through a shared resource (Lustre, network pairs, the object store, multi-node launches) run one
at a time so that each figure is the one the target describes.
"""

from __future__ import annotations

import datetime
import fnmatch
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

from kiln.plan.model import AcceptanceTarget, Plan
from kiln.plan.serialize import plan_digest
from kiln.spec.models import Acceptance, Waiver
from kiln.verify.checks import REGISTRY
from kiln.verify.checks.check import Check, CheckError, NotApplicable, NothingPlanned, Rep, Sample, Subject
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Options
from kiln.verify.facts import HostFacts, gather
from kiln.verify.hosts import CommandResult, Remote, RemoteError
from kiln.verify.inventory import Inventory
from kiln.verify.judge import Judgement, Stats, Verdict, effective, judge
from kiln.verify.parsers import ParseError
from kiln.verify.provenance import iso
from kiln.verify.reuse import Reusable, Reuse, carry_raw, depends_on, identity, load_report
from kiln.verify.verdict import Decision, decide


@dataclass
class Result:
    target: AcceptanceTarget
    subject: Subject
    verdict: Verdict
    message: str
    kind: str = "benchmark"
    stats: Stats | None = None
    unstable: bool = False
    samples: list[float] = field(default_factory=list)
    warmup_samples: list[float] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    raw_files: list[str] = field(default_factory=list)
    seconds: float = 0.0
    runbook: str = ""
    tools: tuple[str, ...] = ()
    waiver: str = ""  # acceptance.waivers: the reason this FAIL is accepted ("" = not waived)
    nothing_planned: bool = False  # NOT APPLICABLE because the plan asks for nothing here (NothingPlanned)
    measured_at: float = 0.0  # when the row's runs ended (epoch s); an older run's time for a reused row
    reused_from: str = ""  # the report a reused measurement comes from ("" = measured in this run)

    @property
    def check(self) -> str:
        return self.target.check


class ProgressPrinter:
    """Thread-safe progress lines on stderr: which check, which host, repetition i/N, the value."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self._lock = threading.Lock()

    def __call__(self, msg: str) -> None:
        if self.quiet:
            return
        with self._lock:
            self.stream.write(f"[kiln verify] {msg}\n")
            self.stream.flush()


def select_hosts(plan: Plan, inventory: Inventory, pattern: str | None) -> list[str]:
    """Plan hosts present in the inventory, filtered by comma-separated globs of host or group names."""
    hosts = [h.name for h in plan.hosts if h.name in inventory.hostvars]
    if not pattern:
        return hosts
    pats = [p.strip() for p in pattern.split(",") if p.strip()]
    keep: set[str] = set()
    for p in pats:
        for h in hosts:
            if fnmatch.fnmatch(h, p):
                keep.add(h)
        for g, members in plan.groups.items():
            if fnmatch.fnmatch(g, p):
                keep.update(m for m in members if m in hosts)
    return [h for h in hosts if h in keep]


def select_targets(plan: Plan, only: tuple[str, ...]) -> list[AcceptanceTarget]:
    if not only:
        return list(plan.targets)

    def hit(check: str) -> bool:
        return any(check == o or check.startswith(o.rstrip(".") + ".") or fnmatch.fnmatch(check, o) for o in only)

    chosen = [t for t in plan.targets if hit(t.check)]
    if not chosen:
        known = ", ".join(sorted({t.check for t in plan.targets}))
        raise ValueError(f"--only {' '.join(only)} matches no check of this plan; checks: {known}")
    return chosen


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "subject"


# One target's place in the run: its index, and (target, check, subjects, why there are none).
RunItem = tuple[int, tuple[AcceptanceTarget, Check | None, list[Subject], str]]


class Runner:
    def __init__(self, ctx: Context, out_dir: Path, secrets: tuple[str, ...] = (), reuse: Reuse | None = None) -> None:
        self.ctx = ctx
        self.out = out_dir
        self.secrets = tuple(s for s in secrets if s)
        self.reuse = reuse  # an earlier report's still-valid measurements (None: measure everything)
        self._count = 0
        self._total = 0
        self._lock = threading.Lock()

    def redact(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "***")
        return text

    # ---- planning -------------------------------------------------------------------------------------

    def items(self, targets: list[AcceptanceTarget]) -> list[tuple[AcceptanceTarget, Check | None, list[Subject], str]]:
        out: list[tuple[AcceptanceTarget, Check | None, list[Subject], str]] = []
        for t in targets:
            check = REGISTRY.get(t.check)
            if check is None:
                out.append((t, None, [], f"no check implemented for {t.check}"))
                continue
            try:
                subjects = check.subjects(self.ctx, t)
            except (CheckError, RemoteError, ValueError) as exc:
                out.append((t, check, [], f"cannot plan the runs: {exc}"))
                continue
            why = ""
            if not subjects:
                in_group = self.ctx.group_hosts(t.group)
                if not in_group:
                    why = f"no selected host is in group {t.group}"
                elif t.scope == "pair":
                    why = f"needs two hosts of {t.group}; selected: {', '.join(in_group)}"
                else:
                    why = f"nothing to run on the selected hosts of {t.group}"
            out.append((t, check, subjects, why))
        return out

    # ---- running --------------------------------------------------------------------------------------

    def run(self, targets: list[AcceptanceTarget]) -> list[Result]:
        plan = self.items(targets)
        self._total = sum(max(1, len(s)) for _, _, s, _ in plan)
        results: dict[tuple[int, int], Result] = {}
        o = self.ctx.options
        reads = [(i, p) for i, p in enumerate(plan) if p[1] is not None and p[1].kind == "conformance"]
        benchmarks = [(i, p) for i, p in enumerate(plan) if not (p[1] is not None and p[1].kind == "conformance")]
        self._at_once(reads, results, o.workers)  # reads disturb no measurement: all of them together
        for item in benchmarks:  # one benchmark at a time; its subjects together only where they share nothing
            check = item[1][1]
            self._at_once([item], results, (o.benchmark_workers or o.workers) if check and check.parallel_hosts else 1)
        return [results[k] for k in sorted(results)]

    def _at_once(self, items: list[RunItem], results: dict[tuple[int, int], Result], workers: int) -> None:
        """Every subject of `items` on up to `workers` threads (1: one after another, in order)."""
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="kiln-verify") as pool:
            futs = {}
            for i, (t, check, subjects, why) in items:
                if check is None or not subjects:
                    results[(i, 0)] = self.empty_row(t, check, why)
                    continue
                for j, s in enumerate(subjects):
                    futs[(i, j)] = pool.submit(self.run_one, t, check, s)
            for key, fut in futs.items():
                results[key] = fut.result()

    def empty_row(self, t: AcceptanceTarget, check: Check | None, why: str) -> Result:
        self._tick(f"{t.check}: {why}")
        verdict = Verdict.ERROR if check is None or why.startswith("cannot") else Verdict.NOT_APPLICABLE
        msg = why if verdict is Verdict.ERROR else f"not applicable: {why}"
        return Result(t, Subject("-", ()), verdict, msg, kind=check.kind if check else "benchmark",
                      runbook=check.runbook if check else "", tools=check.tools if check else (),
                      measured_at=time.time())

    def _tick(self, msg: str) -> int:
        with self._lock:
            self._count += 1
            n = self._count
        self.ctx.progress(f"[{n}/{self._total}] {msg}")
        return n

    def run_one(self, target: AcceptanceTarget, check: Check, subject: Subject) -> Result:
        found = self._reusable(target, check, subject)
        if found is not None:
            return self._reused(target, check, subject, found)
        start = time.monotonic()
        res = Result(target, subject, Verdict.ERROR, "", kind=check.kind, runbook=check.runbook, tools=check.tools)
        n = self._tick(f"{target.check} @ {subject.label}: starting")
        try:
            reason = check.not_applicable(self.ctx, target, subject)
            if reason:
                res.verdict, res.message = Verdict.NOT_APPLICABLE, f"not applicable on this host: {reason}"
                return res
            check.prepare(self.ctx, target, subject)
            try:
                self._repeat(target, check, subject, res, n)
            finally:
                try:
                    check.cleanup(self.ctx, target, subject)
                except Exception as exc:  # cleanup problems are reported, not fatal
                    res.details.append(f"note: cleanup failed: {exc}")
            self._judge(target, check, res)
        except NotApplicable as exc:
            res.verdict, res.message = Verdict.NOT_APPLICABLE, f"not applicable on this host: {exc}"
            res.nothing_planned = isinstance(exc, NothingPlanned)
        except ParseError as exc:
            res.verdict, res.message = Verdict.ERROR, self.redact(f"{exc.tool} output not usable: {exc.reason}")
            if exc.excerpt:
                res.details.append(self.redact(f"output tail: {exc.excerpt[-400:]}"))
        except (CheckError, RemoteError) as exc:
            res.verdict, res.message = Verdict.ERROR, self.redact(str(exc))
        except Exception as exc:  # an internal error must still produce a row, never a pass
            res.verdict, res.message = Verdict.ERROR, self.redact(f"internal error: {type(exc).__name__}: {exc}")
            res.details.append(self.redact(traceback.format_exc(limit=6)))
        finally:
            res.seconds = time.monotonic() - start
            res.measured_at = time.time()
            self.ctx.progress(f"[{n}/{self._total}] {target.check} @ {subject.label}: {res.verdict.value}"
                              f" — {res.message[:160]}")
        return res

    def _reusable(self, target: AcceptanceTarget, check: Check, subject: Subject) -> Reusable | None:
        if self.reuse is None or check.kind == "conformance":
            return None
        return self.reuse.find(target, subject, depends_on(self.ctx.plan, target, subject, list(self.ctx.remotes)))

    def _reused(self, target: AcceptanceTarget, check: Check, subject: Subject, found: Reusable) -> Result:
        """An earlier measurement that still stands, judged again against the target (kiln/verify/reuse.py)."""
        row = found.row
        res = Result(target, subject, Verdict.ERROR, "", kind=check.kind, runbook=check.runbook, tools=check.tools,
                     samples=[float(x) for x in row["samples"]],
                     warmup_samples=[float(x) for x in row.get("warmup_samples") or []],
                     details=list(row.get("details") or []), info=dict(row.get("info") or {}),
                     raw_files=carry_raw(found, self.out), measured_at=found.measured_at,
                     reused_from=iso(found.measured_at))
        self._judge(target, check, res)
        res.message += f" (reused from {res.reused_from}: plan, host facts and tool versions unchanged)"
        self._tick(f"{target.check} @ {subject.label}: {res.verdict.value}, reused from {res.reused_from}")
        return res

    def _repeat(self, target: AcceptanceTarget, check: Check, subject: Subject, res: Result, n: int) -> None:
        a = self.ctx.acceptance
        if check.kind == "conformance" or check.single_run:
            reps = [Rep(1, 1, False)]
        else:
            reps = [Rep(i + 1, a.warmup, True) for i in range(a.warmup)]
            reps += [Rep(i + 1, a.repetitions, False) for i in range(a.repetitions)]
        for rep in reps:
            where = f"[{n}/{self._total}] {target.check} @ {subject.label}: "
            where += f"{'warm-up' if rep.warmup else 'rep'} {rep.index}/{rep.total}"
            if check.kind != "conformance":
                self.ctx.progress(where)
            sample = check.measure(self.ctx, target, subject, rep)
            self._keep_raw(target, subject, rep, sample, res)
            if rep.warmup:
                res.warmup_samples.append(sample.value)
            else:
                res.samples.append(sample.value)
                res.details.extend(d for d in sample.details if d not in res.details)
                for k, v in sample.info.items():
                    res.info.setdefault(k, v)
            if check.kind != "conformance":
                self.ctx.progress(f"{where} = {sample.value:.4g} {target.unit}")

    def _keep_raw(self, target: AcceptanceTarget, subject: Subject, rep: Rep, sample: Sample, res: Result) -> None:
        d = self.out / "raw" / target.check / _slug(subject.label)
        for name, text in sample.raw.items():
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"{rep.label}-{name}"
            path.write_text(self.redact(text), encoding="utf-8")
            res.raw_files.append(str(path.relative_to(self.out)))

    def _judge(self, target: AcceptanceTarget, check: Check, res: Result) -> None:
        j: Judgement = judge(target, res.samples, self.ctx.acceptance.cv_limit)
        res.stats, res.unstable, res.verdict = j.stats, j.unstable, j.verdict
        if check.kind == "conformance":
            mismatches = [d for d in res.details if not d.startswith("note:")]
            checked = res.info.get("checked")
            if mismatches:
                plural = "es" if len(mismatches) > 1 else ""
                res.message = f"{len(mismatches)} mismatch{plural}: " + "; ".join(mismatches[:5])
                if len(mismatches) > 5:
                    res.message += f"; … ({len(mismatches) - 5} more in the details)"
            else:
                res.message = "matches the plan" + (f" ({checked} items checked)" if checked else "")
        else:
            res.message = j.message
        res.message = self.redact(res.message)
        res.details = [self.redact(d) for d in res.details]


@dataclass
class VerifyRun:
    stack: str
    plan: Plan
    acceptance: Acceptance
    options: Options
    results: list[Result]
    hosts: list[str]
    inventory_source: str
    started: float
    finished: float
    out_dir: Path
    report_files: list[Path] = field(default_factory=list)
    facts: dict[str, HostFacts] = field(default_factory=dict)  # per host: kernel, driver, firmware, tool versions

    @cached_property
    def plan_digest(self) -> str:
        """The digest of the plan this run verified (kiln.plan.serialize.plan_digest)."""
        return plan_digest(self.plan)

    @property
    def decision(self) -> Decision:
        """The sign-off over every row, against every target of the plan (kiln/verify/verdict.py)."""
        return decide(self.results, self.plan.targets, self.options.strict)

    @property
    def exit_code(self) -> int:
        """verify's exit status, the sign-off's: 0 ACCEPTED, 1 REJECTED, 3 INCOMPLETE, 4 ACCEPTED WITH WAIVERS."""
        return self.decision.exit_code

    def counts(self) -> dict[str, int]:
        out = {v.value: 0 for v in Verdict}
        for r in self.results:
            out[effective(r.verdict, self.options.strict).value] += 1
        return out


def apply_waivers(results: list[Result], waivers: list[Waiver], today: datetime.date) -> None:
    """Mark the FAIL rows of a waived check (acceptance.waivers) with the waiver's reason; the verdict stays FAIL.
    An ERROR (no measurement) is never waived; an expired waiver is named in the row's details and not applied."""
    by_check = {w.check: w for w in waivers}
    for r in results:
        w = by_check.get(r.check)
        if w is None or r.verdict is not Verdict.FAIL:
            continue
        if w.expires is not None and today > w.expires:
            r.details.append(f"note: the waiver of {r.check} expired on {w.expires.isoformat()}; this FAIL counts")
            continue
        until = f" (until {w.expires.isoformat()})" if w.expires else ""
        r.waiver = w.reason + until


def execute(plan: Plan, acceptance: Acceptance, inventory: Inventory, remotes: dict[str, Remote], options: Options,
            out_dir: Path, stack: str, progress: Callable[[str], None] | None = None) -> VerifyRun:
    """Run the selected targets on `remotes` and return the results (the report is written by the caller)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(
        plan=plan, acceptance=acceptance, inventory=inventory, remotes=remotes, options=options,
        progress=progress or ProgressPrinter(),
    )
    targets = select_targets(plan, options.only)
    started = time.time()
    facts = gather(list(remotes), run=lambda h, cmd: _answer(ctx.run(h, cmd, 120)), workdir=options.workdir,
                   workers=options.workers)
    run = VerifyRun(stack=stack, plan=plan, acceptance=acceptance, options=options, results=[], hosts=list(remotes),
                    inventory_source=inventory.source, started=started, finished=started, out_dir=out_dir,
                    facts=facts)
    reuse = None if options.full else earlier_measurements(run)
    if reuse is not None and reuse.why_not:
        ctx.progress(f"measuring everything: {reuse.why_not}")
    runner = Runner(ctx, out_dir, secrets=(options.s3_secret_key or "",), reuse=reuse)
    run.results = runner.run(targets)
    apply_waivers(run.results, acceptance.waivers, datetime.date.today())
    run.finished = time.time()
    return run


def _answer(r: CommandResult) -> tuple[int, str, str]:
    return r.rc, r.stdout, r.stderr


def earlier_measurements(run: VerifyRun) -> Reuse:
    """The still-valid rows of the earlier report (--option reuse_from, else the one in the report directory)."""
    o = run.options
    found = load_report(Path(o.reuse_from) if o.reuse_from else run.out_dir)
    current = identity(plan=run.plan, plan_digest=run.plan_digest, acceptance=run.acceptance, options=o.public())
    return Reuse(previous=found[0] if found else None, previous_dir=found[1] if found else None, current=current,
                 facts=run.facts, max_age_s=o.reuse_max_age_h * 3600, now=time.time())
