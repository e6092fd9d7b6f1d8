"""The acceptance report: report.json (schema kiln.verify.report/v1), report.md and report.html.

Per row: the target (expected, warn, fail, unit, why), the measured median, min–max, CV, runs, the verdict,
and for anything that is not a PASS the first place to look (a runbook section). Raw tool output lies beside
the report under raw/<check>/<subject>/. docs/acceptance.md documents the format.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

from kiln.plan.serialize import target_dict
from kiln.templating import environment
from kiln.verify.judge import Verdict, effective
from kiln.verify.runner import Result, VerifyRun

REPORT_SCHEMA = "kiln.verify.report/v1"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("kiln")
    except Exception:  # not installed: running from a checkout
        return "unknown"


_kiln_version = _version()
# The clone kiln runs from, if any: runbook links then point at its docs/ (from a wheel, at the relative path).
REPO = Path(__file__).resolve().parents[2]
ORDER = {Verdict.FAIL: 0, Verdict.ERROR: 1, Verdict.WARN: 2, Verdict.NOT_APPLICABLE: 3, Verdict.PASS: 4}


def anchor(check: str) -> str:
    """GitHub's heading anchor for '## <check id>' (dots dropped): storage.fio_local_read → storagefio_local_read."""
    return re.sub(r"[^a-z0-9_\- ]", "", check.lower()).replace(" ", "-")


def runbook_ref(r: Result) -> str:
    return f"{r.runbook}#{anchor(r.check)}" if r.runbook else ""


def _num(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds")


def result_dict(r: Result, strict: bool) -> dict[str, Any]:
    st = r.stats
    return {
        "check": r.check,
        "kind": r.kind,
        "subject": r.subject.label,
        "hosts": list(r.subject.hosts),
        "verdict": r.verdict.value,
        "effective_verdict": effective(r.verdict, strict).value,
        "unstable": r.unstable,
        "waiver": r.waiver or None,
        "message": r.message,
        "target": target_dict(r.target),
        "measured": None if st is None else {
            "median": _num(st.median), "min": _num(st.min), "max": _num(st.max), "mean": _num(st.mean),
            "stdev": _num(st.stdev), "cv": _num(st.cv), "n": st.n, "unit": r.target.unit},
        "samples": [_num(x) for x in r.samples],
        "warmup_samples": [_num(x) for x in r.warmup_samples],
        "details": r.details,
        "info": r.info,
        "tools": list(r.tools),
        "raw": r.raw_files,
        "seconds": round(r.seconds, 2),
        "runbook": runbook_ref(r),
    }


def report_dict(run: VerifyRun) -> dict[str, Any]:
    a = run.acceptance
    return {
        "schema": REPORT_SCHEMA,
        "kiln_version": _kiln_version,
        "stack": run.stack,
        "plan_schema": run.plan.schema,
        "plan_digest": run.plan.spec_digest,
        "started": _iso(run.started),
        "finished": _iso(run.finished),
        "hosts": run.hosts,
        "inventory": run.inventory_source,
        "acceptance": {"repetitions": a.repetitions, "warmup": a.warmup, "cv_limit": a.cv_limit,
                       "fio_size_factor": a.fio_size_factor},
        "options": run.options.public(),
        "summary": {"counts": run.counts(), "exit_code": run.exit_code, "strict": run.options.strict,
                    "waived": sum(1 for r in run.results if r.waiver and not run.options.strict)},
        "results": [result_dict(r, run.options.strict) for r in run.results],
    }


def _fmt(x: float | None) -> str:
    if x is None:
        return "—"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def _measured(r: Result) -> tuple[str, str, str, str]:
    st = r.stats
    if st is None:
        return "—", "—", "—", "—"
    rng = f"{_fmt(st.min)}–{_fmt(st.max)}" if st.n > 1 else "—"
    cv = f"{st.cv:.1%}" if st.n > 1 else "—"
    return _fmt(st.median), rng, cv, str(st.n)


def _target_txt(r: Result) -> str:
    t = r.target
    if r.kind == "conformance":
        return f"{_fmt(t.expected)} mismatches"
    op = "<" if t.higher_is_better else ">"
    return f"{_fmt(t.expected)} {t.unit} (warn {op} {_fmt(t.warn)}, fail {op} {_fmt(t.fail)})"


def _verdict_txt(r: Result, strict: bool) -> str:
    v = effective(r.verdict, strict)
    txt = v.value.replace("_", " ")
    if v is not r.verdict:
        txt += " (strict: not applicable)"
    if r.unstable:
        txt += " · UNSTABLE"
    if r.waiver and not strict:
        txt += f" · WAIVED: {r.waiver}"
    return txt


def _sorted(run: VerifyRun) -> list[Result]:
    strict = run.options.strict
    return sorted(run.results, key=lambda r: (ORDER[effective(r.verdict, strict)], r.check, r.subject.label))


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _runbook_link(r: Result) -> str:
    ref = runbook_ref(r)
    if not ref:
        return ""
    local = REPO / r.runbook
    return f"[{ref}]({local.as_uri()}#{anchor(r.check)})" if local.exists() else ref


def render_markdown(run: VerifyRun) -> str:
    d = report_dict(run)
    c = d["summary"]["counts"]
    strict = run.options.strict
    lines = [
        f"# Acceptance report — {run.stack}",
        "",
        f"Plan {run.plan.schema} digest `{run.plan.spec_digest}` · kiln {d['kiln_version']} · "
        f"{d['started']} → {d['finished']}",
        f"Hosts ({len(run.hosts)}): {', '.join(run.hosts) or 'none'} · inventory: {run.inventory_source}",
        f"Protocol: {run.acceptance.warmup} warm-up + {run.acceptance.repetitions} measured runs per benchmark, "
        f"verdict on the median; CV limit {run.acceptance.cv_limit:.0%}"
        + (" · **strict**: NOT APPLICABLE counts as FAIL" if strict else ""),
        "",
        f"**Result: {'ACCEPTED' if d['summary']['exit_code'] == 0 else 'NOT ACCEPTED'}** (exit code "
        f"{d['summary']['exit_code']}) — PASS {c['PASS']} · WARN {c['WARN']} · FAIL {c['FAIL']} · "
        f"ERROR {c['ERROR']} · NOT APPLICABLE {c['NOT_APPLICABLE']}"
        + (f" · {d['summary']['waived']} FAIL waived (acceptance.waivers, reasons in the rows)"
           if d["summary"]["waived"] else ""),
        "",
        "| Verdict | Check | Subject | Target | Median | Min–max | CV | Runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in _sorted(run):
        med, rng, cv, n = _measured(r)
        unit = "" if r.kind == "conformance" or med == "—" else f" {r.target.unit}"
        lines.append(f"| {_verdict_txt(r, strict)} | `{r.check}` | {_md_cell(r.subject.label)} | "
                     f"{_md_cell(_target_txt(r))} | {med}{unit} | {rng} | {cv} | {n} |")
    bad = [r for r in _sorted(run) if effective(r.verdict, strict) in (Verdict.FAIL, Verdict.ERROR, Verdict.WARN)]
    if bad:
        lines += ["", "## Where to look first", ""]
        for r in bad:
            lines += [f"### {_verdict_txt(r, strict)}: `{r.check}` on {r.subject.label}", "",
                      f"- {_md_cell(r.message)}"]
            for det in [d for d in r.details if d not in r.message][:20]:
                lines.append(f"- {_md_cell(det)[:500]}")
            if r.runbook:
                lines.append(f"- Runbook: {_runbook_link(r)}")
            if r.raw_files:
                lines.append(f"- Raw output: {', '.join(f'`{p}`' for p in r.raw_files[:6])}"
                             + (" …" if len(r.raw_files) > 6 else ""))
            lines.append("")
    na = [r for r in run.results if r.verdict is Verdict.NOT_APPLICABLE]
    if na:
        lines += ["", "## Not applicable (never a pass)", ""]
        lines += [f"- `{r.check}` on {r.subject.label}: {_md_cell(r.message)}" for r in na]
    lines += ["", "## Targets: where the numbers come from", ""]
    seen: set[str] = set()
    for r in run.results:
        if r.check not in seen:
            seen.add(r.check)
            lines.append(f"- `{r.check}` ({r.target.metric}, {r.target.unit}, scope {r.target.scope}): "
                         f"{_md_cell(r.target.why)}")
    lines += ["", "## Sign-off", "",
              "I have reviewed every FAIL, ERROR, WARN and NOT APPLICABLE row above.", "",
              "Accepted by: ______________________  Date: ____________  Signature: ______________________", ""]
    return "\n".join(lines)


def _html_row(r: Result, strict: bool) -> dict[str, Any]:
    """One table row of the HTML report, as text: the template escapes every value."""
    med, rng, cv, n = _measured(r)
    v = effective(r.verdict, strict).value
    unit = "" if r.kind == "conformance" or med == "—" else f" {r.target.unit}"
    look = None
    if v in ("FAIL", "ERROR", "WARN") and r.runbook:
        local = REPO / r.runbook
        href = f"{local.as_uri()}#{anchor(r.check)}" if local.exists() else runbook_ref(r)
        look = {"href": href, "text": runbook_ref(r)}
    return {
        "verdict": v,
        "verdict_text": _verdict_txt(r, strict),
        "check": r.check,
        "subject": r.subject.label,
        "target": _target_txt(r),
        "median": med + unit,
        "range": rng,
        "cv": cv,
        "runs": n,
        "message": r.message,
        "look": look,
        "details": "\n".join(r.details)[:8000],
        "raw": [(p, Path(p).name) for p in r.raw_files[:8]],
    }


def render_html(run: VerifyRun) -> str:
    """report.html, rendered by kiln/templates/verify-report.html.j2 with autoescape (check output is untrusted)."""
    d = report_dict(run)
    strict = run.options.strict
    whys = {x["target"]["check"]: x["target"]["why"] for x in d["results"]}
    return environment().get_template("verify-report.html.j2").render(
        stack=run.stack,
        plan_schema=run.plan.schema,
        plan_digest=run.plan.spec_digest,
        kiln_version=str(d["kiln_version"]),
        started=d["started"],
        finished=d["finished"],
        hosts=run.hosts,
        inventory=run.inventory_source,
        warmup=run.acceptance.warmup,
        repetitions=run.acceptance.repetitions,
        cv_limit=f"{run.acceptance.cv_limit:.0%}",
        strict=strict,
        exit_code=d["summary"]["exit_code"],
        counts=d["summary"]["counts"],
        waived=d["summary"]["waived"],
        rows=[_html_row(r, strict) for r in _sorted(run)],
        whys=list(whys.items()),
    )


def write_report(run: VerifyRun) -> list[Path]:
    out = run.out_dir
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "report.json": json.dumps(report_dict(run), indent=2, ensure_ascii=False) + "\n",
        "report.md": render_markdown(run),
        "report.html": render_html(run),
    }
    paths = []
    for name, text in files.items():
        p = out / name
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(p)
        paths.append(p)
    run.report_files = paths
    return paths
