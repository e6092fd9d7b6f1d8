"""`kiln verify <stack>`: run the acceptance suite against a stack's hosts and write the report.

Exit codes: 0 every row PASS, WARN or NOT APPLICABLE; 1 any FAIL or ERROR (with --strict also any NOT
APPLICABLE); 2 bad usage (unknown check, option or inventory).
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from kiln.cli.common import EXIT_SPEC, add_stack, result
from kiln.render.inventory import render_inventory
from kiln.verify.api import run_jobs_verify, run_verify
from kiln.verify.checks.options import Options
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
                   backend_template=args.backend)
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
    lines = [f"{run.stack}: PASS {c['PASS']} · WARN {c['WARN']} · FAIL {c['FAIL']} · ERROR {c['ERROR']} · "
             f"NOT APPLICABLE {c['NOT_APPLICABLE']}{' (strict)' if strict else ''}"]
    lines += [f"  {r.verdict.value:5} {r.check} @ {r.subject.label}: {r.message[:200]}"
              for r in run.results if r.verdict.value in ("FAIL", "ERROR")]
    lines.append(f"report: {out / 'report.html'} (also report.md, report.json; raw tool output in {out / 'raw'})")
    return "\n".join(lines)


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        opts = _options(args)
    except ValueError as exc:
        log.error("%s", exc)
        return EXIT_SPEC
    out = Path(args.out) if args.out else Path("reports") / f"verify-{args.stack}-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        run = _run(args, out, opts)  # a SpecError goes on to main: EXIT_SPEC with the field path and the fix
    except (ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        return EXIT_SPEC
    result(_summary(run, out, opts.strict))
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
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_verify)
