"""The monitoring plan: Prometheus hosts, scrape targets per host, alert rules and Lustre snapshot schedules.

Everything here is derived from the plan (hosts, NICs, the target map, host sysctls, the checkpoint
cadence), so an alert names the planned value it compares against. Metric names are those of the
exporters kiln deploys: node_exporter 1.5.0 (Debian bookworm; infiniband and sysctl collectors,
collector/infiniband_linux.go and collector/sysctl_linux.go), NVIDIA dcgm-exporter's default counters
(etc/default-counters.csv), SeaweedFS's -metricsPort endpoints and kiln's Lustre exporter
(kiln/node/exporters/lustre.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from kiln import knowledge
from kiln.plan.groups import COMPUTE, LUSTRE_MDS, LUSTRE_MGS
from kiln.plan.model import AcceptanceTarget, Host, LustreTarget, ObjectStorePlan, Tunable
from kiln.spec.errors import SpecIssue, suggest
from kiln.spec.models import ClusterSpec

Severity = Literal["critical", "warning"]

RUNBOOK = "docs/runbooks/monitoring.md"

#: node_exporter reports the IB port state as the number in /sys/class/infiniband/<dev>/ports/<n>/state
#: ("4: ACTIVE"; collector/infiniband_linux.go, state_id).
IB_STATE_ACTIVE = 4


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    job: str
    host: str
    address: str  # host:port
    labels: dict[str, str]


@dataclass(frozen=True, slots=True)
class AlertRule:
    alert: str
    group: str  # rule group: lustre, fabric, gpu, objectstore, host, exporters, datamover
    expr: str
    for_s: int
    severity: Severity
    summary: str
    description: str
    labels: dict[str, str] = field(default_factory=dict)  # extra static labels (planned values)

    @property
    def runbook(self) -> str:
        return f"{RUNBOOK}#{self.alert.lower()}"


@dataclass(frozen=True, slots=True)
class SnapshotPlan:
    name: str
    every_hours: int
    keep: int


@dataclass(frozen=True, slots=True)
class Receiver:
    name: str
    webhook_url: str
    severities: tuple[str, ...]
    send_resolved: bool


@dataclass(frozen=True, slots=True)
class MonitoringPlan:
    hosts: tuple[str, ...]  # where Prometheus and Alertmanager run
    retention_days: int
    scrape_interval_s: int
    receivers: tuple[Receiver, ...]
    scrape_targets: tuple[ScrapeTarget, ...]
    node_exporter_args: tuple[str, ...]
    rules: tuple[AlertRule, ...]
    snapshots: tuple[SnapshotPlan, ...]
    fill_warn_percent: float
    fill_critical_percent: float
    demand_read_GBps: float  # the dashboards' demand line (sizing.demand.read_GBps)
    filesystems: tuple[str, ...] = ()  # mount points whose fill alerts (HostFilesystemFilling/Full)
    for_max_s: int | None = None  # monitoring.alert_for_max_s: the cap applied to every rule's for_s
    fault_injection: bool = False  # kiln verify injects FAULTS (monitoring.fault_injection)
    fault_filesystem: str | None = None  # the small scratch filesystem the disk-fill fault fills

    def rule(self, alert: str) -> AlertRule:
        """The first rule of that name (KeyError when the plan has none)."""
        for r in self.rules:
            if r.alert == alert:
                return r
        raise KeyError(alert)


_RE2_META = frozenset(".^$*+?()[]{}|\\")


def _regex(values: list[str] | tuple[str, ...]) -> str:
    """A PromQL regex (anchored by Prometheus) matching exactly these values, as it stands inside a double-quoted
    PromQL string: a regex metacharacter gets a backslash, written twice (the string literal takes one)."""
    return "|".join("".join("\\\\" + c if c in _RE2_META else c for c in v) for v in sorted(set(values)))


def default_hosts(hosts: tuple[Host, ...]) -> tuple[str, ...]:
    # By group after the object store: an MDS on an OSS host (lustre.mds.colocated_with_oss) has role oss.
    for h in hosts:
        if h.role == "objectstore":
            return (h.name,)
    for group in (LUSTRE_MDS, LUSTRE_MGS):
        for h in hosts:
            if group in h.groups:
                return (h.name,)
    return (hosts[0].name,)


def _scrape_targets(hosts: tuple[Host, ...], monitors: tuple[str, ...], os_: ObjectStorePlan) -> list[ScrapeTarget]:
    out: list[ScrapeTarget] = []
    ports = knowledge.load().ports.metrics.by_job()  # kiln/knowledge/ports.yaml

    def add(job: str, h: Host) -> None:
        labels = {"host": h.name, "role": h.role}
        if h.pool:
            labels["pool"] = h.pool
        address = h.management_address
        if job.startswith("seaweedfs-"):
            # SeaweedFS 3.39 serves -metricsPort on its -ip.bind address (weed/command/volume.go and the
            # others: StartMetricsServer(*v.bindIp, ...)); roles/objectstore binds the first storage address
            address = next((n.address for n in h.nics if n.role == "storage" and n.address), address)
        out.append(ScrapeTarget(job, h.name, f"{address}:{ports[job]}", labels))

    by_name = {h.name: h for h in hosts}
    for name in monitors:
        add("prometheus", by_name[name])
        add("alertmanager", by_name[name])
    for h in hosts:
        add("node", h)
    for h in hosts:
        if h.role in ("compute", "mgs", "mds", "oss"):
            add("lustre", h)  # servers and clients
    for h in hosts:
        if h.gpus:
            add("dcgm", h)
    if os_.backend == "seaweedfs":
        for name in os_.masters:
            add("seaweedfs-master", by_name[name])
        for job in ("seaweedfs-volume", "seaweedfs-filer", "seaweedfs-s3"):
            for name in os_.hosts:
                add(job, by_name[name])
    return out


def sysctl_metric(name: str, key: str | None = None) -> str:
    """node_exporter's metric for a sysctl: node_sysctl_<name, dots as '_'>[_<key>] (collector/sysctl_linux.go)."""
    base = "node_sysctl_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
    return f"{base}_{key}" if key else base


SYSCTL_KEYS = ("min", "default", "max")

#: Debian bookworm's prometheus-node-exporter 1.5.0 built-in --collector.filesystem.mount-points-exclude is
#: ^/(dev|proc|run|sys|mnt|media|var/lib/docker/.+|var/lib/containers/storage/.+)($|/) (its --help; upstream's
#: collector/filesystem_linux.go default has no mnt|media): the same without mnt and media, so that planned
#: filesystems under /mnt (local NVMe scratch, the lab's fault filesystem) are collected.
MOUNT_POINTS_EXCLUDE = "^/(dev|proc|run|sys|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)"


def _sysctl_include(t: Tunable) -> str:
    """The --collector.sysctl.include value: name, or name:k1,k2,k3 for a multi-value sysctl."""
    values = str(t.value).split()
    return t.param if len(values) == 1 else f"{t.param}:{','.join(SYSCTL_KEYS[: len(values)])}"


def _sysctls(tunables: tuple[Tunable, ...]) -> list[Tunable]:
    out = []
    for t in tunables:
        if t.apply == "sysctl" and all(v.lstrip("-").isdigit() for v in str(t.value).split()):
            out.append(t)
    return out


def _lustre_rules(spec: ClusterSpec, targets: tuple[LustreTarget, ...]) -> list[AlertRule]:
    m = spec.monitoring
    out: list[AlertRule] = []
    levels: tuple[tuple[Severity, float], ...] = (
        ("warning", m.fill_warn_percent),
        ("critical", m.fill_critical_percent),
    )
    for sev, pct in levels:
        frac = round(pct / 100, 4)
        out.append(AlertRule(
            "LustreTargetSpaceFilling" if sev == "warning" else "LustreTargetSpaceFull", "lustre",
            f"1 - lustre_target_free_bytes / lustre_target_capacity_bytes > {frac}", 300, sev,
            "Lustre {{ $labels.target }} is {{ $value | humanizePercentage }} full",
            f"{{{{ $labels.target }}}} on {{{{ $labels.host }}}} has used more than {pct:g}% of its space "
            "(monitoring.fill_*_percent).",
        ))
        out.append(AlertRule(
            "LustreTargetInodesFilling" if sev == "warning" else "LustreTargetInodesFull", "lustre",
            f"1 - lustre_target_files_free / lustre_target_files > {frac}", 300, sev,
            "Lustre {{ $labels.target }} has used {{ $value | humanizePercentage }} of its inodes",
            f"{{{{ $labels.target }}}} on {{{{ $labels.host }}}} has used more than {pct:g}% of its inodes.",
        ))
    out.append(AlertRule(
        "LustreServerNotHealthy", "lustre", "lustre_health_healthy == 0", 60, "critical",
        "Lustre on {{ $labels.host }} reports NOT HEALTHY",
        "/sys/fs/lustre/health_check on {{ $labels.host }} is not 'healthy' (a target or the OSD failed).",
    ))
    out.append(AlertRule(
        "LustreTargetRecovering", "lustre", 'lustre_target_recovery_status{status!="COMPLETE"} == 1', 900,
        "warning", "Lustre {{ $labels.target }} has been in recovery for 15 minutes",
        "recovery_status of {{ $labels.target }} is {{ $labels.status }}: clients are not reconnecting.",
    ))
    for t in targets:
        if t.kind == "mgt":
            continue
        out.append(AlertRule(
            "LustreTargetNotOnPlannedServer", "lustre",
            f'absent(lustre_target_info{{target="{t.name}",host="{t.host}"}})', 120, "critical",
            f"{t.name} is not mounted on its planned server {t.host}",
            f"The plan places {t.name} on {t.host}"
            + (f" (failover partner {t.failover_host})" if t.failover_host else "")
            + "; its exporter does not report it mounted there (down, or failed over).",
            {"target": t.name, "planned_host": t.host},
        ))
    out.append(AlertRule(
        "LnetNetworkInterfaceDown", "lustre", 'lustre_lnet_ni_up{net!="lo"} == 0', 120, "critical",
        "LNet NI {{ $labels.nid }} on {{ $labels.host }} is down",
        "lnetctl net show reports status down for {{ $labels.nid }}: the host lost a storage rail.",
    ))
    return out


def _fabric_rules(hosts: tuple[Host, ...]) -> list[AlertRule]:
    out: list[AlertRule] = []
    # one rule per (host class, planned link rate): hosts of a pool (or a server role) share their NICs,
    # and every scrape target carries the role and pool labels (_scrape_targets)
    by_rate: dict[tuple[str, float], list[str]] = {}
    classes: dict[str, str] = {}
    for h in hosts:
        for n in h.nics:
            if n.device:
                cls = f'role="{h.role}",pool="{h.pool}"' if h.pool else f'role="{h.role}"'
                devices = by_rate.setdefault((cls, n.link_Gbps), [])
                classes[cls] = f"{h.role}/{h.pool}" if h.pool else h.role
                if n.device not in devices:
                    devices.append(n.device)
    for (cls, rate), ds in sorted(by_rate.items()):
        sel = f'{cls},device=~"{_regex(ds)}"'
        bytes_s = int(rate * 1e9 / 8)
        out.append(AlertRule(
            "RdmaPortNotActive", "fabric", f"node_infiniband_state_id{{{sel}}} != {IB_STATE_ACTIVE}", 120,
            "critical", "RDMA port {{ $labels.device }}/{{ $labels.port }} on {{ $labels.host }} is not ACTIVE",
            "The port's state is not 4 (ACTIVE): the link is down or still training.",
            {"planned_Gbps": f"{rate:g}", "host_class": classes[cls]},
        ))
        out.append(AlertRule(
            "RdmaPortBelowPlannedRate", "fabric", f"node_infiniband_rate_bytes_per_second{{{sel}}} < {bytes_s}", 120,
            "warning", "RDMA port {{ $labels.device }} on {{ $labels.host }} runs below its planned rate",
            f"The plan expects {rate:g} Gb/s ({bytes_s} bytes/s); the port reports {{{{ $value }}}} bytes/s "
            "(a cable, transceiver or switch port negotiated down).",
            {"planned_Gbps": f"{rate:g}", "host_class": classes[cls]},
        ))
    if by_rate:
        errors = " or ".join(
            f"increase(node_infiniband_{c}[10m]) > 0"
            for c in ("symbol_error_total", "link_downed_total", "port_errors_received_total",
                      "link_error_recovery_total")
        )
        out.append(AlertRule(
            "RdmaPortErrorsRising", "fabric", errors, 0, "warning",
            "RDMA port {{ $labels.device }} on {{ $labels.host }} counts new errors",
            "Symbol errors, link-downed events, receive errors or link recoveries rose in the last 10 minutes.",
        ))
    return out


def _gpu_rules(spec: ClusterSpec) -> list[AlertRule]:
    t = spec.monitoring.gpu_temp_max_C
    return [
        AlertRule("GpuXidError", "gpu", "DCGM_FI_DEV_XID_ERRORS > 0", 0, "critical",
                  "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $value }}",
                  "dcgm-exporter's DCGM_FI_DEV_XID_ERRORS is the last XID the driver logged."),
        AlertRule("GpuUncorrectableMemoryError", "gpu",
                  "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS > 0 or DCGM_FI_DEV_ROW_REMAP_FAILURE > 0", 0,
                  "critical", "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} has uncorrectable memory errors",
                  "Rows were remapped for uncorrectable (double-bit) ECC errors, or remapping failed."),
        AlertRule("GpuTooHot", "gpu", f"DCGM_FI_DEV_GPU_TEMP > {t}", 300, "warning",
                  "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is at {{ $value }} °C",
                  f"Above monitoring.gpu_temp_max_C ({t} °C) for 5 minutes: the GPU throttles."),
    ]


def _host_rules(sysctls: list[Tunable], every_s: int) -> list[AlertRule]:
    out = [AlertRule(
        "ExporterDown", "exporters", "up == 0", 2 * every_s, "critical",
        "{{ $labels.job }} exporter on {{ $labels.host }} is down",
        "Prometheus could not scrape {{ $labels.instance }} (up == 0 for the rule's for:, two scrape intervals "
        "unless monitoring.alert_for_max_s caps it).",
    )]
    for t in sysctls:
        values = str(t.value).split()
        keys: tuple[str | None, ...] = (None,) if len(values) == 1 else SYSCTL_KEYS[: len(values)]
        for key, value in zip(keys, values, strict=True):
            shown = f"{t.param}[{key}]" if key else t.param
            out.append(AlertRule(
                "SysctlDrift", "host", f"{sysctl_metric(t.param, key)} != {value}", 2 * every_s, "warning",
                f"{shown} on {{{{ $labels.host }}}} differs from the plan",
                f"The plan sets {shown} = {value} ({t.id}); the host reports {{{{ $value }}}}.",
                {"sysctl": shown, "planned": value},
            ))
    return out


def _filesystem_rules(spec: ClusterSpec) -> list[AlertRule]:
    """Space used on the planned mount points (node_exporter collector/filesystem_linux.go:
    node_filesystem_avail_bytes, node_filesystem_size_bytes, labelled by mountpoint)."""
    m = spec.monitoring
    mounts = [*m.filesystems, *([m.fault_filesystem] if m.fault_filesystem else [])]
    if not mounts:
        return []
    sel = f'{{mountpoint=~"{_regex(mounts)}"}}'
    out = []
    levels: tuple[tuple[Severity, float], ...] = (
        ("warning", m.fill_warn_percent),
        ("critical", m.fill_critical_percent),
    )
    for sev, pct in levels:
        out.append(AlertRule(
            "HostFilesystemFilling" if sev == "warning" else "HostFilesystemFull", "host",
            f"1 - node_filesystem_avail_bytes{sel} / node_filesystem_size_bytes{sel} > {round(pct / 100, 4)}",
            300, sev, "{{ $labels.mountpoint }} on {{ $labels.host }} is {{ $value | humanizePercentage }} full",
            f"{{{{ $labels.mountpoint }}}} on {{{{ $labels.host }}}} has used more than {pct:g}% of its space "
            "(monitoring.filesystems, monitoring.fill_*_percent).",
        ))
    return out


def _objectstore_rules(os_: ObjectStorePlan) -> list[AlertRule]:
    if os_.backend != "seaweedfs":
        return []
    return [AlertRule(
        "ObjectStoreVolumeServerDown", "objectstore", 'up{job="seaweedfs-volume"} == 0', 60, "critical",
        "SeaweedFS volume server on {{ $labels.host }} is down",
        "Its volumes are unreadable" + (" (replication 000 keeps one copy)" if os_.replication == "000" else "")
        + "; writes to its collections fail once the others are full.",
    )]


#: The data mover's checkpoint export lag (kiln/dataflow/progress.py families: the textfile on bare metal, the
#: `kiln data run --metrics-port` endpoint on Kubernetes; both carry the labels link and direction).
EXPORT_LAG = 'kiln_dataflow_lag_s{direction="checkpoint"}'


def _datamover_rules(spec: ClusterSpec) -> list[AlertRule]:
    budget = int(spec.workload.checkpoint.interval_min * 60)
    return [AlertRule(
        "CheckpointExportLagging", "datamover", f"{EXPORT_LAG} > {budget}", 0, "warning",
        "Checkpoint export to the object store lags {{ $value }} s",
        f"The export of checkpoints to the object store is behind by more than one checkpoint interval "
        f"({budget} s, workload.checkpoint.interval_min): a lost Lustre would lose more than one checkpoint.",
        {"budget_s": str(budget)},
    )]


def _issues(spec: ClusterSpec, hosts: tuple[Host, ...]) -> list[SpecIssue]:
    m = spec.monitoring
    names = [h.name for h in hosts]
    out: list[SpecIssue] = []
    for i, h in enumerate(m.hosts):
        if h not in names:
            out.append(SpecIssue(f"monitoring.hosts[{i}]", h, "not a host of the plan", suggest(h, names)))
    if m.fill_critical_percent <= m.fill_warn_percent:
        out.append(SpecIssue("monitoring.fill_critical_percent", m.fill_critical_percent,
                             f"not above fill_warn_percent ({m.fill_warn_percent:g})",
                             "set the critical level above the warn level"))
    seen: set[str] = set()
    for i, r in enumerate(m.receivers):
        if r.name in seen:
            out.append(SpecIssue(f"monitoring.receivers[{i}].name", r.name, "duplicate receiver name",
                                 "give each receiver its own name"))
        seen.add(r.name)
    seen = set()
    for i, s in enumerate(m.lustre_snapshots):
        if spec.lustre.backend != "zfs":
            # lctl snapshot_* drive `zfs snapshot`: lustre/utils/lsnapshot.c (snapshot_load_conf_ldev
            # accepts only zfs: devices; snapshot_create runs `zfs snapshot` on every target).
            out.append(SpecIssue(
                f"monitoring.lustre_snapshots[{i}]", s.name,
                f"Lustre snapshots (lctl snapshot_create) need ZFS targets; lustre.backend is {spec.lustre.backend}",
                "set lustre.backend: zfs (a reformat: plan it before data lands), or remove the schedule and "
                "protect data by copying to the object store",
            ))
        if s.name in seen:
            out.append(SpecIssue(f"monitoring.lustre_snapshots[{i}].name", s.name, "duplicate schedule name",
                                 "give each schedule its own name"))
        seen.add(s.name)
    return out


def build_monitoring(
    spec: ClusterSpec,
    hosts: tuple[Host, ...],
    targets: tuple[LustreTarget, ...],
    tunables: tuple[Tunable, ...],
    objectstore: ObjectStorePlan,
    demand_read_GBps: float,
) -> tuple[MonitoringPlan, list[SpecIssue]]:
    m = spec.monitoring
    issues = _issues(spec, hosts)
    monitors = tuple(m.hosts) or default_hosts(hosts)
    if issues:
        monitors = default_hosts(hosts)
    sysctls = _sysctls(tunables)
    # node_exporter 1.5.0 registers infiniband enabled and sysctl disabled by default
    # (collector/infiniband_linux.go, collector/sysctl_linux.go: registerCollector): name both.
    args = ["--collector.infiniband"]
    if m.filesystems or m.fault_filesystem:
        args.append(f"--collector.filesystem.mount-points-exclude={MOUNT_POINTS_EXCLUDE}")
    if sysctls:
        args += ["--collector.sysctl"] + [f"--collector.sysctl.include={_sysctl_include(t)}" for t in sysctls]
    rules = (
        _host_rules(sysctls, m.scrape_interval_s)
        + _filesystem_rules(spec)
        + _lustre_rules(spec, targets)
        + _fabric_rules(hosts)
        + (_gpu_rules(spec) if any(h.gpus for h in hosts) else [])
        + _objectstore_rules(objectstore)
        + _datamover_rules(spec)
    )
    if m.alert_for_max_s is not None:
        cap = m.alert_for_max_s
        rules = [replace(r, for_s=min(r.for_s, cap)) for r in rules]
    plan = MonitoringPlan(
        hosts=monitors,
        retention_days=m.retention_days,
        scrape_interval_s=m.scrape_interval_s,
        receivers=tuple(
            Receiver(r.name, r.webhook_url, tuple(r.severities), r.send_resolved) for r in m.receivers
        ),
        scrape_targets=tuple(_scrape_targets(hosts, monitors, objectstore)),
        node_exporter_args=tuple(args),
        rules=tuple(rules),
        snapshots=tuple(SnapshotPlan(s.name, s.every_hours, s.keep) for s in m.lustre_snapshots),
        fill_warn_percent=m.fill_warn_percent,
        fill_critical_percent=m.fill_critical_percent,
        demand_read_GBps=demand_read_GBps,
        filesystems=tuple(m.filesystems),
        for_max_s=m.alert_for_max_s,
        fault_injection=m.fault_injection,
        fault_filesystem=m.fault_filesystem,
    )
    return plan, issues


#: The faults `kiln verify` injects on a running cluster, each with the alert that must fire
#: (kiln/verify/checks/monitoring.py does the injecting and the repair).
FAULTS: dict[str, tuple[str, str]] = {
    "objectstore_volume_down": ("ObjectStoreVolumeServerDown", "stop a SeaweedFS volume server"),
    "disk_fill": ("HostFilesystemFilling", "fill a planned filesystem past fill_warn_percent"),
    "sysctl_drift": ("SysctlDrift", "set a planned sysctl to another value"),
    "exporter_down": ("ExporterDown", "stop node_exporter on a host"),
}

#: kiln-health's sub-checks (kiln/node/health.py run_checks), one acceptance row each on the compute hosts.
HEALTH_CHECKS: dict[str, str] = {
    "health.gpu": "GPUs present, no uncorrectable ECC errors, no hardware slowdown",
    "health.rdma": "planned RDMA ports ACTIVE at their planned rate",
    "health.lustre": "Lustre mounted with every OST/MDT import FULL",
    "health.lnet": "every Lustre server NID answers lnetctl ping",
    "health.clock": "the clock is synchronised",
    "health.nvme": "local NVMe scratch mounted",
}


def fire_bound_s(m: MonitoringPlan, rule: AlertRule) -> int:
    """How long an injected fault may take to fire its alert: 2 × scrape interval + the rule's `for:`.

    Prometheus evaluates rules every evaluation_interval, which kiln sets to the scrape interval (role
    monitoring's prometheus.yml, kube-prometheus-stack's evaluationInterval). The worst case is one scrape
    interval until the first scrape that sees the fault, one evaluation interval until a rule evaluation reads
    that sample, then the rule's `for:`; a rule with `for: 0` fires at that evaluation. So with `for: 0` (the
    lab's alert_for_max_s) an injected fault fires within two scrape intervals."""
    return 2 * m.scrape_interval_s + rule.for_s


def monitoring_targets(m: MonitoringPlan) -> list[AcceptanceTarget]:
    """Acceptance targets of the monitoring stack: scrape targets up, dashboard panels with data, every fault
    in FAULTS fires its alert within fire_bound_s and clears after repair, and the node health check."""
    out = [
        AcceptanceTarget("monitoring.targets_up", "targets down", "count", 0, 0, 0,
               "every planned scrape target is up in Prometheus (/api/v1/targets)", "aggregate", False, "all"),
        AcceptanceTarget("monitoring.panels_with_data", "panels without data", "count", 0, 0, 0,
               "every dashboard panel's query returns data from the live Prometheus", "aggregate", False, "all"),
    ]
    names = {r.alert for r in m.rules}
    for name, (alert, what) in FAULTS.items() if m.fault_injection else ():
        if alert not in names or (name == "disk_fill" and not m.fault_filesystem):
            continue
        bound = fire_bound_s(m, m.rule(alert))
        out.append(AcceptanceTarget(
            f"monitoring.fault_{name}", "seconds to fire", "s", bound, bound, bound,
            f"{what}: {alert} fires within 2 scrape intervals + its for: ({bound} s) and clears after repair",
            "aggregate", False, "all",
        ))
    for check, why in HEALTH_CHECKS.items():
        out.append(AcceptanceTarget(
            check, "faults", "count", 0, 0, 0, f"kiln-health: {why}", "host", False, COMPUTE,
        ))
    return out

