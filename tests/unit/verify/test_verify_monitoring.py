"""The monitoring.* and health.* checks against a fake Prometheus and fake hosts (verify_fakes: test doubles)."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks import REGISTRY
from kiln.verify.checks import monitoring as mon
from kiln.verify.checks.check import CheckError, NotApplicable, Rep, Subject
from tests.unit.verify.verify_fakes import FakeRemote, context

REP = Rep(1, 1, False)


class FakeProm:
    """TEST DOUBLE: Prometheus's HTTP API as the checks reach it (python3 urllib on the monitoring host)."""

    def __init__(self) -> None:
        self.down: set[tuple[str, str]] = set()  # (job, instance)
        self.firing: list[dict[str, str]] = []
        self.fired_at: dict[str, float] = {}  # alertname → when Prometheus first evaluated it firing
        self.empty: Callable[[str], bool] = lambda expr: False

    def __call__(self, command: str) -> tuple[int, str, str]:
        url = re.search(r"'(http://127\.0\.0\.1:9090[^']*)'", command)
        assert url, command
        parsed = urllib.parse.urlparse(url.group(1))
        q = dict(urllib.parse.parse_qsl(parsed.query))
        if parsed.path == "/api/v1/targets":
            plan = context({}).plan
            active = [{"labels": {"job": t.job, "instance": t.address, "host": t.host},
                       "health": "down" if (t.job, t.address) in self.down else "up",
                       "lastError": "connection refused" if (t.job, t.address) in self.down else ""}
                      for t in plan.monitoring.scrape_targets]
            return 0, json.dumps({"status": "success", "data": {"activeTargets": active}}), ""
        if parsed.path == "/api/v1/query":
            expr = q["query"]
            if expr.startswith("ALERTS") and expr.endswith("s]"):  # a range: the firing evaluations' timestamps
                result = [{"metric": m, "values": [[self.fired_at[m["alertname"]], "1"]]} for m in self.firing
                          if m["alertname"] in self.fired_at and all(f'{k}="{v}"' in expr for k, v in m.items())]
                return 0, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}), ""
            if expr.startswith("ALERTS"):
                result = [{"metric": m, "value": [0, "1"]} for m in self.firing]
            else:
                result = [] if self.empty(expr) else [{"metric": {}, "value": [0, "1"]}]
            return 0, json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}), ""
        return 1, "", f"404 {parsed.path}"


def _hosts(prom: FakeProm) -> dict[str, FakeRemote]:
    plan = context({}).plan
    remotes = {h.name: FakeRemote(h.name) for h in plan.hosts}
    remotes["s3-01"].on(r"urllib\.request", prom)
    for r in remotes.values():
        r.on(r"nvidia-smi", (3, "", ""))  # no GPU anywhere
        r.on(r"lctl", (1, "", ""))  # no Lustre
        r.on(r"/sys/class/infiniband", (0, "", ""))  # no RDMA
    return remotes


def _target(check: str) -> AcceptanceTarget:
    return next(t for t in context({}).plan.targets if t.check == check)


def _measure(ctx: Any, check: str) -> Any:
    c, t = REGISTRY[check], _target(check)
    subjects = c.subjects(ctx, t)
    assert len(subjects) == 1 and subjects[0].hosts == ("s3-01",)
    return c.measure(ctx, t, subjects[0], REP)


def test_targets_up_counts_planned_targets_down_and_excuses_dcgm_without_a_gpu() -> None:
    prom = FakeProm()
    ctx = context(_hosts(prom))
    plan = ctx.plan
    for t in plan.monitoring.scrape_targets:
        if t.job == "dcgm":
            prom.down.add((t.job, t.address))
    s = _measure(ctx, "monitoring.targets_up")
    assert s.value == 0 and s.info["checked"] == len(plan.monitoring.scrape_targets)
    assert all(d.startswith("note: dcgm") and "no NVIDIA GPU" in d for d in s.details) and len(s.details) == 2
    node = next(t for t in plan.monitoring.scrape_targets if t.job == "node" and t.host == "oss01")
    prom.down.add((node.job, node.address))
    s = _measure(context(_hosts(prom)), "monitoring.targets_up")
    assert s.value == 1 and any(d.startswith(f"node {node.address} (oss01): down") for d in s.details)


def test_panels_with_data_names_each_empty_panel_and_the_reason_it_may_be_empty() -> None:
    prom = FakeProm()
    prom.empty = lambda e: bool(re.search(r"DCGM_|lustre_|node_infiniband_|kiln_dataflow_|ALERTS", e))
    s = _measure(context(_hosts(prom)), "monitoring.panels_with_data")
    assert s.value == 0, s.details
    notes = "\n".join(s.details)
    assert "no DCGM exporter data" in notes and "no Lustre on any" in notes and "no RDMA device" in notes
    assert "no data mover pass has reported kiln_dataflow_lag_s" in notes and "no alert is firing" in notes
    assert s.info["checked"] == len(mon.panel_queries(context({}))) > 20
    prom.empty = lambda e: "node_memory_MemAvailable_bytes" in e
    s = _measure(context(_hosts(prom)), "monitoring.panels_with_data")
    assert s.value == 1 and s.details == ["hosts.json 'Memory available': no data for node_memory_MemAvailable_bytes"]


class Clock:
    """TEST DOUBLE: time for the fault session; sleep advances it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def _fault_hosts(prom: FakeProm, fire_after: float, clock: Clock, stuck: str = "") -> dict[str, FakeRemote]:
    """Hosts whose fault commands make the matching alert fire `fire_after` seconds later and clear on repair
    (except the alert named `stuck`, which keeps firing)."""
    remotes = _hosts(prom)
    plan = context({}).plan
    path = plan.monitoring.fault_filesystem
    pending: dict[str, tuple[float, dict[str, str]]] = {}

    def firing(command: str) -> tuple[int, str, str]:
        prom.firing = [labels for at, labels in pending.values() if clock.now >= at]
        prom.fired_at = {labels["alertname"]: at for at, labels in pending.values() if clock.now >= at}
        clock.sleep(0.8)  # the poll's SSH round trip
        return prom(command)

    remotes["s3-01"].on(r"urllib\.request", firing)

    def fault(key: str, labels: dict[str, str]) -> Callable[[str], tuple[int, str, str]]:
        def inject(_: str) -> tuple[int, str, str]:
            pending[key] = (clock.now + fire_after, labels)
            return 0, "", ""
        return inject

    def repair(key: str) -> Callable[[str], tuple[int, str, str]]:
        def fix(_: str) -> tuple[int, str, str]:
            if key != stuck:
                pending.pop(key, None)
            return 0, "", ""
        return fix

    remotes["s3-01"].on(r"systemctl stop seaweedfs-volume",
                        fault("ObjectStoreVolumeServerDown", {"alertname": "ObjectStoreVolumeServerDown",
                                                              "host": "s3-01"}))
    remotes["s3-01"].on(r"systemctl start seaweedfs-volume", repair("ObjectStoreVolumeServerDown"))
    remotes["gpu001"].on(r"mountpoint -q", (0, f"{32 << 20} 4096\n", ""))
    remotes["gpu001"].on(r"head -c \d+ /dev/zero",
                         fault("HostFilesystemFilling", {"alertname": "HostFilesystemFilling", "host": "gpu001",
                                                         "mountpoint": str(path)}))
    remotes["gpu001"].on(r"rm -f ", repair("HostFilesystemFilling"))
    remotes["gpu001"].on(r"sysctl -q -w net\.ipv4\.conf\.all\.arp_ignore=0",
                         fault("SysctlDrift", {"alertname": "SysctlDrift", "host": "gpu001",
                                               "sysctl": "net.ipv4.conf.all.arp_ignore"}))
    remotes["gpu001"].on(r"sysctl -q -w net\.ipv4\.conf\.all\.arp_ignore=1", repair("SysctlDrift"))
    last = [h.name for h in plan.hosts if h.name not in plan.monitoring.hosts][-1]  # the exporter fault's host
    remotes[last].on(r"systemctl stop prometheus-node-exporter",
                     fault("ExporterDown", {"alertname": "ExporterDown", "job": "node", "host": last}))
    remotes[last].on(r"systemctl start prometheus-node-exporter", repair("ExporterDown"))
    remotes["gpu001"].on(r"nft add table inet kiln_fault",
                         fault("DataMoverFailing", {"alertname": "DataMoverFailing", "host": "gpu001",
                                                    "link": "corpus", "direction": "import"}))
    remotes["gpu001"].on(r"nft delete table inet kiln_fault", repair("DataMoverFailing"))
    return remotes


FAULT_CHECKS = ("monitoring.fault_objectstore_volume_down", "monitoring.fault_disk_fill",
                "monitoring.fault_sysctl_drift", "monitoring.fault_exporter_down", "monitoring.fault_mover_failing")


def test_faults_fire_and_clear_in_one_session(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(mon, "time", clock)
    prom = FakeProm()
    remotes = _fault_hosts(prom, fire_after=9.5, clock=clock)
    ctx = context(remotes)
    samples = {c: _measure(ctx, c) for c in FAULT_CHECKS}
    for check, s in samples.items():
        # Prometheus's own firing time, not the poll's (which lags by its sleep and SSH round trips)
        assert s.value == 9.5, (check, s.value)
        assert any("cleared after" in d for d in s.details)
        assert any(re.search(r"the poll saw it firing after 1\d s", d) for d in s.details), s.details
        assert s.value <= _target(check).fail == 10
    # one session: each fault injected once and repaired once
    cmds = remotes["gpu001"].commands + remotes["s3-01"].commands + remotes["kafka-03"].commands
    for pattern in ("systemctl stop seaweedfs-volume", "systemctl start seaweedfs-volume",
                    "head -c", "arp_ignore=0", "arp_ignore=1", "stop prometheus-node-exporter",
                    "start prometheus-node-exporter", "nft add table inet kiln_fault",
                    "nft delete table inet kiln_fault"):
        assert sum(pattern in c for c in cmds) == 1, pattern
    # the mover fault runs on the first mover host: a stage pass that must fail, then one that must succeed
    mover = [c for c in remotes["gpu001"].commands if "kiln_fault" in c]
    assert mover[0].endswith("! systemctl restart kiln-datamover-stage@corpus")
    assert mover[1].endswith("; systemctl restart kiln-datamover-stage@corpus")
    fill = next(c for c in remotes["gpu001"].commands if "head -c" in c)
    written = int(re.search(r"head -c (\d+)", fill).group(1))  # type: ignore[union-attr]
    assert written == int((32 << 20) * 0.85) - 4096  # half-way between warn 80 % and critical 90 %


def test_a_fault_that_does_not_fire_or_clear_fails_and_is_still_repaired(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(mon, "time", clock)
    prom = FakeProm()
    remotes = _fault_hosts(prom, fire_after=200, clock=clock)
    ctx = context(remotes)
    with pytest.raises(CheckError, match="did not fire within"):
        _measure(ctx, "monitoring.fault_exporter_down")
    assert any("start prometheus-node-exporter" in c for c in remotes["kafka-03"].commands)
    clock2 = Clock()
    monkeypatch.setattr(mon, "time", clock2)
    remotes = _fault_hosts(FakeProm(), fire_after=3, clock=clock2, stuck="SysctlDrift")
    ctx = context(remotes)
    with pytest.raises(CheckError, match="still fires after repair"):
        _measure(ctx, "monitoring.fault_sysctl_drift")
    assert _measure(ctx, "monitoring.fault_disk_fill").value <= 5


def test_disk_fill_refuses_a_big_filesystem(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(mon, "time", clock)
    remotes = _fault_hosts(FakeProm(), fire_after=3, clock=clock)
    remotes["gpu001"].on(r"mountpoint -q", (0, f"{2 << 30} 0\n", ""))
    with pytest.raises(CheckError, match="refusing"):
        _measure(context(remotes), "monitoring.fault_disk_fill")
    assert not any("head -c" in c for c in remotes["gpu001"].commands)


HEALTH = [
    {"check": "health.gpu", "status": "not_applicable", "detail": "nvidia-smi is not installed", "code": 0},
    {"check": "health.clock", "status": "ok", "detail": "NTPSynchronized=yes", "code": 0},
    {"check": "health.nvme", "status": "fault", "detail": "nothing mounted at /mnt/local-nvme", "code": 60},
]


def test_health_rows_follow_kiln_health(tmp_path: Path) -> None:
    r = FakeRemote("gpu001").on(r"kiln-health --json", (60, json.dumps(HEALTH), ""))
    ctx = context({"gpu001": r})
    sub = Subject("gpu001", ("gpu001",))
    with pytest.raises(NotApplicable, match="nvidia-smi is not installed"):
        REGISTRY["health.gpu"].measure(ctx, _target("health.gpu"), sub, REP)
    ok = REGISTRY["health.clock"].measure(ctx, _target("health.clock"), sub, REP)
    assert ok.value == 0 and ok.details == ["note: NTPSynchronized=yes"]
    bad = REGISTRY["health.nvme"].measure(ctx, _target("health.nvme"), sub, REP)
    assert bad.value == 1 and bad.details == ["fault code 60: nothing mounted at /mnt/local-nvme"]
    assert sum("kiln-health" in c for c in r.commands) == 1  # once per host and run
    with pytest.raises(CheckError, match=r"reported no health\.rdma"):
        REGISTRY["health.rdma"].measure(ctx, _target("health.rdma"), sub, REP)
    missing = context({"gpu001": FakeRemote("gpu001").on(r"kiln-health", (127, "", ""))})
    with pytest.raises(CheckError, match="kiln-health is not installed"):
        REGISTRY["health.clock"].measure(missing, _target("health.clock"), sub, REP)
