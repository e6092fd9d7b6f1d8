"""The acceptance report: report.json (schema kiln.verify.report/v2), report.md and report.html.

It opens with the sign-off (kiln/verify/verdict.py) and what evidence is missing for it, then groups the rows by
layer (kiln/verify/layers.py) with NOT APPLICABLE rows collapsed into one line per reason; the HTML report starts
with a chart of measured vs target per layer (kiln/verify/chart.py). Per row: the target (expected, warn, fail,
unit, why), the measured median, min–max, CV, runs, the verdict, whether a sign-off needs it, and for anything that
is not a PASS the first place to look (a runbook section). It records the host facts and tool versions
(kiln/verify/facts.py) and the plan digest. Raw tool output lies beside the report under raw/<check>/<subject>/.
docs/acceptance.md documents the format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kiln.plan.serialize import target_dict
from kiln.templating import environment
from kiln.verify.chart import build_chart, category
from kiln.verify.judge import Verdict, effective
from kiln.verify.layers import Collapsed, by_layer, collapse, layer_of, layer_title, reason_of
from kiln.verify.provenance import KILN_VERSION, REPORT_SCHEMA, acceptance_dict, iso, kiln_build
from kiln.verify.runbooks import anchor, runbook_href, runbook_ref
from kiln.verify.runner import Result, VerifyRun
from kiln.verify.verdict import Decision, Evidence, SignOff, evidence

ORDER = {Verdict.FAIL: 0, Verdict.ERROR: 1, Verdict.WARN: 2, Verdict.NOT_APPLICABLE: 3, Verdict.PASS: 4}
__all__ = ["REPORT_SCHEMA", "anchor", "render_html", "render_markdown", "report_dict", "write_report"]

#: What each sign-off means, in the report's words.
MEANING = {
    SignOff.ACCEPTED: "every required check was measured and none failed",
    SignOff.ACCEPTED_WITH_WAIVERS: "every required check was measured; the only failures are waived "
                                   "(acceptance.waivers, reasons in the rows)",
    SignOff.INCOMPLETE: "evidence is missing: a required check was not measured (NOT APPLICABLE, ERROR or not run); "
                        "nothing is claimed for it",
    SignOff.REJECTED: "a check failed its target and no waiver covers it",
}


def _num(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def result_dict(r: Result, strict: bool) -> dict[str, Any]:
    st = r.stats
    return {
        "check": r.check,
        "layer": layer_of(r.check),
        "kind": r.kind,
        "subject": r.subject.label,
        "hosts": list(r.subject.hosts),
        "verdict": r.verdict.value,
        "effective_verdict": effective(r.verdict, strict).value,
        "evidence": evidence(r).value,
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
        "measured_at": iso(r.measured_at) if r.measured_at else None,
        "reused_from": r.reused_from or None,
        "runbook": runbook_ref(r.runbook, r.check),
    }


def summary_dict(run: VerifyRun, decision: Decision) -> dict[str, Any]:
    return {
        "verdict": decision.verdict.value,
        "exit_code": decision.exit_code,
        "counts": run.counts(),
        "strict": run.options.strict,
        "waived": decision.waived,
        "failed": list(decision.failed),
        "missing": [{"check": m.check, "subject": m.subject, "verdict": m.verdict, "reason": m.reason,
                     "requires": list(m.requires), "required_why": m.required_why} for m in decision.missing],
        "reused": sum(1 for r in run.results if r.reused_from),
    }


def report_dict(run: VerifyRun) -> dict[str, Any]:
    a = run.acceptance
    return {
        "schema": REPORT_SCHEMA,
        "kiln_version": KILN_VERSION,
        "kiln_build": kiln_build(),
        "stack": run.stack,
        "plan_schema": run.plan.schema,
        "plan_digest": run.plan_digest,
        "spec_digest": run.plan.spec_digest,
        "started": iso(run.started),
        "finished": iso(run.finished),
        "hosts": run.hosts,
        "inventory": run.inventory_source,
        "acceptance": acceptance_dict(a),
        "options": run.options.public(),
        "host_facts": {h: f.as_dict() for h, f in run.facts.items()},
        "summary": summary_dict(run, run.decision),
        "results": [result_dict(r, run.options.strict) for r in run.results],
    }


# ---- shared by the Markdown and HTML reports ------------------------------------------------------------------


def fmt(x: float | None) -> str:
    if x is None:
        return "—"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def measured(r: Result) -> tuple[str, str, str, str]:
    st = r.stats
    if st is None:
        return "—", "—", "—", "—"
    rng = f"{fmt(st.min)}–{fmt(st.max)}" if st.n > 1 else "—"
    cv = f"{st.cv:.1%}" if st.n > 1 else "—"
    unit = "" if r.kind == "conformance" else f" {r.target.unit}"
    return fmt(st.median) + unit, rng, cv, str(st.n)


def target_txt(r: Result) -> str:
    t = r.target
    if r.kind == "conformance":
        return f"{fmt(t.expected)} mismatches"
    op = "<" if t.higher_is_better else ">"
    return f"{fmt(t.expected)} {t.unit} (warn {op} {fmt(t.warn)}, fail {op} {fmt(t.fail)})"


def verdict_txt(r: Result, strict: bool) -> str:
    v = effective(r.verdict, strict)
    txt = v.value.replace("_", " ")
    if v is not r.verdict:
        txt += " (strict: not applicable)"
    if r.unstable:
        txt += " · UNSTABLE"
    if r.waiver and not strict:
        txt += f" · WAIVED: {r.waiver}"
    if r.reused_from:
        txt += f" · reused from {r.reused_from}"
    return txt


def sorted_rows(rows: list[Result], strict: bool) -> list[Result]:
    return sorted(rows, key=lambda r: (ORDER[effective(r.verdict, strict)], r.check, r.subject.label))


def shown_rows(rows: list[Result], strict: bool) -> list[Result]:
    """The rows a layer's table shows: all but NOT APPLICABLE (collapsed into one line per reason)."""
    return [r for r in sorted_rows(rows, strict) if r.verdict is not Verdict.NOT_APPLICABLE]


EVIDENCE_WORDS = {
    Evidence.MISSING: "not measured — required for sign-off",
    Evidence.OPTIONAL: "not required by this plan",
    Evidence.NOTHING_PLANNED: "the plan asks for none here",
}


def collapsed_txt(c: Collapsed) -> str:
    return (f"{c.rows} row{'s' if c.rows != 1 else ''} ({EVIDENCE_WORDS.get(c.evidence, c.evidence.value)}): "
            f"{c.reason} — {', '.join(c.checks)} on {', '.join(c.subjects)}")


def missing_groups(run: VerifyRun) -> list[str]:
    """The sign-off's missing evidence, one line per reason (rows), plus required checks not run."""
    rows = [r for r in run.results if evidence(r) is Evidence.MISSING]
    out: dict[str, tuple[list[str], list[str]]] = {}
    for r in rows:
        checks, subjects = out.setdefault(f"{r.verdict.value.replace('_', ' ')}: {reason_of(r)}", ([], []))
        checks.append(r.check)
        subjects.append(r.subject.label)
    lines = [f"{why} — {', '.join(dict.fromkeys(c))} on {', '.join(dict.fromkeys(s))}"
             for why, (c, s) in out.items()]
    not_run = [m for m in run.decision.missing if m.verdict == "NOT_RUN"]
    if any(m.check != "*" for m in not_run):
        lines.append(f"NOT RUN (left out of this pass) — {', '.join(m.check for m in not_run if m.check != '*')}")
    lines += [f"NOTHING MEASURED — {m.reason}" for m in not_run if m.check == "*"]
    return lines


def host_rows(run: VerifyRun) -> list[dict[str, str]]:
    """One row per host: its facts (or why it has none) and its tool versions."""
    out = []
    for h, f in run.facts.items():
        def val(k: str, facts: Any = f) -> str:
            return facts.facts.get(k) or (f"not applicable: {facts.absent[k]}" if k in facts.absent else "—")
        out.append({
            "host": h, "kernel": val("kernel"), "os": val("os"), "driver": val("driver"),
            "firmware": "; ".join(x for x in (val("hca_firmware"), val("gpu_firmware")) if x != "—"),
            "lustre": val("lustre"), "config": val("config"),
            "tools": f.error or "; ".join(f"{k}: {v}" for k, v in sorted(f.tools.items())) or "—",
        })
    return out


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _bar(counts: dict[str, int], width: int = 20) -> str:
    total = max(1, sum(counts.values()))
    good = round(width * (counts["PASS"] + counts["WARN"]) / total)
    bad = round(width * (counts["FAIL"] + counts["ERROR"]) / total)
    gone = round(width * counts["missing"] / total)
    return "█" * good + "▓" * bad + "░" * gone + "·" * max(0, width - good - bad - gone)


def layer_counts(rows: list[Result], strict: bool) -> dict[str, int]:
    counts = {"PASS": 0, "WARN": 0, "FAIL": 0, "ERROR": 0, "missing": 0, "optional": 0}
    for r in rows:
        counts[category(r, strict)] += 1
    return counts


# ---- Markdown --------------------------------------------------------------------------------------------------


def _md_header(run: VerifyRun, d: dict[str, Any]) -> list[str]:
    a = run.acceptance
    s = d["summary"]
    c = s["counts"]
    sign = SignOff(s["verdict"])
    lines = [
        f"# Acceptance report — {run.stack}", "",
        f"Plan {run.plan.schema} digest `{run.plan_digest}` (spec `{run.plan.spec_digest}`) · kiln "
        f"{d['kiln_version']} · {d['started']} → {d['finished']}",
        f"Hosts ({len(run.hosts)}): {', '.join(run.hosts) or 'none'} · inventory: {run.inventory_source}",
        f"Protocol: {a.warmup} warm-up + {a.repetitions} measured runs per benchmark, verdict on the median; "
        f"CV limit {a.cv_limit:.0%}" + (" · **strict**: NOT APPLICABLE counts as FAIL" if run.options.strict else ""),
        "",
        f"## Sign-off: **{sign.value}** (exit code {s['exit_code']})", "",
        f"{MEANING[sign]}. PASS {c['PASS']} · WARN {c['WARN']} · FAIL {c['FAIL']} · ERROR {c['ERROR']} · "
        f"NOT APPLICABLE {c['NOT_APPLICABLE']}"
        + (f" · {s['waived']} FAIL waived" if s["waived"] else "")
        + (f" · {s['reused']} rows reused from an earlier run (nothing they depend on changed)" if s["reused"] else ""),
    ]
    if s["failed"]:
        lines += ["", "Failed (counts against the sign-off):", ""] + [f"- `{x}`" for x in s["failed"]]
    missing = missing_groups(run)
    if missing:
        lines += ["", "Not measured, required for sign-off:", ""] + [f"- {_md(x)}" for x in missing]
    return lines


def _md_layers(run: VerifyRun) -> list[str]:
    strict = run.options.strict
    lines = ["", "## By layer", "", "| Layer | | pass | warn | fail | error | not measured | not required |",
             "|---|---|---|---|---|---|---|---|"]
    groups = by_layer(run.results)
    for layer, rows in groups:
        k = layer_counts(rows, strict)
        lines.append(f"| {layer_title(layer)} | `{_bar(k)}` | {k['PASS']} | {k['WARN']} | {k['FAIL']} | "
                     f"{k['ERROR']} | {k['missing']} | {k['optional']} |")
    for layer, rows in groups:
        lines += ["", f"### {layer_title(layer)}", ""]
        shown = shown_rows(rows, strict)
        if shown:
            lines += ["| Verdict | Check | Subject | Target | Median | Min–max | CV | Runs |",
                      "|---|---|---|---|---|---|---|---|"]
            for r in shown:
                med, rng, cv, n = measured(r)
                lines.append(f"| {verdict_txt(r, strict)} | `{r.check}` | {_md(r.subject.label)} | "
                             f"{_md(target_txt(r))} | {med} | {rng} | {cv} | {n} |")
        lines += [f"- NOT APPLICABLE, {_md(collapsed_txt(c))}" for c in collapse(rows)]
    return lines


def _md_look_first(run: VerifyRun) -> list[str]:
    strict = run.options.strict
    bad = [r for r in sorted_rows(run.results, strict)
           if effective(r.verdict, strict) in (Verdict.FAIL, Verdict.ERROR, Verdict.WARN)]
    if not bad:
        return []
    lines = ["", "## Where to look first", ""]
    for r in bad:
        lines += [f"### {verdict_txt(r, strict)}: `{r.check}` on {r.subject.label}", "", f"- {_md(r.message)}"]
        lines += [f"- {_md(det)[:500]}" for det in [x for x in r.details if x not in r.message][:20]]
        if r.runbook:
            lines.append(f"- Runbook: [{runbook_ref(r.runbook, r.check)}]({runbook_href(r.runbook, r.check)})")
        if r.raw_files:
            lines.append(f"- Raw output: {', '.join(f'`{p}`' for p in r.raw_files[:6])}"
                         + (" …" if len(r.raw_files) > 6 else ""))
        lines.append("")
    return lines


def _md_evidence(run: VerifyRun) -> list[str]:
    lines = ["", "## Hosts: facts and tool versions", "",
             "| Host | Kernel | OS | GPU driver | Firmware | Lustre | Config digest | Tools |",
             "|---|---|---|---|---|---|---|---|"]
    for h in host_rows(run):
        lines.append("| " + " | ".join(_md(h[k]) for k in ("host", "kernel", "os", "driver", "firmware", "lustre",
                                                            "config", "tools")) + " |")
    lines += ["", "## Targets: where the numbers come from", ""]
    seen: set[str] = set()
    for r in run.results:
        if r.check not in seen:
            seen.add(r.check)
            need = "required" if r.target.required else "not required"
            lines.append(f"- `{r.check}` ({r.target.metric}, {r.target.unit}, scope {r.target.scope}; {need}: "
                         f"{_md(r.target.required_why)}): {_md(r.target.why)}")
    return lines


def render_markdown(run: VerifyRun) -> str:
    d = report_dict(run)
    lines = _md_header(run, d) + _md_layers(run) + _md_look_first(run) + _md_evidence(run)
    lines += ["", "## Sign-off", "",
              "I have reviewed the verdict, every FAIL, ERROR and WARN row and every line of evidence not measured.",
              "", "Accepted by: ______________________  Date: ____________  Signature: ______________________", ""]
    return "\n".join(lines)


# ---- HTML ------------------------------------------------------------------------------------------------------


def _html_row(r: Result, strict: bool) -> dict[str, Any]:
    """One table row of the HTML report, as text: the template escapes every value."""
    med, rng, cv, n = measured(r)
    v = effective(r.verdict, strict).value
    look = None
    if v in ("FAIL", "ERROR", "WARN") and r.runbook:
        look = {"href": runbook_href(r.runbook, r.check), "text": runbook_ref(r.runbook, r.check)}
    return {
        "verdict": v, "verdict_text": verdict_txt(r, strict), "check": r.check, "subject": r.subject.label,
        "target": target_txt(r), "median": med, "range": rng, "cv": cv, "runs": n, "message": r.message,
        "look": look, "details": "\n".join(r.details)[:8000], "raw": [(p, Path(p).name) for p in r.raw_files[:8]],
    }


def _html_layers(run: VerifyRun) -> list[dict[str, Any]]:
    strict = run.options.strict
    return [
        {"title": layer_title(layer), "counts": layer_counts(rows, strict),
         "rows": [_html_row(r, strict) for r in shown_rows(rows, strict)],
         "collapsed": [{"text": collapsed_txt(c), "missing": c.evidence is Evidence.MISSING} for c in collapse(rows)]}
        for layer, rows in by_layer(run.results)
    ]


def render_html(run: VerifyRun) -> str:
    """report.html, rendered by kiln/templates/verify-report.html.j2 with autoescape (check output is untrusted)."""
    d = report_dict(run)
    s = d["summary"]
    whys = {r.check: (r.target.why, r.target.required, r.target.required_why) for r in run.results}
    return environment().get_template("verify-report.html.j2").render(
        d=d, s=s, meaning=MEANING[SignOff(s["verdict"])], strict=run.options.strict,
        cv_limit=f"{run.acceptance.cv_limit:.0%}", missing=missing_groups(run), chart=build_chart(run.results,
        run.options.strict), layers=_html_layers(run), hosts=host_rows(run), whys=list(whys.items()),
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
