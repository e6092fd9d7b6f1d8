"""The sign-off (kiln/verify/verdict.py): ACCEPTED, ACCEPTED WITH WAIVERS, INCOMPLETE, REJECTED and their exit codes,
over TEST DOUBLE rows and over a whole lab run on hosts where nothing can be measured."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kiln.cli import common, main
from kiln.plan.model import AcceptanceTarget
from kiln.render.inventory import render_inventory
from kiln.verify.api import run_verify
from kiln.verify.checks.check import Subject
from kiln.verify.checks.options import Options
from kiln.verify.judge import Verdict, stats
from kiln.verify.runner import Result, VerifyRun
from kiln.verify.verdict import SIGN_OFF_EXIT, Evidence, SignOff, decide, evidence
from tests.unit.verify.verify_fakes import FakeRemote, lab


def target(check: str, required: bool = True) -> AcceptanceTarget:
    return AcceptanceTarget(check=check, metric="bw", unit="GB/s", expected=10.0, warn=9.0, fail=7.5, why="test",
                            scope="host", group="kiln_compute", required=required,
                            required_why="test: required" if required else "test: the plan has none")


def row(check: str, verdict: Verdict, *, required: bool = True, waiver: str = "", planned: bool = True) -> Result:
    measured = verdict in (Verdict.PASS, Verdict.WARN, Verdict.FAIL)
    return Result(target(check, required), Subject("gpu001", ("gpu001",)), verdict, f"{verdict.value} row",
                  stats=stats([10.0]) if measured else None, waiver=waiver, nothing_planned=not planned)


def test_exit_codes_are_the_clis() -> None:
    assert SIGN_OFF_EXIT == {SignOff.ACCEPTED: common.EXIT_OK, SignOff.REJECTED: common.EXIT_FAIL,
                             SignOff.INCOMPLETE: common.EXIT_INCOMPLETE,
                             SignOff.ACCEPTED_WITH_WAIVERS: common.EXIT_WAIVED}
    assert len(set(SIGN_OFF_EXIT.values()) | {common.EXIT_SPEC}) == 5  # usage errors stay distinguishable


def test_accepted_needs_every_required_check_measured() -> None:
    rows = [row("a.x", Verdict.PASS), row("a.y", Verdict.WARN)]
    d = decide(rows, [r.target for r in rows], strict=False)
    assert d.verdict is SignOff.ACCEPTED and d.exit_code == 0 and d.missing == ()


def test_not_applicable_of_a_required_check_is_incomplete_never_accepted() -> None:
    rows = [row("a.x", Verdict.PASS), row("gpu.h2d_bw", Verdict.NOT_APPLICABLE)]
    d = decide(rows, [r.target for r in rows], strict=False)
    assert d.verdict is SignOff.INCOMPLETE and d.exit_code == 3
    assert [(m.check, m.verdict) for m in d.missing] == [("gpu.h2d_bw", "NOT_APPLICABLE")]


def test_optional_and_nothing_planned_rows_are_not_missing_evidence() -> None:
    rows = [row("a.x", Verdict.PASS), row("conformance.rdma_ports", Verdict.NOT_APPLICABLE, required=False),
            row("conformance.nccl_conf", Verdict.NOT_APPLICABLE, planned=False)]
    assert [evidence(r) for r in rows] == [Evidence.MEASURED, Evidence.OPTIONAL, Evidence.NOTHING_PLANNED]
    assert decide(rows, [r.target for r in rows], strict=False).verdict is SignOff.ACCEPTED


def test_an_error_is_missing_evidence_even_for_an_optional_check() -> None:
    rows = [row("a.x", Verdict.PASS), row("b.y", Verdict.ERROR, required=False)]
    assert decide(rows, [r.target for r in rows], strict=False).verdict is SignOff.INCOMPLETE


def test_waived_fail_is_accepted_with_waivers_and_strict_takes_no_exceptions() -> None:
    rows = [row("a.x", Verdict.PASS), row("b.y", Verdict.FAIL, waiver="the storage lead accepts it until March")]
    d = decide(rows, [r.target for r in rows], strict=False)
    assert d.verdict is SignOff.ACCEPTED_WITH_WAIVERS and d.exit_code == 4 and d.waived == 1
    strict = decide(rows, [r.target for r in rows], strict=True)
    assert strict.verdict is SignOff.REJECTED and strict.failed == ("b.y @ gpu001",)


def test_a_fail_outranks_missing_evidence() -> None:
    rows = [row("a.x", Verdict.FAIL), row("b.y", Verdict.NOT_APPLICABLE)]
    assert decide(rows, [r.target for r in rows], strict=False).verdict is SignOff.REJECTED
    assert decide(rows[1:], [r.target for r in rows], strict=True).verdict is SignOff.REJECTED  # strict: N/A fails


def test_a_required_check_left_out_is_not_run_and_incomplete() -> None:
    rows = [row("a.x", Verdict.PASS)]
    d = decide(rows, [rows[0].target, target("gpu.h2d_bw"), target("fabric.ib_write_bw", required=False)],
               strict=False)
    assert d.verdict is SignOff.INCOMPLETE
    assert [(m.check, m.verdict) for m in d.missing] == [("gpu.h2d_bw", "NOT_RUN")]


def test_nothing_measured_is_incomplete() -> None:
    rows = [row("a.x", Verdict.NOT_APPLICABLE, required=False)]
    d = decide(rows, [r.target for r in rows], strict=False)
    assert d.verdict is SignOff.INCOMPLETE and d.missing[-1].reason == "nothing was measured"


def test_plan_lists_required_checks_for_what_it_has() -> None:
    """A GPU pool requires the GPU rows, Lustre clients the storage rows, SeaweedFS the object-store rows; RDMA on
    the lab's tcp fabric is optional."""
    plan, _, _ = lab()
    req = {t.check: (t.required, t.required_why) for t in plan.targets}
    for check in ("gpu.h2d_bw", "conformance.gpus", "health.gpu"):
        assert req[check][0] and "h100-sxm" in req[check][1], (check, req[check])
    for check in ("storage.fio_lustre_read", "storage.ior_easy_write", "conformance.lnet", "health.lnet"):
        assert req[check][0] and "Lustre clients mount lab" in req[check][1], (check, req[check])
    for check in ("objectstore.s3_put", "conformance.objectstore_buckets", "dataflow.stage_in"):
        assert req[check][0] and "SeaweedFS" in req[check][1], (check, req[check])
    for check in ("conformance.rdma_ports", "health.rdma"):
        assert req[check] == (False, "the fabric is tcp: the plan has no RDMA device"), check


def test_nothing_measurable_says_incomplete_and_exits_3(tmp_path: Path) -> None:
    """The benchmarks on hosts where every command fails (no tool, no GPU, no Lustre, no mover): nothing is measured,
    every row is NOT APPLICABLE or ERROR, and the sign-off is INCOMPLETE (it used to say ACCEPTED)."""
    plan, _, _ = lab()
    dead = {h.name: FakeRemote(h.name).on(".*", (127, "", "bash: command not found")) for h in plan.hosts}
    options = Options(workers=4, s3_secret_key="x" * 20, only=("gpu", "storage", "network", "objectstore"))
    run = run_verify("lab", tmp_path, options, remotes=dead,  # type: ignore[arg-type]
                     inventory_renderer=render_inventory)
    assert run.results and all(r.stats is None for r in run.results)
    assert run.decision.verdict is SignOff.INCOMPLETE and run.exit_code == 3
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["summary"]["verdict"] == "INCOMPLETE" and report["summary"]["exit_code"] == 3
    missing = {(m["check"], m["verdict"]) for m in report["summary"]["missing"]}
    assert {("gpu.h2d_bw", "NOT_APPLICABLE"), ("objectstore.s3_get", "ERROR"), ("conformance.sysctls", "NOT_RUN"),
            ("*", "NOT_RUN")} <= missing
    assert "Sign-off: **INCOMPLETE** (exit code 3)" in (tmp_path / "report.md").read_text()


def test_cli_with_no_host_selected_says_incomplete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`kiln verify` that reaches no host: every row NOT APPLICABLE, exit 3 (no remote command is run)."""
    rc = main(["verify", "lab", "--hosts", "no-such-host", "--out", str(tmp_path), "-q"])
    assert rc == common.EXIT_INCOMPLETE
    out = capsys.readouterr().out
    assert "INCOMPLETE" in out and "nothing was measured" in out


@pytest.mark.parametrize("strict", [False, True])
def test_decision_is_the_runs(tmp_path: Path, strict: bool) -> None:
    plan, _, acc = lab()
    rows = [row("a.x", Verdict.PASS)]
    small = dataclasses.replace(plan, targets=(rows[0].target,))
    run = VerifyRun("lab", small, acc, Options(strict=strict), rows, ["gpu001"], "test", 0.0, 1.0, tmp_path)
    assert run.decision.verdict is SignOff.ACCEPTED and run.exit_code == 0
