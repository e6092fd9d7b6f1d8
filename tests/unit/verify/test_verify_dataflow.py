"""The dataflow.* checks (kiln/verify/checks/dataflow.py) against a FakeRemote test double: which host runs the
pass, that one pass per repetition feeds all eight checks, that the secret never reaches a command line."""

from __future__ import annotations

import json

import pytest

from kiln.verify.checks import REGISTRY
from kiln.verify.checks.check import CheckError, Rep
from kiln.verify.checks.dataflow import DataflowVariables
from kiln.verify.checks.options import Options
from tests.unit.verify.verify_fakes import FakeRemote, context, lab

SECRET = "s3cr3t-for-the-test-only"
FIGURES = {
    "stage_s": 1.0, "naive_s": 3.5, "stage_in_speedup": 3.5, "stage_bytes": 52428800, "stage_files": 400,
    "fast_write_s": 0.3, "s3_get_s": 0.9, "stage_in_efficiency": 0.9, "resync_bytes": 0, "resync_s": 0.04,
    "resync_share": 0.04, "stage_failed": 0, "checkpoint_write_s": 0.2, "checkpoint_export_s": 1.8,
    "checkpoint_blocked_ratio": 10.0, "checkpoint_exported": 1, "restore_fast_s": 0.1, "restore_lake_s": 0.9,
    "checkpoint_restore_ratio": 9.0,
    "resume_killed_mid_upload": 1, "resume_visible_before_restart": 1, "resume_partial": 0, "resume_lost": 0,
    "resume_restart_rc": 0, "resume_lost_or_partial": 0,
    "repair_bad_visible": 0, "repair_unrepaired": 0, "repair_caught": 1, "repair_restored": 1, "repair_failures": 0,
}
CHECKS = {
    "dataflow.stage_in": 3.5, "dataflow.stage_in_efficiency": 0.9, "dataflow.resync": 0.0,
    "dataflow.resync_time": 0.04, "dataflow.checkpoint_blocked": 10.0,
    "dataflow.checkpoint_restore": 9.0, "dataflow.resume": 0.0, "dataflow.repair": 0.0,
}


def mover() -> FakeRemote:
    # Rules added later are tried first: the catch-all goes first.
    return (FakeRemote("gpu001")
            .on(r".", (0, "", ""))
            .on(r"-c 'import kiln.dataflow.measure'", (0, "", ""))
            .on(r"-m kiln\.dataflow\.measure", (0, json.dumps(FIGURES) + "\n", "")))


def test_every_planned_dataflow_target_has_a_check() -> None:
    plan, _, _ = lab()
    planned = {t.check for t in plan.targets if t.check.startswith("dataflow.")}
    assert planned == {*CHECKS, "dataflow.model_distribution"}  # that one: test_verify_dataflow_models.py
    assert planned <= set(REGISTRY)


def test_one_pass_per_repetition_feeds_every_check_on_the_first_mover() -> None:
    remote = mover()
    ctx = context({"gpu001": remote, "gpu002": FakeRemote("gpu002")},
                  Options(s3_secret_key=SECRET, variables=(DataflowVariables(fast_tier="/srv/kiln-fast"),)))
    plan, _, _ = lab()
    for check, value in CHECKS.items():
        target = next(t for t in plan.targets if t.check == check)
        (subject,) = REGISTRY[check].subjects(ctx, target)
        assert subject.hosts == ("gpu001",)
        sample = REGISTRY[check].measure(ctx, target, subject, Rep(1, 1, False))
        assert sample.value == value
        assert sample.details
        if check == "dataflow.stage_in":  # the GET-only ceiling beside the speed-up: naive_s ÷ s3_get_s
            assert "3.89× the stream" in sample.details[1]
    runs = [c for c in remote.commands if "-m kiln.dataflow.measure" in c]
    assert len(runs) == 1
    assert "--work /srv/kiln-fast/.kiln-measure-rep1" in runs[0]
    assert "--bucket kiln-dataflow-measure" in runs[0]  # a bucket of its own on the lab's SeaweedFS
    assert not [c for c in remote.commands if SECRET in c]
    assert any(SECRET in content for content, _ in remote.secret_files.values())


def test_no_mover_installed_is_an_error_with_the_fix() -> None:
    remote = FakeRemote("gpu001").on(r".", (0, "", "")).on(r"import kiln\.dataflow\.measure",
                                                           (1, "", "No module named kiln"))
    ctx = context({"gpu001": remote}, Options(s3_secret_key=SECRET))
    plan, _, _ = lab()
    target = next(t for t in plan.targets if t.check == "dataflow.stage_in")
    (subject,) = REGISTRY["dataflow.stage_in"].subjects(ctx, target)
    with pytest.raises(CheckError, match=r"datamover role \(kiln deploy lab --tags datamover\)"):
        REGISTRY["dataflow.stage_in"].measure(ctx, target, subject, Rep(1, 1, False))
