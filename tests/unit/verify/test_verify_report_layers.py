"""The report people look at (layers, collapsed NOT APPLICABLE lines, the chart), the evidence kept with it (host
facts), re-verification that reuses still-valid measurements, and `--compare` with a seeded regression; with TEST
DOUBLE checks and remotes."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from pathlib import Path
from typing import ClassVar

import pytest

from kiln.cli import main
from kiln.plan.model import AcceptanceTarget
from kiln.verify.chart import build_chart, score
from kiln.verify.checks import REGISTRY
from kiln.verify.checks.check import Check, NotApplicable, NothingPlanned, Rep, Sample, Subject
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Options
from kiln.verify.compare import compare_reports
from kiln.verify.facts import parse_facts
from kiln.verify.judge import Verdict
from kiln.verify.layers import by_layer, collapse
from kiln.verify.report import render_html, render_markdown, report_dict, write_report
from kiln.verify.runner import VerifyRun, execute
from tests.unit.verify.verify_fakes import FakeRemote, lab

FACTS = ("fact\tkernel\t6.1.0-28-amd64\nfact\tos\tDebian GNU/Linux 12 (bookworm)\nfact\tboot\tb00t\n"
         "fact\tconfig\tabc123\nabsent\tdriver\tno NVIDIA GPU (nvidia-smi not found)\ntool\tfio\tfio-3.33\n")


class Bw(Check):
    """TEST DOUBLE benchmark: the next value of `values`, counting its runs."""

    id = "storage.test_bw"
    parallel_hosts = True
    values: ClassVar[itertools.cycle[float]] = itertools.cycle([10.0])
    runs: ClassVar[int] = 0

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        type(self).runs += 1
        return Sample(next(self.values), raw={"out.txt": "figure"})


class Gpu(Check):
    id = "gpu.test_copy"

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        raise NotApplicable("no NVIDIA GPU on this host (nvidia-smi not found)")


class Planned(Check):
    id = "conformance.test_none"
    kind = "conformance"

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        raise NothingPlanned("the plan sets no widget")


def target(check: str, required: bool = True, expected: float = 10.0) -> AcceptanceTarget:
    return AcceptanceTarget(check=check, metric="bw", unit="GB/s", expected=expected, warn=expected * 0.8,
                            fail=expected * 0.4, why="test", scope="host", group="kiln_compute", required=required,
                            required_why="test")


TARGETS = (target("storage.test_bw"), target("gpu.test_copy"), target("conformance.test_none"))


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (Bw, Gpu, Planned):
        monkeypatch.setitem(REGISTRY, cls.id, cls())
    Bw.values, Bw.runs = itertools.cycle([10.0]), 0


def remotes(facts: str = FACTS) -> dict[str, FakeRemote]:
    return {h: FakeRemote(h).on("KILN_WORKDIR=", (0, facts, "")) for h in ("gpu001", "gpu002")}


def verify(out: Path, *, facts: str = FACTS, targets: tuple[AcceptanceTarget, ...] = TARGETS,
           options: Options | None = None) -> VerifyRun:
    plan, inv, acc = lab()
    plan = dataclasses.replace(plan, targets=targets)
    run = execute(plan=plan, acceptance=acc, inventory=inv, remotes=remotes(facts),  # type: ignore[arg-type]
                  options=options or Options(workers=2), out_dir=out, stack="lab", progress=lambda _m: None)
    write_report(run)
    return run


def test_rows_are_grouped_by_layer_and_not_applicable_rows_collapse(tmp_path: Path, checks: None) -> None:
    run = verify(tmp_path)
    assert [layer for layer, _ in by_layer(run.results)] == ["storage", "gpu", "conformance"]
    [gpu] = [collapse(rows) for layer, rows in by_layer(run.results) if layer == "gpu"]
    assert len(gpu) == 1 and gpu[0].rows == 2 and gpu[0].subjects == ("gpu001", "gpu002")
    assert gpu[0].reason == "no NVIDIA GPU on this host (nvidia-smi not found)" and gpu[0].evidence == "missing"
    md = render_markdown(run)
    assert "### GPU" in md and "### Storage" in md and "## By layer" in md
    assert ("- NOT APPLICABLE, 2 rows (not measured — required for sign-off): no NVIDIA GPU on this host "
            "(nvidia-smi not found) — gpu.test_copy on gpu001, gpu002") in md
    assert "2 rows (the plan asks for none here): the plan sets no widget" in md
    assert md.count("| PASS | `storage.test_bw`") == 2 and "| NOT APPLICABLE |" not in md  # collapsed, not rows
    assert "Sign-off: **INCOMPLETE**" in md and "NOT APPLICABLE: no NVIDIA GPU on this host" in md


def test_html_opens_with_an_inline_chart_and_fetches_nothing(tmp_path: Path, checks: None) -> None:
    run = verify(tmp_path)
    html = render_html(run)
    assert html.index("Sign-off: INCOMPLETE") < html.index("<svg") < html.index("<h2>By layer")
    assert "<script" not in html and not re.search(r"""(src|href)=["']https?://""", html)
    assert "<link" not in html and "@import" not in html
    chart = build_chart(run.results, strict=False)
    texts = [s.text for s in chart.shapes if s.tag == "text"]
    assert {"Storage", "GPU", "Conformance"} <= set(texts)
    assert "2 rows: 2 not measured" in texts and "2 rows: 2 pass" in texts
    assert any(t.startswith("storage.test_bw @ gpu001") for t in texts)
    assert any(t == "10 vs target 10 GB/s (100%)" for t in texts)
    bar = [s for s in chart.shapes if s.tag == "rect" and dict(s.attrs).get("fill") == "#2e7d32"]
    assert bar  # PASS bars are drawn in the pass colour
    assert score(run.results[0]) == pytest.approx(1.0)


def test_host_facts_and_tool_versions_are_in_the_report(tmp_path: Path, checks: None) -> None:
    verify(tmp_path)
    d = json.loads((tmp_path / "report.json").read_text())
    facts = d["host_facts"]["gpu001"]
    assert facts["facts"]["kernel"] == "6.1.0-28-amd64" and facts["tools"] == {"fio": "fio-3.33"}
    assert facts["absent"] == {"driver": "no NVIDIA GPU (nvidia-smi not found)"} and facts["error"] is None
    assert d["plan_digest"] and d["spec_digest"] and d["plan_digest"] != d["spec_digest"] and d["kiln_build"]
    md = (tmp_path / "report.md").read_text()
    assert "| gpu001 | 6.1.0-28-amd64 | Debian GNU/Linux 12 (bookworm) | not applicable: no NVIDIA GPU" in md
    assert parse_facts("h", "garbage\nfact\tkernel\t5.15\n").facts == {"kernel": "5.15"}


def test_a_rerun_reuses_unchanged_measurements_and_judges_them_again(tmp_path: Path, checks: None) -> None:
    first = verify(tmp_path)
    assert Bw.runs == 6 and all(not r.reused_from for r in first.results)  # 2 hosts × 3 repetitions
    Bw.values = itertools.cycle([1.0])  # a new measurement would FAIL: a reused row must keep the old figures
    second = verify(tmp_path)
    assert Bw.runs == 6, "nothing changed, nothing is measured again"
    bw = [r for r in second.results if r.check == "storage.test_bw"]
    assert all(r.reused_from and r.verdict is Verdict.PASS and r.samples == [10.0] * 3 for r in bw)
    assert all("reused from" in r.message and r.raw_files for r in bw)
    assert [r.verdict for r in second.results if r.check == "gpu.test_copy"] == [Verdict.NOT_APPLICABLE] * 2
    d = report_dict(second)
    assert d["summary"]["reused"] == 2 and "PASS · reused from " in render_markdown(second)


@pytest.mark.parametrize("change", ["fact", "full", "option", "age"])
def test_a_change_measures_again(tmp_path: Path, checks: None, change: str) -> None:
    verify(tmp_path)
    Bw.values = itertools.cycle([1.0])
    opts = Options(workers=2)
    facts = FACTS
    if change == "fact":
        facts = FACTS.replace("fio-3.33", "fio-3.35")  # a tool upgrade on the hosts
    elif change == "full":
        opts = Options(workers=2, full=True)
    elif change == "option":
        opts = Options(workers=2).with_values({"storage.fio.runtime_s": "7"})
    else:
        opts = Options(workers=2, reuse_max_age_h=0.0)
    second = verify(tmp_path, facts=facts, options=opts)
    bw = [r for r in second.results if r.check == "storage.test_bw"]
    assert Bw.runs == 12 and all(not r.reused_from and r.verdict is Verdict.FAIL for r in bw), change


def test_compare_puts_a_seeded_regression_first(tmp_path: Path, checks: None) -> None:
    old = report_dict(verify(tmp_path / "old"))
    Bw.values = itertools.cycle([10.0, 10.0, 10.0, 3.0, 3.0, 3.0])  # gpu002 regresses below the fail threshold
    new = report_dict(verify(tmp_path / "new", facts=FACTS.replace("fio-3.33", "fio-3.35"),
                             options=Options(workers=1)))
    cmp = compare_reports(old, new)
    first = cmp.rows[0]
    assert (first.check, first.subject, first.kind) == ("storage.test_bw", "gpu002", "regression")
    assert (first.old_verdict, first.new_verdict) == ("PASS", "FAIL") and first.change == pytest.approx(-0.7)
    assert [r.kind for r in cmp.rows[1:]] == ["unchanged"] * (len(cmp.rows) - 1)
    assert cmp.old_verdict == "INCOMPLETE" and cmp.new_verdict == "REJECTED"
    text = cmp.text()
    assert text.splitlines()[1].startswith("  REGRESSION: storage.test_bw @ gpu002: PASS → FAIL, 10 → 3 GB/s (-70.0%)")
    assert "WORSE" in text.splitlines()[0] and "gpu001 fio: fio-3.33 → fio-3.35" in text


def test_compare_cli_on_two_saved_reports(tmp_path: Path, checks: None, capsys: pytest.CaptureFixture[str]) -> None:
    verify(tmp_path / "old")
    Bw.values = itertools.cycle([10.0, 10.0, 10.0, 9.0, 8.5, 8.5])  # gpu002 median 8.5: same verdict, 15 % lower
    verify(tmp_path / "new", options=Options(workers=1, full=True))
    rc = main(["verify", "lab", "--compare", str(tmp_path / "old" / "report.json"), str(tmp_path / "new")])
    out = capsys.readouterr().out
    assert rc == 1 and "REGRESSION: storage.test_bw @ gpu002: PASS → PASS, 10 → 8.5 GB/s (-15.0%)" in out
    assert main(["verify", "lab", "--compare", str(tmp_path / "old"), str(tmp_path / "old")]) == 0
