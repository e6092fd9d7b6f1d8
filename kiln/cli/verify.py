"""`kiln verify <stack>`: run the acceptance suite against a stack's hosts and write the report.

The sign-off and its exit code: 0 ACCEPTED (every check the plan requires measured, none failed); 1 REJECTED (a
FAIL no waiver covers; with --strict any FAIL or NOT APPLICABLE); 3 INCOMPLETE (a required check NOT APPLICABLE,
ERROR or not run: evidence is missing); 4 ACCEPTED WITH WAIVERS (every FAIL waived); 2 bad usage (unknown check,
option or inventory). A re-run reuses the earlier report's still-valid measurements; --full measures everything.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from kiln.cli.common import EXIT_FAIL, EXIT_OK, EXIT_SPEC, add_stack, result
from kiln.render.inventory import render_inventory
from kiln.verify.api import run_jobs_verify, run_verify
from kiln.verify.checks.options import Options
from kiln.verify.compare import compare_reports
from kiln.verify.report import missing_groups, report_dict
from kiln.verify.reuse import load_report
from kiln.verify.runner import ProgressPrinter, VerifyRun

log = logging.getLogger(__name__)

# --quick: short benchmark runs (a smoke test, not for sign-off); the fio cap is only ever lowered
QUICK = {"network.iperf3.seconds": "5", "objectstore.warp.duration_s": "10", "fabric.perftest.seconds": "3"}
QUICK_FIO_RUNTIME_S = 10


def _parse_kv(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--option {item!r}: write KEY=VALUE")
        k, _, v = item.partition("=")
        out[k.strip()] = v.strip()
    return out


def _options(args: argparse.Namespace) -> Options:
    """The run options from the command line; ValueError names a bad --option or value."""
    opts = Options(strict=args.strict, only=tuple(args.only or ()), hosts_pattern=args.hosts, workers=args.n,
                   launcher=args.launcher, launcher_host=args.launcher_host,
                   backend_template=args.backend, full=args.full)
    opts = opts.with_values(_parse_kv(args.option or []))
    if args.quick:
        fio = min(int(opts.value("storage.fio.runtime_s")), QUICK_FIO_RUNTIME_S)
        opts = opts.with_values({**QUICK, "storage.fio.runtime_s": str(fio)})
    return opts


def _run(args: argparse.Namespace, out: Path, opts: Options) -> VerifyRun:
    if args.from_jobs or args.kubernetes:
        return run_jobs_verify(args.stack, out, opts, Path(args.from_jobs) if args.from_jobs else None,
                               stacks_dir=args.stacks_dir)
    return run_verify(args.stack, out, opts, Path(args.inventory) if args.inventory else None,
                      progress=ProgressPrinter(quiet=args.quiet), stacks_dir=args.stacks_dir,
                      inventory_renderer=render_inventory)


def _summary(run: VerifyRun, out: Path, strict: bool) -> str:
    c = run.counts()
    d = run.decision
    reused = sum(1 for r in run.results if r.reused_from)
    lines = [f"{run.stack}: {d.verdict.value} (exit code {d.exit_code}) — PASS {c['PASS']} · WARN {c['WARN']} · "
             f"FAIL {c['FAIL']} · ERROR {c['ERROR']} · NOT APPLICABLE {c['NOT_APPLICABLE']}"
             + (" (strict)" if strict else "") + (f" · {reused} reused" if reused else "")]
    lines += [f"  {r.verdict.value:5} {r.check} @ {r.subject.label}: {r.message[:200]}"
              for r in run.results if r.verdict.value in ("FAIL", "ERROR")]
    if d.missing:
        lines.append("  not measured, required for sign-off:")
        lines += [f"    {line[:240]}" for line in missing_groups(run)]
    lines.append(f"report: {out / 'report.html'} (also report.md, report.json; raw tool output in {out / 'raw'})")
    return "\n".join(lines)


def _earlier(stack: str, out: Path) -> str | None:
    """Where a default run finds the earlier report to reuse from: the newest reports/verify-<stack>-*/."""
    found = sorted(p for p in out.parent.glob(f"verify-{stack}-*") if (p / "report.json").is_file() and p != out)
    return str(found[-1]) if found else None


def _compare_only(old: Path, new: Path) -> int:
    """Two saved reports: print what changed; exit 1 when a row regressed."""
    loaded = [load_report(p) for p in (old, new)]
    if any(x is None for x in loaded):
        log.error("--compare: cannot read %s", " or ".join(str(p) for p, x in zip((old, new), loaded, strict=True)
                                                       if x is None))
        return EXIT_SPEC
    cmp = compare_reports(loaded[0][0], loaded[1][0])  # type: ignore[index]
    result(cmp.text())
    return EXIT_FAIL if cmp.regressions else EXIT_OK


def _compare_with(old: Path, run: VerifyRun, out: Path) -> str:
    loaded = load_report(old)
    if loaded is None:
        return f"--compare: cannot read {old}"
    cmp = compare_reports(loaded[0], report_dict(run))
    (out / "compare.json").write_text(json.dumps(cmp.as_dict(), indent=2) + "\n", encoding="utf-8")
    (out / "compare.txt").write_text(cmp.text() + "\n", encoding="utf-8")
    return f"compared with {old}:\n{cmp.text()}"


def cmd_verify(args: argparse.Namespace) -> int:
    if args.compare and len(args.compare) == 2:
        return _compare_only(Path(args.compare[0]), Path(args.compare[1]))
    try:
        opts = _options(args)
    except ValueError as exc:
        log.error("%s", exc)
        return EXIT_SPEC
    out = Path(args.out) if args.out else Path("reports") / f"verify-{args.stack}-{time.strftime('%Y%m%d-%H%M%S')}"
    if not (args.out or opts.reuse_from or opts.full):
        opts = dataclasses.replace(opts, reuse_from=_earlier(args.stack, out))
    try:
        run = _run(args, out, opts)  # a SpecError goes on to main: EXIT_SPEC with the field path and the fix
    except (ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        return EXIT_SPEC
    result(_summary(run, out, opts.strict))
    if args.compare:
        result(_compare_with(Path(args.compare[0]), run, out))
    return run.exit_code


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser],
             parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    p = sub.add_parser("verify", parents=list(parents),
                       help="acceptance: conformance checks and benchmarks judged against the plan's targets",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_stack(p)
    p.add_argument("--inventory", metavar="DIR", help="kiln inventory (kiln inventory <stack> --out DIR); default: "
                   "rendered from the plan")
    jobs = p.add_mutually_exclusive_group()
    jobs.add_argument("--from-jobs", metavar="DIR", help="judge the in-cluster acceptance Jobs' saved logs: "
                      "DIR/<job>.log from `kubectl logs job/<job>` (docs/acceptance.md)")
    jobs.add_argument("--kubernetes", action="store_true", help="judge the in-cluster acceptance Jobs' logs, "
                      "read with `kubectl logs` from the training namespace")
    p.add_argument("--hosts", metavar="PATTERN", help="only these hosts: comma-separated globs of host or group names")
    p.add_argument("--only", nargs="+", metavar="CHECK", help="only these checks: ids, prefixes (storage) or globs")
    p.add_argument("--strict", action="store_true", help="NOT APPLICABLE counts as a failure")
    p.add_argument("--out", metavar="DIR", help="report directory (default reports/verify-<stack>-<time>)")
    p.add_argument("-n", type=int, default=4, metavar="N", help="hosts checked at once (default 4)")
    p.add_argument("--launcher", choices=["mpirun", "srun"], default="mpirun", help="multi-node launcher")
    p.add_argument("--launcher-host", metavar="HOST", help="host that launches multi-node benchmarks and warp")
    p.add_argument("--backend", metavar="SPEC", help="testinfra host spec for every host, e.g. 'ssh://root@{host}' "
                   "(default: from the inventory's ansible_connection)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="a run option or a check's variable <scope>.<name> (docs/acceptance.md), e.g. "
                   "workdir=/scratch/kv storage.fio.runtime_s=30 objectstore.warp.duration_s=10")
    p.add_argument("--quick", action="store_true", help="short benchmark durations (smoke test, not for sign-off)")
    p.add_argument("--full", action="store_true", help="measure everything: reuse no earlier measurement (by default "
                   "a benchmark row whose plan, host facts and tool versions are unchanged is reused, up to "
                   "reuse_max_age_h hours old)")
    p.add_argument("--compare", nargs="+", metavar="REPORT", help="OLD.json: after the run, what changed since that "
                   "sign-off (regressions first; also <out>/compare.json); OLD.json NEW.json: compare two saved "
                   "reports without running (exit 1 when a row regressed)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_verify)
