"""Runner (selection, repetitions, warm-up, verdict rows, raw output, redaction), report files, inventory,
backends and the CLI, with TEST DOUBLE checks and remotes."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import ClassVar

import pytest

from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks import REGISTRY
from kiln.verify.checks.check import Check, CheckError, NotApplicable, Rep, Sample, Subject
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Options
from kiln.verify.hosts import backend_spec
from kiln.verify.judge import Verdict
from kiln.verify.report import REPORT_SCHEMA, anchor, render_html, render_markdown, write_report
from kiln.verify.runner import Runner, VerifyRun, select_hosts, select_targets
from tests.unit.verify.verify_fakes import FakeRemote, context, lab

ROOT = Path(__file__).resolve().parents[3]


class Seq(Check):
    """TEST DOUBLE check: returns the next value of a sequence (warm-up first)."""

    id = "test.seq"
    runbook = "docs/runbooks/acceptance-storage.md"
    parallel_hosts = True
    values: ClassVar[itertools.cycle[float]]

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        v = next(self.values)
        if v < 0:
            raise CheckError("tool exploded with token s3cr3t")
        return Sample(v, raw={"out.txt": f"value {v} secret s3cr3t"}, info={"rep": rep.label})


class Broken(Check):
    id = "test.broken"

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        raise KeyError("boom")


class Na(Check):
    id = "test.na"

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        raise NotApplicable("no widget")


def tgt(check: str, scope: str = "host", requires: tuple[str, ...] = (), required: bool = True) -> AcceptanceTarget:
    return AcceptanceTarget(
        check=check, metric="bw", unit="GB/s", expected=10.0, warn=9.0, fail=7.5, why="because",
        scope=scope,  # type: ignore[arg-type]
        higher_is_better=True, group="kiln_compute", requires=requires, required=required,
        required_why="test" if required else "test: the plan has no widget",
    )


@pytest.fixture
def fake_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (Seq, Broken, Na):
        monkeypatch.setitem(REGISTRY, cls.id, cls())


def runner(tmp_path: Path, options: Options | None = None, hosts: tuple[str, ...] = ("gpu001", "gpu002"),
           msgs: list[str] | None = None, **acc: float) -> Runner:
    ctx = context({h: FakeRemote(h) for h in hosts}, options or Options(workers=2), **acc)
    if msgs is not None:
        ctx.progress = msgs.append
    return Runner(ctx, tmp_path, secrets=("s3cr3t",))


def test_warmup_is_discarded_and_progress_shows_repetitions(tmp_path: Path, fake_checks: None) -> None:
    Seq.values = itertools.cycle([1.0, 10.0, 10.5, 11.0])  # warm-up outlier 1.0, then three good runs
    msgs: list[str] = []
    [res] = runner(tmp_path, hosts=("gpu001",), msgs=msgs, warmup=1, repetitions=3).run([tgt("test.seq")])
    assert res.warmup_samples == [1.0] and res.samples == [10.0, 10.5, 11.0]
    assert res.verdict is Verdict.PASS and res.stats is not None and res.stats.median == 10.5
    assert any("test.seq @ gpu001: warm-up 1/1" in m for m in msgs)
    assert any("test.seq @ gpu001: rep 3/3 = 11 GB/s" in m for m in msgs)
    raw = tmp_path / "raw" / "test.seq" / "gpu001" / "rep2-out.txt"
    assert raw.read_text() == "value 10.5 secret ***"  # secrets never reach the report directory
    assert "raw/test.seq/gpu001/warmup1-out.txt" in res.raw_files


def test_failure_and_unstable(tmp_path: Path, fake_checks: None) -> None:
    Seq.values = itertools.cycle([5.0])
    [res] = runner(tmp_path, hosts=("gpu001",), warmup=0, repetitions=2).run([tgt("test.seq")])
    assert res.verdict is Verdict.FAIL and "fail threshold 7.5" in res.message
    Seq.values = itertools.cycle([9.5, 30.0, 10.0])
    [res] = runner(tmp_path, hosts=("gpu001",), warmup=0, repetitions=3, cv_limit=0.1).run([tgt("test.seq")])
    assert res.unstable and res.verdict is Verdict.WARN


def test_errors_are_rows_never_passes(tmp_path: Path, fake_checks: None) -> None:
    Seq.values = itertools.cycle([-1.0])
    rows = runner(tmp_path, hosts=("gpu001",)).run([tgt("test.seq"), tgt("test.broken"), tgt("test.na"),
                                                   tgt("test.unknown")])
    v = {r.check: r for r in rows}
    assert v["test.seq"].verdict is Verdict.ERROR and "s3cr3t" not in v["test.seq"].message
    assert v["test.broken"].verdict is Verdict.ERROR and "internal error: KeyError" in v["test.broken"].message
    assert v["test.na"].verdict is Verdict.NOT_APPLICABLE and "no widget" in v["test.na"].message
    assert v["test.unknown"].verdict is Verdict.ERROR and "no check implemented" in v["test.unknown"].message


def test_requirements_make_rows_not_applicable(tmp_path: Path, fake_checks: None) -> None:
    Seq.values = itertools.cycle([10.0])
    rows = runner(tmp_path).run([tgt("test.seq", requires=("gpu",))])
    assert [r.verdict for r in rows] == [Verdict.NOT_APPLICABLE] * 2
    assert rows[0].message.startswith("not applicable on this host: no NVIDIA GPU")


def test_pairs_need_two_hosts(tmp_path: Path, fake_checks: None) -> None:
    [row] = runner(tmp_path, hosts=("gpu001",)).run([t for t in lab()[0].targets if t.check == "network.iperf3"])
    assert row.verdict is Verdict.NOT_APPLICABLE and "needs two hosts of kiln_compute" in row.message


def test_group_without_selected_hosts(tmp_path: Path) -> None:
    rows = runner(tmp_path, hosts=("gpu001",)).run(
        [t for t in lab()[0].targets if t.check == "conformance.objectstore_services"])
    assert rows[0].verdict is Verdict.NOT_APPLICABLE
    assert "no selected host is in group kiln_objectstore" in rows[0].message


def test_selection() -> None:
    plan, inv, _ = lab()
    assert select_hosts(plan, inv, "gpu*,kiln_objectstore") == ["gpu001", "gpu002", "s3-01"]
    assert [t.check for t in select_targets(plan, ("network",))] == ["network.iperf3"]
    assert len(select_targets(plan, ("storage.fio_local_*",))) == 2
    with pytest.raises(ValueError, match="matches no check"):
        select_targets(plan, ("nope",))


def make_run(tmp_path: Path, fake_checks: None, strict: bool = False) -> VerifyRun:
    Seq.values = itertools.cycle([10.0, 5.0])
    opts = Options(strict=strict)
    r = runner(tmp_path, options=opts, hosts=("gpu001",), warmup=0, repetitions=1)
    targets = (tgt("test.seq"), tgt("test.seq"), tgt("test.na", required=False))
    rows = r.run(list(targets))
    plan = dataclasses.replace(lab()[0], targets=targets)  # the sign-off covers these targets only
    return VerifyRun("lab", plan, r.ctx.acceptance, opts, rows, ["gpu001"], "test", 0.0, 1.0, tmp_path)


def test_report_files(tmp_path: Path, fake_checks: None) -> None:
    run = make_run(tmp_path, fake_checks)
    paths = write_report(run)
    assert [p.name for p in paths] == ["report.json", "report.md", "report.html"]
    d = json.loads((tmp_path / "report.json").read_text())
    assert d["schema"] == REPORT_SCHEMA and d["summary"]["exit_code"] == 1 and d["summary"]["verdict"] == "REJECTED"
    assert d["summary"]["counts"] == {"PASS": 1, "WARN": 0, "FAIL": 1, "NOT_APPLICABLE": 1, "ERROR": 0}
    row = next(x for x in d["results"] if x["verdict"] == "FAIL")
    assert row["target"]["expected"] == 10.0 and row["measured"]["median"] == 5.0
    assert row["runbook"] == "docs/runbooks/acceptance-storage.md#testseq"
    md = (tmp_path / "report.md").read_text()
    assert "| FAIL | `test.seq` | gpu001 | 10 GB/s (warn < 9, fail < 7.5) | 5 GB/s |" in md
    assert "## Sign-off: **REJECTED** (exit code 1)" in md and "## Where to look first" in md
    assert "- NOT APPLICABLE, 1 row (not required by this plan): no widget — test.na on gpu001" in md
    assert "Sign-off: REJECTED" in render_html(run) and "<script" not in render_html(run)


def test_html_report_escapes_check_output(tmp_path: Path, fake_checks: None) -> None:
    """Check messages, details and raw file names come from the hosts: the HTML report shows them as text."""
    run = make_run(tmp_path, fake_checks)
    hostile = '<script>alert("x")</script>'
    row = next(r for r in run.results if r.verdict is Verdict.FAIL)
    row.message = f"fio said {hostile}"
    row.details = [f"stderr: {hostile}", "a & b"]
    row.raw_files = ['raw/x/"><img src=y>.txt']
    html = render_html(run)
    assert "<script" not in html and "<img" not in html
    assert "fio said &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "a &amp; b" in html and 'href="raw/x/&#34;&gt;&lt;img src=y&gt;.txt"' in html
    md = render_markdown(run)
    assert f"fio said {hostile}" in md  # markdown and JSON keep the text as measured


def test_strict_counts_not_applicable_as_failure(tmp_path: Path, fake_checks: None) -> None:
    run = make_run(tmp_path, fake_checks, strict=True)
    assert run.counts()["FAIL"] == 2 and run.exit_code == 1
    assert "(strict: not applicable)" in render_markdown(run)


def test_runbooks_cover_every_check() -> None:
    for check in REGISTRY.values():
        if check.id.startswith("test."):
            continue
        doc = ROOT / check.runbook
        assert doc.exists(), f"{check.id}: runbook {check.runbook} missing"
        headings = {anchor(line.lstrip("#").strip()) for line in doc.read_text().splitlines()
                    if line.startswith("## ")}
        assert anchor(check.id) in headings, f"{check.runbook} has no '## {check.id}' section"


def test_acceptance_doc_covers_every_check() -> None:
    text = (ROOT / "docs" / "acceptance.md").read_text()
    for check in REGISTRY:
        if not check.startswith("test."):
            assert f"`{check}`" in text, f"docs/acceptance.md does not describe {check}"


def test_inventory_merge_and_backends() -> None:
    _, inv, _ = lab()
    v = inv.vars("gpu001")
    assert v["ansible_host"] == "10.89.10.2" and v["nccl_env"]["NCCL_IB_DISABLE"] == "1"
    assert "kiln_pool_gpu" in v["group_names"] and inv.storage_addresses("gpu001") == ["10.89.20.2"]
    assert backend_spec("gpu001", v, None) == "ssh://root@10.89.10.2"  # the lab is reached over SSH
    assert backend_spec("gpu001", {"ansible_connection": "containers.podman.podman",
                                   "ansible_host": "kiln-lab-gpu001"}, None) == "podman://kiln-lab-gpu001"
    assert backend_spec("gpu001", v, None, "ssh://{address}?ssh_config=/s/config") == \
        "ssh://10.89.10.2?ssh_config=/s/config"
    assert backend_spec("n1", {"ansible_host": "10.0.0.5", "ansible_user": "root"}, None) == "ssh://root@10.0.0.5"
    assert backend_spec("n1", {"ansible_connection": "local"}, None) == "local://"
    assert backend_spec("n1", {"ansible_connection": "winrm"}, Path("/i/hosts.yml")) == \
        "ansible://n1?ansible_inventory=/i/hosts.yml"
    assert backend_spec("n1", {}, None, "ssh://admin@{host}") == "ssh://admin@n1"


def test_a_waived_fail_stays_fail_in_the_report_and_does_not_fail_the_run(tmp_path: Path, fake_checks: None) -> None:
    import datetime

    from kiln.spec.models import Waiver
    from kiln.verify.runner import apply_waivers

    run = make_run(tmp_path, fake_checks)
    apply_waivers(run.results, [Waiver(check="test.seq", reason="the lab's two shared cores bound this check")],
                  datetime.date(2026, 11, 24))
    row = next(r for r in run.results if r.verdict is Verdict.FAIL)
    assert row.waiver.startswith("the lab's two shared cores")
    assert [r.waiver for r in run.results if r.verdict is not Verdict.FAIL] == ["", ""]  # PASS and N/A untouched
    assert run.exit_code == 4 and run.counts()["FAIL"] == 1  # ACCEPTED WITH WAIVERS
    d = json.loads(write_report(run)[0].read_text())
    assert d["summary"]["waived"] == 1 and d["summary"]["exit_code"] == 4
    assert d["summary"]["verdict"] == "ACCEPTED WITH WAIVERS"
    assert "FAIL · WAIVED: the lab's two shared cores" in render_markdown(run)
    assert "1 FAIL\nwaived" in render_html(run)
    strict = VerifyRun("lab", run.plan, run.acceptance, Options(strict=True), run.results, run.hosts, "test", 0.0,
                       1.0, tmp_path)
    assert strict.exit_code == 1  # a strict sign-off takes no exceptions


def test_an_expired_waiver_is_not_applied(tmp_path: Path, fake_checks: None) -> None:
    import datetime

    from kiln.spec.models import Waiver
    from kiln.verify.runner import apply_waivers

    run = make_run(tmp_path, fake_checks)
    w = Waiver(check="test.seq", reason="accepted until the new gateways arrive", expires=datetime.date(2026, 1, 31))
    apply_waivers(run.results, [w], datetime.date(2026, 2, 1))
    row = next(r for r in run.results if r.verdict is Verdict.FAIL)
    assert row.waiver == "" and run.exit_code == 1
    assert any("expired on 2026-01-31" in d for d in row.details)
