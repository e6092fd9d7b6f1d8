"""`kiln verify` end to end on real podman systemd hosts: real fio, iperf3, SeaweedFS and warp.

Three hosts of a copy of the lab stack (stack name verify-test, its own subnets so it never meets the lab):
gpu001 and gpu002 (fio, iperf3, a bind-mounted local "NVMe" directory) and s3-01 (SeaweedFS's four
services and the planned buckets). gpu002's arp_ignore is then set back to 0 behind the kit's back: the
report must say FAIL and name the parameter, the planned and the found value. GPU, RDMA and Lustre rows must
be NOT APPLICABLE with their reasons. Takes a few minutes.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from podman_hosts import (
    create_hosts,
    install_packages,
    missing_prerequisites,
    plan_hosts,
    set_sysctl_behind_the_kits_back,
    start_seaweedfs,
    teardown,
    write_lab_stack,
)

from kiln.plan import build_plan
from kiln.plan.tuning import is_namespaced_sysctl
from kiln.render.inventory import render_inventory
from kiln.spec import load_stack
from kiln.verify.api import run_verify
from kiln.verify.checks.network import Iperf3Variables
from kiln.verify.checks.objectstore import WarpVariables
from kiln.verify.checks.options import Options
from kiln.verify.checks.storage import FioVariables
from kiln.verify.judge import Verdict
from kiln.verify.parsers import parse_fio, parse_iperf3
from kiln.verify.runner import VerifyRun
from kiln.verify.verdict import SignOff, decide

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
STACK = "verify-test"
MGMT, STORAGE = "10.89.110.0/24", "10.89.120.0/24"
HOSTS = ("gpu001", "gpu002", "s3-01")


def write_stack(tmp: Path) -> Path:
    def edit(c: dict[str, Any]) -> None:
        c["acceptance"]["warmup"] = 1  # the protocol under test: a discarded warm-up, then the repetitions

    return write_lab_stack(ROOT, tmp, STACK, MGMT, STORAGE, edit)


@pytest.fixture(scope="module")
def verify_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    missing = missing_prerequisites(ROOT)
    if missing:
        pytest.skip("needs " + ", ".join(missing))
    tmp = tmp_path_factory.mktemp("verify-test")
    stack_file = write_stack(tmp)
    spec = load_stack(str(stack_file))
    plan = build_plan(spec, source=str(stack_file))
    hosts = plan_hosts(plan, HOSTS)
    # what roles/common leaves in a container: the namespaced sysctls (host-global ones belong to the host)
    sysctls = {t.param: str(t.value) for t in plan.tunables if t.apply == "sysctl" and is_namespaced_sysctl(t.id)}
    secret = secrets.token_urlsafe(24)
    try:
        create_hosts(hosts, MGMT, STORAGE, sysctls, local_dirs=("gpu001", "gpu002"))
        by = {h.name: h for h in hosts}
        for h in ("gpu001", "gpu002"):
            install_packages(by[h].container, ["fio", "iperf3"])
            env = next(n.env for n in plan.nccl if n.pool == plan.host(h).pool)
            conf = "".join(f"{k}={v}\n" for k, v in sorted(env.items()))
            from podman_hosts import podman

            podman("exec", "-i", by[h].container, "bash", "-c", "cat > /etc/nccl.conf", input_text=conf)
        start_seaweedfs(by["s3-01"].container, by["s3-01"].storage_ip, plan.objectstore.s3_port,
                        plan.objectstore.access_key_id, secret, ROOT / ".tools" / "bin" / "weed",
                        [b.name for b in plan.objectstore.buckets])
        set_sysctl_behind_the_kits_back(by["gpu002"].container, "net.ipv4.conf.all.arp_ignore", "0")
        opts = Options(hosts_pattern="gpu*,s3-*", workers=2, s3_secret_key=secret, variables=(
            FioVariables(jobs=2, runtime_s=10), Iperf3Variables(seconds=3),
            WarpVariables(duration_s=5, objects=40, obj_size="1MiB", concurrent=8)))
        progress: list[str] = []
        run = run_verify(str(stack_file), tmp / "report", opts, progress=progress.append,
                         inventory_renderer=render_inventory)
        yield run, progress, secret
    finally:
        teardown()


def rows(run: VerifyRun, check: str) -> list[Any]:
    return [r for r in run.results if r.check == check]


def one(run: VerifyRun, check: str, subject: str) -> Any:
    [r] = [r for r in rows(run, check) if r.subject.label == subject]
    return r


def test_conformance_passes_where_the_hosts_match_the_plan(verify_run: Any) -> None:
    run, _, _ = verify_run
    for check, subject in [("conformance.sysctls", "gpu001"), ("conformance.sysctls", "s3-01"),
                           ("conformance.nccl_conf", "gpu001"), ("conformance.nccl_conf", "gpu002"),
                           ("conformance.objectstore_services", "s3-01")]:
        r = one(run, check, subject)
        assert r.verdict is Verdict.PASS, (check, subject, r.message, r.details)
    [buckets] = rows(run, "conformance.objectstore_buckets")
    assert buckets.verdict is Verdict.PASS, buckets.message
    assert {"datasets", "checkpoints"} <= set(buckets.info["buckets"])


def test_mistuned_host_fails_naming_parameter_planned_and_found(verify_run: Any) -> None:
    run, _, _ = verify_run
    r = one(run, "conformance.sysctls", "gpu002")
    assert r.verdict is Verdict.FAIL
    assert "net.ipv4.conf.all.arp_ignore: planned 1, found 0" in r.message
    assert r.runbook.endswith("acceptance-conformance.md")
    assert run.exit_code == 1


def test_gpu_rdma_lustre_are_not_applicable_with_reasons(verify_run: Any) -> None:
    run, _, _ = verify_run
    expect = {"conformance.gpus": "no NVIDIA GPU", "gpu.h2d_bw": "no NVIDIA GPU", "gpu.d2h_bw": "no NVIDIA GPU",
              "conformance.rdma_ports": "no RDMA device", "conformance.lnet": "no Lustre",
              "conformance.lustre_tunables": "no Lustre", "conformance.lustre_mounts": "no Lustre",
              "conformance.lustre_layouts": "no Lustre", "conformance.lustre_quotas": "no Lustre",
              "storage.fio_lustre_read": "no Lustre",
              "storage.fio_lustre_write": "no Lustre", "storage.ior_easy_read": "no Lustre",
              "storage.mdtest_create": "no Lustre"}
    for check, reason in expect.items():
        rs = rows(run, check)
        assert rs, check
        for r in rs:
            assert r.verdict is Verdict.NOT_APPLICABLE, (check, r.verdict, r.message)
            assert reason in r.message, (check, r.message)
    # never a pass: without --strict the sign-off cannot be ACCEPTED while they are missing, with it they fail
    na = [r for r in run.results if r.verdict is Verdict.NOT_APPLICABLE]
    assert decide(na, run.plan.targets, strict=False).verdict is SignOff.INCOMPLETE
    assert decide(na, run.plan.targets, strict=True).verdict is SignOff.REJECTED


def test_fio_on_local_storage_measured(verify_run: Any) -> None:
    run, _, _ = verify_run
    for check in ("storage.fio_local_read", "storage.fio_local_write"):
        for r in rows(run, check):
            assert r.verdict in (Verdict.PASS, Verdict.WARN, Verdict.FAIL), (check, r.message)
            assert len(r.samples) == 3 and len(r.warmup_samples) == 1
            assert all(0.005 < x < 100 for x in r.samples), r.samples  # GB/s from a real disk
            raw = next(f for f in r.raw_files if f.endswith("rep1-fio.json"))
            res = parse_fio((run.out_dir / raw).read_text())
            assert res.aggregate_Bps(check.rsplit("_", 1)[1]) / 1e9 == pytest.approx(r.samples[0])


def test_iperf3_between_hosts_on_the_storage_network(verify_run: Any) -> None:
    run, _, _ = verify_run
    rs = rows(run, "network.iperf3")
    assert sorted(r.subject.label for r in rs) == ["gpu001→gpu002", "gpu002→gpu001"]
    for r in rs:
        assert r.verdict in (Verdict.PASS, Verdict.WARN, Verdict.FAIL), r.message
        assert r.stats is not None and 0.1 < r.stats.median < 2000, r.samples  # Gb/s over a veth pair
        assert r.info["server"].split()[1].startswith("10.89.120.")
        raw = json.loads((run.out_dir / r.raw_files[-1]).read_text())
        assert raw["start"]["connected"][0]["local_host"].startswith("10.89.120.")
        assert parse_iperf3(json.dumps(raw)).received_bps > 0


def test_warp_against_seaweedfs(verify_run: Any) -> None:
    run, _, secret = verify_run
    for check in ("objectstore.s3_get", "objectstore.s3_put"):
        [r] = rows(run, check)
        assert r.verdict in (Verdict.PASS, Verdict.WARN, Verdict.FAIL), r.message
        assert r.stats is not None and 0.001 < r.stats.median < 100, r.samples  # GB/s
        assert r.info["errors"] == 0 and r.info["endpoints"][0].startswith("10.89.120.")
    for f in run.out_dir.rglob("*"):  # the S3 secret is nowhere in the report directory
        if f.is_file():
            assert secret not in f.read_text(errors="replace"), f


def test_report_and_progress(verify_run: Any) -> None:
    run, progress, _ = verify_run
    d = json.loads((run.out_dir / "report.json").read_text())
    assert d["schema"] == "kiln.verify.report/v2" and d["summary"]["exit_code"] == 1
    assert d["summary"]["verdict"] == "REJECTED"  # the mistuned sysctl
    assert len(d["results"]) == len(run.results) and d["hosts"] == list(HOSTS)
    md = (run.out_dir / "report.md").read_text()
    assert "net.ipv4.conf.all.arp_ignore: planned 1, found 0" in md and "acceptance-conformance.md" in md
    assert (run.out_dir / "report.html").read_text().startswith("<!doctype html>")
    assert any("storage.fio_local_read @ gpu001: rep 2/3" in m for m in progress)
    assert any("warm-up 1/1" in m for m in progress)
