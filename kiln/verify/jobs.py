"""Judging the in-cluster acceptance Jobs (kiln render / the Pulumi program's Acceptance component).

The Jobs print their tools' raw output and judge nothing. `kiln verify <stack> --from-jobs DIR` reads
one saved log per Job (`kubectl logs job/<name> > DIR/<name>.log`), `--kubernetes` collects the logs
with kubectl; either way every log is parsed with kiln.verify.parsers and judged with kiln.verify.judge
against the plan's targets, like every other acceptance check, and written as the usual report.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from kiln.plan.acceptance_jobs import FIO_BEGIN, FIO_END, JobCheck, acceptance_jobs
from kiln.plan.model import AcceptanceTarget, Plan
from kiln.verify.checks.check import Subject
from kiln.verify.checks.options import Options
from kiln.verify.judge import Verdict, judge
from kiln.verify.parsers import ParseError, parse_fio, parse_nccl_tests, parse_warp
from kiln.verify.runner import Result, VerifyRun

GB = 1e9
LOG_SUFFIXES = (".log", ".txt", "")


def fio_section(log: str, op: str) -> str:
    """The fio JSON of one pass (write or read) from the fio Job's log, between its framing lines."""
    begin, end = FIO_BEGIN.format(op=op), FIO_END.format(op=op)
    lines = log.splitlines()
    if begin not in lines:
        raise ParseError("fio", f"no {begin!r} line in the Job log (the {op} pass did not start)", log[-2000:])
    start = lines.index(begin) + 1
    stop = lines.index(end, start) if end in lines[start:] else len(lines)
    return "\n".join(lines[start:stop]) + "\n"


def measure(jc: JobCheck, log: str) -> tuple[float, dict[str, object]]:
    """The value a Job's log shows for its check (GB/s), with the figures beside it; ParseError if none."""
    if jc.tool == "nccl-tests":
        res = parse_nccl_tests(log)
        return res.busbw_GBps, {"avg_busbw_GBps": res.avg_busbw_GBps, "ranks": res.ranks,
                                "largest_size": max(r.size_bytes for r in res.rows)}
    if jc.tool in ("fio-write", "fio-read"):
        op = jc.tool.removeprefix("fio-")
        fio = parse_fio(fio_section(log, op))
        return fio.aggregate_Bps(op) / GB, {"numjobs": len(fio.jobs), "fio": fio.version}
    w = parse_warp(log).op(jc.tool.removeprefix("warp-"))
    return w.bytes_per_s / GB, {"ops_per_s": w.ops_per_s, "requests": w.requests, "errors": w.errors}


def _target(plan: Plan, jc: JobCheck) -> AcceptanceTarget:
    return next(t for t in plan.targets if t.check == jc.check and t.group == jc.group)


def judge_logs(plan: Plan, logs: dict[str, str], cv_limit: float,
               missing: str = "no saved log") -> list[Result]:
    """One result per check of the plan's acceptance Jobs; `logs` maps the log Job's name to its log."""
    out: list[Result] = []
    for jc in acceptance_jobs(plan):
        target = _target(plan, jc)
        subject = Subject(f"job/{jc.log_job}", ())
        log = logs.get(jc.log_job)
        if log is None:
            out.append(Result(target, subject, Verdict.NOT_APPLICABLE,
                              f"not applicable on this host: {missing} for job/{jc.log_job}", tools=(jc.tool,)))
            continue
        try:
            value, info = measure(jc, log)
        except ParseError as exc:
            out.append(Result(target, subject, Verdict.ERROR, str(exc), tools=(jc.tool,)))
            continue
        j = judge(target, [value], cv_limit)
        out.append(Result(target, subject, j.verdict, j.message, stats=j.stats, samples=[value], info=dict(info),
                          tools=(jc.tool,)))
    return out


def logs_from_dir(directory: Path, names: list[str]) -> dict[str, str]:
    """Saved Job logs: DIR/<job>.log (or .txt, or no suffix) for each name that has one."""
    if not directory.is_dir():
        raise FileNotFoundError(f"--from-jobs {directory}: no such directory")
    out: dict[str, str] = {}
    for name in names:
        for suffix in LOG_SUFFIXES:
            p = directory / f"{name}{suffix}"
            if p.is_file():
                out[name] = p.read_text(encoding="utf-8", errors="replace")
                break
    return out


def logs_from_kubectl(namespace: str, names: list[str], timeout_s: int = 120) -> tuple[dict[str, str], str]:
    """`kubectl logs job/<name>` for each Job; ({}, reason) when kubectl is absent."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return {}, "kubectl is not installed (save the logs with `kubectl logs` elsewhere and use --from-jobs)"
    out: dict[str, str] = {}
    for name in names:
        proc = subprocess.run([kubectl, "-n", namespace, "logs", f"job/{name}"], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        if proc.returncode == 0:
            out[name] = proc.stdout
    return out, "kubectl logs returned nothing"


def verify_jobs(stack: str, plan: Plan, out_dir: Path, options: Options,
                from_dir: Path | None) -> VerifyRun:
    """Judge the acceptance Jobs' logs (saved in `from_dir`, else read with kubectl) into a VerifyRun."""
    started = time.time()
    names = sorted({jc.log_job for jc in acceptance_jobs(plan)})
    if from_dir is not None:
        logs, missing, source = logs_from_dir(from_dir, names), "no saved log", f"Job logs in {from_dir}"
    else:
        ns = plan.kubernetes.training_namespace
        logs, missing = logs_from_kubectl(ns, names)
        source = f"kubectl logs -n {ns}"
    acceptance = plan.acceptance
    results = judge_logs(plan, logs, acceptance.cv_limit, missing)
    raw = out_dir / "raw"
    for name, text in logs.items():
        raw.mkdir(parents=True, exist_ok=True)
        (raw / f"{name}.log").write_text(text, encoding="utf-8")
    for r in results:
        if r.subject.label.removeprefix("job/") in logs:
            r.raw_files.append(f"raw/{r.subject.label.removeprefix('job/')}.log")
    return VerifyRun(
        stack=stack, plan=plan, acceptance=acceptance, options=options, results=results, hosts=[],
        inventory_source=source, started=started, finished=time.time(), out_dir=out_dir,
    )
