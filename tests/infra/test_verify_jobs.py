"""`kiln verify --from-jobs` / `--kubernetes`: acceptance Job logs judged with the shared parsers and judge."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kiln.plan import build_plan
from kiln.render.manifests import acceptance_jobs, build_manifests
from kiln.spec import load_stack
from kiln.verify.api import run_jobs_verify
from kiln.verify.jobs import fio_section, judge_logs, logs_from_dir, logs_from_kubectl
from kiln.verify.judge import Verdict, verdict_for
from kiln.verify.parsers import ParseError, parse_fio, parse_nccl_tests, parse_warp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIO_LOG = FIXTURES / "k8s_jobs" / "kiln-fio-lustre.log"
NCCL_LOG = FIXTURES / "tools" / "nccl" / "all_reduce_intra_8gpu.txt"
WARP_PUT = FIXTURES / "tools" / "warp" / "put.json"


@pytest.fixture()
def job_dir(tmp_path: Path) -> Path:
    """Saved logs as `kubectl logs job/<name> > DIR/<name>.log` writes them (no log for the GET Job)."""
    shutil.copy(FIO_LOG, tmp_path / "kiln-fio-lustre.log")
    shutil.copy(NCCL_LOG, tmp_path / "kiln-nccl-intra-gpu.log")
    shutil.copy(WARP_PUT, tmp_path / "kiln-s3-put.log")
    return tmp_path


def _dev():  # type: ignore[no-untyped-def]
    return build_plan(load_stack("dev"), "dev")


def test_the_fio_job_log_is_judged_against_the_plan_targets(job_dir: Path) -> None:
    plan = _dev()
    names = [jc.log_job for jc in acceptance_jobs(plan)]
    results = {r.check: r for r in judge_logs(plan, logs_from_dir(job_dir, names), cv_limit=0.1)}
    log = FIO_LOG.read_text()
    for op in ("write", "read"):
        r = results[f"storage.fio_lustre_{op}"]
        want = parse_fio(fio_section(log, op)).aggregate_Bps(op) / 1e9
        assert r.samples == [pytest.approx(want)] and want > 0
        assert r.verdict is verdict_for(r.target, want)
        assert r.subject.label == "job/kiln-fio-lustre"


def test_nccl_and_warp_logs_use_the_same_figures_as_the_host_checks(job_dir: Path) -> None:
    plan = _dev()
    names = [jc.log_job for jc in acceptance_jobs(plan)]
    results = {r.check: r for r in judge_logs(plan, logs_from_dir(job_dir, names), cv_limit=0.1)}
    intra = results["fabric.nccl_allreduce_intra"]
    assert intra.samples == [parse_nccl_tests(NCCL_LOG.read_text()).busbw_GBps]
    assert intra.verdict is verdict_for(intra.target, intra.samples[0])
    put = results["objectstore.s3_put"]
    assert put.samples == [parse_warp(WARP_PUT.read_text()).op("PUT").bytes_per_s / 1e9]
    get = results["objectstore.s3_get"]
    assert get.verdict is Verdict.NOT_APPLICABLE and "job/kiln-s3-get" in get.message


def test_a_broken_log_is_an_error_not_a_pass(tmp_path: Path) -> None:
    plan = _dev()
    (tmp_path / "kiln-fio-lustre.log").write_text("kiln: begin fio-write\nfio: pid=12, err=28/file:io_u.c\n")
    results = judge_logs(plan, logs_from_dir(tmp_path, ["kiln-fio-lustre"]), cv_limit=0.1)
    fio = [r for r in results if r.check.startswith("storage.fio_lustre")]
    assert {r.verdict for r in fio} == {Verdict.ERROR}
    with pytest.raises(ParseError):
        fio_section("no frame here", "read")


def test_kubernetes_without_kubectl_is_not_applicable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    logs, reason = logs_from_kubectl("kiln-training", ["kiln-fio-lustre"])
    assert logs == {} and "kubectl is not installed" in reason
    plan = _dev()
    results = judge_logs(plan, logs, 0.1, reason)
    assert results and all(r.verdict is Verdict.NOT_APPLICABLE for r in results)
    assert all("not applicable on this host: kubectl is not installed" in r.message for r in results)


def test_from_jobs_writes_the_usual_report(job_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    run = run_jobs_verify("dev", out, from_dir=job_dir)
    report = json.loads((out / "report.json").read_text())
    assert len(report["results"]) == len(run.results) == len(acceptance_jobs(run.plan))
    assert (out / "raw" / "kiln-fio-lustre.log").read_text() == FIO_LOG.read_text()
    with pytest.raises(FileNotFoundError):
        run_jobs_verify("dev", out, from_dir=tmp_path / "missing")


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_the_rendered_fio_job_script_runs_and_its_log_is_judged(tmp_path: Path) -> None:
    """The fio Job's own script, shrunk (4 MiB per job, 1 MiB blocks) and pointed at a local directory."""
    plan = _dev()
    job = next(o for c in build_manifests(plan) for o in c.objects if o["metadata"]["name"] == "kiln-fio-lustre")
    script = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    script = re.sub(r"--size=\d+G", "--size=4M", script).replace("--bs=16M", "--bs=1M")
    script = script.replace("/data/", f"{tmp_path}/").replace("/tmp/fio-", f"{tmp_path}/fio-")
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOSTNAME": "node-1"}, check=False)
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "kiln-fio-lustre.log").write_text(proc.stdout + proc.stderr)
    results = judge_logs(plan, logs_from_dir(tmp_path / "logs", ["kiln-fio-lustre"]), cv_limit=0.1)
    fio = {r.check: r for r in results if r.check.startswith("storage.fio_lustre")}
    assert set(fio) == {"storage.fio_lustre_write", "storage.fio_lustre_read"}
    for r in fio.values():
        assert r.verdict in (Verdict.PASS, Verdict.WARN, Verdict.FAIL) and r.samples[0] > 0
    assert not (tmp_path / "kiln-acceptance" / "node-1").exists()  # the Job removes its files
