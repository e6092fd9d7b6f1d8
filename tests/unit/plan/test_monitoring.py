"""The monitoring plan: hosts, scrape targets, alert rules derived from the plan, snapshot schedules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kiln import knowledge
from kiln.cli.common import load
from kiln.plan import build_plan
from kiln.plan.monitoring import FAULTS, MOUNT_POINTS_EXCLUDE, OK_HOST, sysctl_metric
from kiln.spec.models import ClusterSpec
from tests.unit.refusals import Refusal, refusal, refused


def _spec(stack: str, **monitoring: object) -> ClusterSpec:
    spec, _ = load(stack)
    data = spec.model_dump(mode="json")
    data["monitoring"] = {**data["monitoring"], **monitoring}
    return ClusterSpec.model_validate(data)


def test_lab_stack_monitoring_section() -> None:
    _, plan = load("lab")
    m = plan.monitoring
    assert m.hosts == ("s3-01",)
    assert m.scrape_interval_s == 5 and m.retention_days == 2
    # the lab sets every rule's for: to 0 so that injected faults fire within two scrape intervals
    assert m.for_max_s == 0 and max(r.for_s for r in m.rules) == 0
    assert m.fault_injection and m.fault_filesystem == "/mnt/kiln-fault"


def test_hosts_default_to_the_first_object_store_host() -> None:
    plan = build_plan(_spec("lab", hosts=[], scrape_interval_s=30, alert_for_max_s=None))
    assert plan.monitoring.hosts == ("s3-01",)
    down = next(r for r in plan.monitoring.rules if r.alert == "ExporterDown")
    assert down.for_s == 60  # two scrape intervals


def test_scrape_targets_follow_the_plan() -> None:
    _, plan = load("lab")
    jobs: dict[str, set[str]] = {}
    for t in plan.monitoring.scrape_targets:
        jobs.setdefault(t.job, set()).add(t.host)
        h = plan.host(t.host)
        if t.job.startswith("seaweedfs-"):  # SeaweedFS serves -metricsPort on its bind (storage) address
            address = next(n.address for n in h.nics if n.role == "storage")
        else:
            address = h.management_address
        base = knowledge.load().ports.metrics.by_job()[t.job]
        if t.job == "kiln-stream":  # local rank i of a training node serves base + i
            assert t.address in {f"{address}:{base + i}" for i in range(plan.kafka.topics[0].ranks_per_node)}
        else:
            assert t.address == f"{address}:{base}"
        assert t.labels["host"] == t.host and t.labels["role"] == plan.host(t.host).role
    assert jobs["node"] == {h.name for h in plan.hosts}
    assert jobs["lustre"] == {"gpu001", "gpu002", "mds01", "oss01", "oss02"}
    assert jobs["dcgm"] == {"gpu001", "gpu002"}
    assert jobs["seaweedfs-volume"] == {"s3-01"} and jobs["seaweedfs-master"] == {"s3-01"}
    assert jobs["prometheus"] == {"s3-01"}
    # every node of the consuming pool, one target per rank it runs (bare-metal stream)
    assert jobs["kiln-stream"] == {"gpu001", "gpu002"}
    assert len([t for t in plan.monitoring.scrape_targets if t.job == "kiln-stream"]) == 4


def test_every_target_has_a_placement_alert() -> None:
    _, plan = load("lab")
    placed = {r.labels["target"]: r for r in plan.monitoring.rules if r.alert == "LustreTargetNotOnPlannedServer"}
    assert set(placed) == {t.name for t in plan.lustre_targets if t.kind != "mgt"}
    assert placed["lab-OST0002"].expr == ('absent(lustre_target_info{target="lab-OST0002",host="oss02"}) '
                                          'and on(host) up{job="lustre",host="oss02"} == 1')


def test_fill_thresholds_come_from_the_spec() -> None:
    plan = build_plan(_spec("lab", fill_warn_percent=70, fill_critical_percent=85))
    exprs = {r.alert: r.expr for r in plan.monitoring.rules}
    assert exprs["LustreTargetSpaceFilling"].endswith("> 0.7")
    assert exprs["LustreTargetSpaceFull"].endswith("> 0.85")


def test_sysctl_drift_rules_compare_with_planned_values() -> None:
    _, plan = load("lab")
    drift = {r.labels["sysctl"]: r.expr for r in plan.monitoring.rules if r.alert == "SysctlDrift"}
    rmem = plan.tunable("host.sysctl.net.core.rmem_max")
    assert drift["net.core.rmem_max"] == f"{sysctl_metric('net.core.rmem_max')} != {rmem.value}"
    tcp = str(plan.tunable("host.sysctl.net.ipv4.tcp_rmem").value).split()
    assert drift["net.ipv4.tcp_rmem[min]"] == f"node_sysctl_net_ipv4_tcp_rmem_min != {tcp[0]}"
    assert drift["net.ipv4.tcp_rmem[max]"] == f"node_sysctl_net_ipv4_tcp_rmem_max != {tcp[2]}"
    args = plan.monitoring.node_exporter_args
    assert "--collector.sysctl.include=net.ipv4.tcp_rmem:min,default,max" in args
    assert "--collector.sysctl" in args  # off by default in node_exporter 1.5.0


def test_rdma_rules_only_where_the_plan_has_rdma_devices() -> None:
    _, lab = load("lab")
    assert not [r for r in lab.monitoring.rules if r.group == "fabric"]
    _, prod = load("prod-h100")
    rate = [r for r in prod.monitoring.rules if r.alert == "RdmaPortBelowPlannedRate"]
    assert rate
    for r in rate:
        planned = float(r.labels["planned_Gbps"])
        assert r.expr.endswith(f"< {int(planned * 1e9 / 8)}")


REFUSALS = [
    refusal("unknown monitoring host, with a suggestion", "lab", {"monitoring.hosts": ["s3-1"]}, "monitoring.hosts[0]",
            first=True, plan=True, fix="s3-01"),
    refusal("critical not above warn", "lab",
            {"monitoring.fill_warn_percent": 90, "monitoring.fill_critical_percent": 80},
            "monitoring.fill_critical_percent", first=True, plan=True),
    refusal("snapshots on ldiskfs", "lab",
            {"monitoring.lustre_snapshots": [{"name": "hourly", "every_hours": 1, "keep": 24}]},
            "monitoring.lustre_snapshots[0]", first=True, plan=True, problem="ZFS", fix="lustre.backend: zfs"),
]


@pytest.mark.parametrize("row", REFUSALS)
def test_refused_with_reason_and_fix(row: Refusal) -> None:
    refused(row)


def test_snapshots_planned_on_zfs() -> None:
    spec = _spec("lab", lustre_snapshots=[{"name": "daily", "every_hours": 24, "keep": 7}])
    data = spec.model_dump(mode="json")
    data["lustre"]["backend"] = "zfs"
    plan = build_plan(ClusterSpec.model_validate(data))
    (snap,) = plan.monitoring.snapshots
    assert (snap.name, snap.every_hours, snap.keep) == ("daily", 24, 7)


def test_receiver_url_is_checked() -> None:
    with pytest.raises(ValueError, match="http"):
        _spec("lab", receivers=[{"name": "ops", "webhook_url": "ftp://x"}])


def test_every_alert_is_documented_and_has_a_runbook_section() -> None:
    root = Path(__file__).resolve().parents[3]
    doc = (root / "docs" / "monitoring.md").read_text()
    for stack in ("lab", "dev", "prod-h100"):
        _, plan = load(stack)
        for r in plan.monitoring.rules:
            assert f"`{r.alert}`" in doc, r.alert
            path, anchor = r.runbook.split("#")
            runbook = (root / path).read_text()
            assert anchor in {line[3:].strip().lower() for line in runbook.splitlines() if line.startswith("## ")}, \
                r.alert


def test_filesystem_rules_watch_the_planned_mounts() -> None:
    plan = build_plan(_spec("lab", filesystems=["/", "/var"], fault_filesystem="/mnt/kiln-fault",
                            fill_warn_percent=70, fill_critical_percent=85))
    rules = {r.alert: r for r in plan.monitoring.rules if r.alert.startswith("HostFilesystem")}
    sel = '{mountpoint=~"/|/mnt/kiln-fault|/var"}'
    assert rules["HostFilesystemFilling"].expr == (
        f"1 - node_filesystem_avail_bytes{sel} / node_filesystem_size_bytes{sel} > 0.7")
    assert rules["HostFilesystemFull"].expr.endswith("> 0.85")
    none = build_plan(_spec("lab", filesystems=[], fault_filesystem=None))
    assert not [r for r in none.monitoring.rules if r.alert.startswith("HostFilesystem")]
    # Debian's node_exporter skips /mnt by default: the plan passes an exclude list without it
    exclude = [a for a in plan.monitoring.node_exporter_args if a.startswith("--collector.filesystem.mount-points")]
    assert exclude == [f"--collector.filesystem.mount-points-exclude={MOUNT_POINTS_EXCLUDE}"]
    assert not re.match(MOUNT_POINTS_EXCLUDE, "/mnt/kiln-fault") and re.match(MOUNT_POINTS_EXCLUDE, "/proc/sys")
    assert not [a for a in none.monitoring.node_exporter_args if a.startswith("--collector.filesystem.")]


def test_for_cap_applies_to_every_rule() -> None:
    uncapped = build_plan(_spec("lab", alert_for_max_s=None)).monitoring
    capped = build_plan(_spec("lab", alert_for_max_s=7)).monitoring
    assert max(r.for_s for r in uncapped.rules) == 3600  # DataMoverFailing
    assert [min(r.for_s, 7) for r in uncapped.rules] == [r.for_s for r in capped.rules]


def test_monitoring_targets_only_with_fault_injection() -> None:
    _, plan = load("lab")
    checks = {t.check: t for t in plan.targets}
    faults = {c for c in checks if c.startswith("monitoring.fault_")}
    assert faults == {"monitoring.fault_objectstore_volume_down", "monitoring.fault_disk_fill",
                      "monitoring.fault_sysctl_drift", "monitoring.fault_exporter_down",
                      "monitoring.fault_mover_failing"}
    # 2 scrape intervals + the capped for: 2 × 5 + 0, the monitoring requirement's "within two scrape intervals"
    assert checks["monitoring.fault_exporter_down"].fail == 10
    capped = {t.check: t for t in build_plan(_spec("lab", alert_for_max_s=10)).targets}
    assert capped["monitoring.fault_exporter_down"].fail == 2 * 5 + 10
    assert not checks["monitoring.fault_exporter_down"].higher_is_better
    assert {"monitoring.targets_up", "monitoring.panels_with_data", "health.gpu", "health.clock"} <= set(checks)
    quiet = build_plan(_spec("lab", fault_injection=False))
    assert not [t for t in quiet.targets if t.check.startswith("monitoring.fault_")]
    no_fs = build_plan(_spec("lab", fault_filesystem=None))
    assert "monitoring.fault_disk_fill" not in {t.check for t in no_fs.targets}
    _, prod = load("prod-h100")
    assert "monitoring.targets_up" in {t.check for t in prod.targets}
    assert not [t for t in prod.targets if t.check.startswith("monitoring.fault_")]


@pytest.mark.parametrize("stack", ["lab", "dev", "prod-h100"])
def test_every_rule_has_a_firing_and_a_silent_promtool_case(stack: str) -> None:
    """Each rule is tested both ways: a case that fires it, and a case or a healthy neighbour (on OK_HOST) that
    must stay silent. A rule with no case of its own is covered by the "alert" cases of its alert."""
    _, plan = load(stack)
    rules = plan.monitoring.rules
    for r in rules:
        cases = r.tests or tuple(c for o in rules if o.alert == r.alert for c in o.tests if c.kind == "alert")
        assert any(c.fires for c in cases), r
        assert any(c.fires is None or any(s.labels.get("host") == OK_HOST["host"] for s in c.series)
                   for c in cases), r


def test_every_fault_the_lab_injects_belongs_to_a_rule() -> None:
    _, lab = load("lab")
    injected = {t.check.removeprefix("monitoring.fault_") for t in lab.targets
                if t.check.startswith("monitoring.fault_")}
    assert injected == set(FAULTS)
    for name in injected:
        rule = next((r for r in lab.monitoring.rules if r.fault and r.fault.name == name), None)
        assert rule is not None, name
        assert rule.alert == FAULTS[name][0]
    for stack in ("lab", "dev", "prod-h100"):
        _, plan = load(stack)
        for r in plan.monitoring.rules:
            if r.fault:
                # a fault names its acceptance row and fires its own rule, which promtool holds to the fire bound
                assert FAULTS[r.fault.name][0] == r.alert
                assert any(c.kind == "onset" and c.fires for c in r.tests), r.alert
