"""The node health check against fixture trees (tests/fixtures/health; each file's .source names its format)
and recorded command output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kiln.cli.common import load
from kiln.node import health
from kiln.node.health import (
    FAULTS,
    Expect,
    Result,
    adjtimex_maxerror_us,
    check_clock,
    expectations,
    run_checks,
    scheduler_actions,
)

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
EXPECT = Expect(host="gpu001", gpus=2, rdma={"mlx5_0": 400.0}, lustre_mount="/lustre",
                server_nids=["10.89.20.4@tcp", "10.89.20.5@tcp"], nvme_mount="/mnt/local-nvme")


def fake(outputs: dict[str, tuple[int, str]]):  # type: ignore[no-untyped-def]
    """Test double for the command runner: answers by program name; None (not installed) otherwise."""
    def runner(argv: list[str]) -> tuple[int, str] | None:
        return outputs.get(argv[0])
    return runner


HEALTHY_TOOLS = {
    "nvidia-smi": (0, "0, 0, Not Active\n1, 0, Not Active\n"),
    "lnetctl": (0, "ping:\n    - primary nid: 10.89.20.4@tcp\n"),
    "timedatectl": (0, "yes\n"),
    "journalctl": (0, "Linux version 6.1.0-27-amd64\n"),  # this boot's kernel log: no XID
}


def by_check(results: list[Result]) -> dict[str, Result]:
    return {r.check: r for r in results}


def test_healthy_node_passes_every_check() -> None:
    res = by_check(run_checks(EXPECT, FIX / "healthy", fake(HEALTHY_TOOLS)))
    assert {k: r.status for k, r in res.items()} == {
        "health.gpu": "ok", "health.xid": "ok", "health.rdma": "ok", "health.lustre": "ok", "health.lnet": "ok",
        "health.clock": "ok", "health.nvme": "ok",
    }


def test_degraded_node_reports_fault_codes() -> None:
    tools = {**HEALTHY_TOOLS, "nvidia-smi": (0, "0, 0, Not Active\n1, 2, Not Active\n"),
             "lnetctl": (1, ""), "timedatectl": (0, "no\n")}
    res = by_check(run_checks(EXPECT, FIX / "degraded", fake(tools)))
    assert res["health.gpu"].code == 11 and "GPU 1" in res["health.gpu"].detail
    assert res["health.rdma"].code == 22 and "200.0 Gb/s" in res["health.rdma"].detail
    assert res["health.lustre"].code == 31 and "DISCONN" in res["health.lustre"].detail
    assert res["health.lnet"].code == 40
    assert res["health.clock"].code == 50
    assert all(r.code in FAULTS for r in res.values() if r.status == "fault")


def test_missing_gpu_and_throttled_gpu() -> None:
    one = run_checks(EXPECT, FIX / "healthy", fake({**HEALTHY_TOOLS, "nvidia-smi": (0, "0, 0, Not Active\n")}))
    assert by_check(one)["health.gpu"].code == 10
    hot = run_checks(EXPECT, FIX / "healthy", fake({**HEALTHY_TOOLS, "nvidia-smi": (0, "0, 0, Active\n1, 0, "
                                                                                    "Not Active\n")}))
    assert by_check(hot)["health.gpu"].code == 12


def test_host_without_the_parts_faults_on_planned_ones_and_says_why_on_the_rest() -> None:
    res = by_check(run_checks(EXPECT, FIX / "bare", fake({}), lambda: None))  # no timedatectl, no adjtimex
    # planned parts that are absent are faults, not "not applicable": the plan says what should be there
    assert res["health.gpu"].code == 10 and "nvidia-smi is not installed" in res["health.gpu"].detail
    assert res["health.lustre"].code == 30
    assert res["health.rdma"].code == 20
    assert res["health.nvme"].code == 60
    # what the plan does not say, or what no tool here can show, is not applicable with the reason
    assert res["health.lnet"].status == "not_applicable"
    assert res["health.clock"].status == "not_applicable"
    assert res["health.xid"].line().startswith("health.xid: NOT APPLICABLE: ")


def test_expectations_from_the_plan() -> None:
    _, plan = load("lab")
    e = expectations(plan, "gpu001", "/mnt/local-nvme")
    assert e.gpus == 1 and e.rdma == {} and e.lustre_mount == "/lustre"
    assert set(e.server_nids) == {n for h in plan.hosts if h.role in ("mds", "oss") for n in h.nids}


def test_scheduler_actions_drain_and_return_only_their_own() -> None:
    fault = Result("health.rdma", "fault", "x", 21)
    assert scheduler_actions("slurm", "gpu001", fault, fake({})) == [
        ["scontrol", "update", "nodename=gpu001", "state=drain", "reason=kiln-health 21"]]
    ours = fake({"sinfo": (0, "kiln-health 21\n")})
    theirs = fake({"sinfo": (0, "bad DIMM\n")})
    assert scheduler_actions("slurm", "gpu001", None, ours) == [["scontrol", "update", "nodename=gpu001",
                                                                 "state=resume"]]
    assert scheduler_actions("slurm", "gpu001", None, theirs) == []
    # Kubernetes through kubectl: the same merge patch as --kubernetes (tests/unit/node/test_health_kubernetes.py)
    node = {"metadata": {"name": "gpu001", "resourceVersion": "3"}, "spec": {}}
    (cmd,) = scheduler_actions("kubernetes", "gpu001", fault, fake({"kubectl": (0, json.dumps(node))}))
    assert cmd[:6] == ["kubectl", "patch", "node", "gpu001", "--type", "merge"]
    patch = json.loads(cmd[-1])
    assert patch["spec"]["unschedulable"] is True
    assert patch["spec"]["taints"] == [{"key": "kiln.io/health", "value": "fault-21", "effect": "NoSchedule"}]
    ours = {"metadata": {"name": "gpu001", "resourceVersion": "4", "annotations": {
        "kiln.io/health-cordoned": "true", "kiln.io/health-reason": "x"}},
        "spec": {"unschedulable": True, "taints": patch["spec"]["taints"]}}
    (back,) = scheduler_actions("kubernetes", "gpu001", None, fake({"kubectl": (0, json.dumps(ours))}))
    assert json.loads(back[-1])["spec"] == {"taints": [], "unschedulable": False}
    operators = {"metadata": {"name": "gpu001", "resourceVersion": "5"}, "spec": {"unschedulable": True}}
    assert scheduler_actions("kubernetes", "gpu001", None, fake({"kubectl": (0, json.dumps(operators))})) == []
    assert scheduler_actions("kubernetes", "gpu001", fault, fake({})) == []  # no kubectl: said on stderr
    assert scheduler_actions("none", "gpu001", fault, fake({})) == []


def test_every_fixture_names_its_source() -> None:
    files = [p for p in FIX.rglob("*") if p.is_file() and not p.name.endswith(".source")]
    assert files
    for p in files:
        assert p.with_name(p.name + ".source").is_file(), p


def test_clock_in_a_container_is_not_applicable(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".containerenv").write_text("")
    res = by_check(run_checks(EXPECT, tmp_path, fake({"timedatectl": (0, "no\n")})))
    assert res["health.clock"].status == "not_applicable" and "host's clock" in res["health.clock"].detail
    bare = by_check(run_checks(EXPECT, FIX / "healthy", fake({"timedatectl": (0, "no\n")})))
    assert bare["health.clock"].code == 50


def test_clock_without_systemd_uses_adjtimex_as_timedated_does(tmp_path: Path) -> None:
    """The kiln-health pod has no timedatectl: maxerror < 16 s is synchronised (systemd's ntp_synced)."""
    ok = by_check(list(check_clock(fake({}), tmp_path, lambda: 1_500)))
    assert ok["health.clock"].status == "ok" and "1500 µs" in ok["health.clock"].detail
    bad = by_check(list(check_clock(fake({}), tmp_path, lambda: 16_000_000)))
    assert bad["health.clock"].code == 50
    gone = by_check(list(check_clock(fake({}), tmp_path, lambda: None)))
    assert gone["health.clock"].status == "not_applicable"
    # the real call answers on Linux (a read: no capability needed)
    err = adjtimex_maxerror_us()
    assert err is not None and err >= 0


def test_lnet_in_the_pod_says_why_it_cannot_ping(tmp_path: Path) -> None:
    (tmp_path / "sys/module/lnet").mkdir(parents=True)
    res = by_check(run_checks(EXPECT, tmp_path, fake({})))
    assert res["health.lnet"].status == "not_applicable" and "/dev/lnet" in res["health.lnet"].detail


MAINTENANCE = Result("maintenance", "fault", "taken out for maintenance", 80)


def test_maintenance_takes_the_node_out_and_only_its_end_returns_it() -> None:
    """A node taken out for an upgrade stays out whatever a round finds meanwhile (the timer runs every few
    minutes); --maintenance end returns it when healthy, or keeps it out with the fault it found."""
    drain = ["scontrol", "update", "nodename=gpu001", "state=drain"]
    assert scheduler_actions("slurm", "gpu001", MAINTENANCE, fake({})) == [[*drain, "reason=kiln-health 80"]]
    out = fake({"sinfo": (0, "kiln-health 80\n")})
    fault = Result("health.gpu", "fault", "x", 13)
    assert scheduler_actions("slurm", "gpu001", None, out) == []  # a healthy round mid-upgrade: still out
    assert scheduler_actions("slurm", "gpu001", fault, out) == []  # a fault mid-upgrade: the reason stays
    assert scheduler_actions("slurm", "gpu001", None, out, ending=True) == [
        ["scontrol", "update", "nodename=gpu001", "state=resume"]]
    assert scheduler_actions("slurm", "gpu001", fault, out, ending=True) == [[*drain, "reason=kiln-health 13"]]
    assert scheduler_actions("slurm", "gpu001", None, fake({"sinfo": (0, "kiln-health 8 x\n")})) == [
        ["scontrol", "update", "nodename=gpu001", "state=resume"]]  # the code, not a prefix of it
    # Kubernetes: the maintenance taint (fault-80) and kiln-health's own cordon
    node = {"metadata": {"name": "gpu001", "resourceVersion": "3"}, "spec": {}}
    (cmd,) = scheduler_actions("kubernetes", "gpu001", MAINTENANCE, fake({"kubectl": (0, json.dumps(node))}))
    patch = json.loads(cmd[-1])
    assert patch["spec"]["taints"] == [{"key": "kiln.io/health", "value": "fault-80", "effect": "NoSchedule"}]
    out_node = json.dumps({"metadata": {"name": "gpu001", "resourceVersion": "4", "annotations": {
        "kiln.io/health-cordoned": "true", "kiln.io/health-reason": MAINTENANCE.line()}},
        "spec": {"unschedulable": True, "taints": patch["spec"]["taints"]}})
    kubectl = fake({"kubectl": (0, out_node)})
    assert scheduler_actions("kubernetes", "gpu001", None, kubectl) == []
    assert scheduler_actions("kubernetes", "gpu001", fault, kubectl) == []
    (back,) = scheduler_actions("kubernetes", "gpu001", None, kubectl, ending=True)
    assert json.loads(back[-1])["spec"] == {"taints": [], "unschedulable": False}
    assert 80 in FAULTS


def test_maintenance_start_and_end_from_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    expect = tmp_path / "health.json"
    expect.write_text('{"host": "gpu001", "gpus": 0, "rdma": {}, "lustre_mount": "/lustre", "server_nids": []}')
    ran: list[list[str]] = []
    reason = {"now": ""}

    def runner(argv: list[str]) -> tuple[int, str] | None:
        ran.append(argv)
        if argv[0] == "sinfo":
            return 0, reason["now"]
        if argv[0] == "scontrol":
            reason["now"] = argv[-1].removeprefix("reason=") if "state=drain" in argv else ""
            return 0, ""
        return None
    monkeypatch.setattr(health, "run", runner)
    monkeypatch.setattr(health, "run_checks", lambda *_a: [Result("health.gpu", "ok", "no GPU planned")])
    assert health.main(["--expect", str(expect), "--drain", "none", "--maintenance", "start"]) == 0
    assert "no scheduler to take it out of" in capsys.readouterr().out and ran == []
    assert health.main(["--expect", str(expect), "--drain", "slurm", "--maintenance", "start"]) == 0
    assert reason["now"] == "kiln-health 80"
    assert health.main(["--expect", str(expect), "--drain", "slurm"]) == 0 and reason["now"] == "kiln-health 80"
    assert health.main(["--expect", str(expect), "--drain", "slurm", "--maintenance", "end"]) == 0
    assert reason["now"] == "" and ran[-1][-1] == "state=resume"
    # no kubectl here: the node could not be taken out, and kiln-health says so instead of going on
    assert health.main(["--expect", str(expect), "--drain", "kubernetes", "--maintenance", "start"]) == 1
    assert "not taken out of kubernetes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        health.main(["--expect", str(expect), "--maintenance", "end", "--every", "5"])
