"""The monitoring plan: Prometheus hosts, scrape targets per host, alert rules and Lustre snapshot schedules.

Everything here is derived from the plan (hosts, NICs, the target map, host sysctls, the checkpoint
cadence), so an alert names the planned value it compares against. Metric names are those of the
exporters kiln deploys: node_exporter 1.5.0 (Debian bookworm; infiniband and sysctl collectors,
collector/infiniband_linux.go and collector/sysctl_linux.go), NVIDIA dcgm-exporter's default counters
(etc/default-counters.csv), SeaweedFS's -metricsPort endpoints and kiln's Lustre exporter
(kiln/node/exporters/lustre.py).

Each alert is one function below that returns its rule (or one rule per planned item) together with the
rule's `promtool test rules` cases and, where `kiln verify` injects one, its fault. The renderer
(kiln/render/monitoring.py) and the fault checks (kiln/verify/checks/monitoring.py) read those records and
know no alert by name.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from kiln import knowledge
from kiln.plan.groups import COMPUTE, LUSTRE_MDS, LUSTRE_MGS
from kiln.plan.kafka import BROKER_POOL, CLUSTER
from kiln.plan.model import AcceptanceTarget, Host, KafkaPlan, LustreTarget, ObjectStorePlan, Tunable
from kiln.plan.tuning import is_namespaced_sysctl
from kiln.spec.errors import SpecIssue, suggest
from kiln.spec.models import ClusterSpec, Monitoring

Severity = Literal["critical", "warning"]

RUNBOOK = "docs/runbooks/monitoring.md"
STREAM_JOB = "kiln-stream"  # the training ranks' stream gauges on bare-metal nodes (kiln.stream.serve_metrics)

#: node_exporter reports the IB port state as the number in /sys/class/infiniband/<dev>/ports/<n>/state
#: ("4: ACTIVE"; collector/infiniband_linux.go, state_id).
IB_STATE_ACTIVE = 4



@dataclass(frozen=True, slots=True, kw_only=True)
class ScrapeTarget:
    job: str
    host: str
    address: str  # host:port
    labels: dict[str, str]


# --- an alert's promtool cases --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """An input series of a promtool test: metric{labels} and its samples in promtool's expanding notation
    ("1x200": the value 1 for 201 samples; "0+1x200": a counter that rises by one a sample)."""

    metric: str
    labels: dict[str, str]
    values: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Firing:
    """The alert a case expects: the labels it takes from its series (the rule adds its severity and its own
    labels) and the value its annotations print."""

    labels: dict[str, str]
    value: float


#: How a case is evaluated, and where the test file lists it. "rule": once the rule's `for:` (at least 10
#: minutes) and two scrape intervals have passed. "alert": the same, one input for every rule of the alert at
#: once (listed before the "rule" cases). "onset": the fault starts after GOOD_SAMPLES healthy samples; the
#: alert must be silent until its `for:` can have elapsed and firing by fire_bound_s (listed last).
CaseKind = Literal["rule", "alert", "onset"]
CASE_KINDS: tuple[CaseKind, ...] = ("alert", "rule", "onset")  # the order of the test file


@dataclass(frozen=True, slots=True, kw_only=True)
class PromtoolCase:
    """One `promtool test rules` case of a rule: input series and the alert the rule must raise from them (None:
    it must stay silent). A case that fires holds healthy neighbours too (on OK_HOST, or series the rule must
    ignore), which must not fire."""

    series: tuple[Series, ...]
    fires: Firing | None = None
    kind: CaseKind = "rule"
    #: A "rule" case whose fault is repaired in its series: the alert must be silent again at this evaluation time
    #: (seconds from the first sample), after firing (or staying silent) at the case's own evaluation time.
    cleared_s: int | None = None


# --- an alert's injectable fault ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Commands:
    """A fault made and repaired by one shell command each."""

    inject: str
    repair: str
    note: str = ""  # what the fault changes, for the acceptance row


@dataclass(frozen=True, slots=True, kw_only=True)
class FilesystemFill:
    """A fault made by one file that fills a small scratch filesystem to `fraction` of its size, repaired by
    removing it. kiln verify measures the filesystem first and refuses one that is not a mount point or is
    larger than 1 GiB."""

    mountpoint: str
    fraction: float


#: Where kiln verify injects a fault: on the first selected object-store host, on the first selected data mover
#: host, or on the first or the last selected host that does not run Prometheus (compute hosts first; "last" keeps
#: a fault that silences a host's exporter off the host the other faults change).
FaultHost = Literal["objectstore", "first", "last", "mover"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """A fault `kiln verify` injects to prove that its rule fires within fire_bound_s and clears after repair.
    It is a description that kiln/verify/checks/monitoring.py carries out on one selected host; the check then
    expects the rule's alert firing with `labels` and that host's name as `host`."""

    name: str  # its acceptance row, monitoring.fault_<name> (a key of FAULTS)
    on: FaultHost
    how: Commands | FilesystemFill
    labels: dict[str, str] = field(default_factory=dict)  # the firing alert's labels besides alertname and host


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertRule:
    alert: str
    group: str  # rule group: lustre, fabric, gpu, objectstore, host, exporters, datamover
    expr: str
    for_s: int
    severity: Severity
    summary: str
    description: str
    labels: dict[str, str] = field(default_factory=dict)  # extra static labels (planned values)
    tests: tuple[PromtoolCase, ...] = ()  # its promtool cases (a rule covered by an "alert" case of another: none)
    fault: Fault | None = None  # the fault kiln verify injects to fire it, where there is one
    runbook_doc: str = RUNBOOK  # the runbook with a section named after the alert

    @property
    def runbook(self) -> str:
        return f"{self.runbook_doc}#{self.alert.lower()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotPlan:
    name: str
    every_hours: int
    keep: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Receiver:
    name: str
    webhook_url: str
    severities: tuple[str, ...]
    send_resolved: bool


@dataclass(frozen=True, slots=True, kw_only=True)
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


def _regex(values: Sequence[str]) -> str:
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


def _scrape_targets(hosts: tuple[Host, ...], monitors: tuple[str, ...], os_: ObjectStorePlan,
                    kafka: KafkaPlan | None) -> list[ScrapeTarget]:
    out: list[ScrapeTarget] = []
    ports = knowledge.load().ports.metrics.by_job()  # kiln/knowledge/ports.yaml

    # One labels dict per host, shared by its targets (read only): a hundred thousand hosts have three targets each.
    labels = {h.name: {"host": h.name, "role": h.role, **({"pool": h.pool} if h.pool else {})} for h in hosts}

    def add(job: str, chosen: Iterable[Host]) -> None:
        port = ports[job]
        if not job.startswith("seaweedfs-"):  # one loop per job: a hundred thousand hosts have three targets each
            out.extend(ScrapeTarget(job=job, host=h.name, address=f"{h.management_address}:{port}",
                                    labels=labels[h.name]) for h in chosen)
            return
        for h in chosen:
            # SeaweedFS 3.39 serves -metricsPort on its -ip.bind address (weed/command/volume.go and the
            # others: StartMetricsServer(*v.bindIp, ...)); roles/objectstore binds the first storage address
            address = next((n.address for n in h.nics if n.role == "storage" and n.address), h.management_address)
            out.append(ScrapeTarget(job=job, host=h.name, address=f"{address}:{port}", labels=labels[h.name]))

    by_name = {h.name: h for h in hosts}
    for name in monitors:
        add("prometheus", [by_name[name]])
        add("alertmanager", [by_name[name]])
    add("node", hosts)
    add("lustre", (h for h in hosts if h.role in ("compute", "mgs", "mds", "oss")))  # servers and clients
    add("dcgm", (h for h in hosts if h.gpus))
    if os_.backend == "seaweedfs":
        add("seaweedfs-master", [by_name[name] for name in os_.masters])
        for job in ("seaweedfs-volume", "seaweedfs-filer", "seaweedfs-s3"):
            add(job, [by_name[name] for name in os_.hosts])
    add("kafka", (h for h in hosts if h.role == "kafka"))  # the JMX exporter of each bare-metal KRaft node
    out += _rank_targets(hosts, kafka, ports["kiln-stream"], labels)
    return out


def _rank_targets(hosts: tuple[Host, ...], kafka: KafkaPlan | None, base: int,
                  labels: dict[str, dict[str, str]]) -> list[ScrapeTarget]:
    """Bare metal: every rank a consuming pool's node runs serves its stream gauges on base + its local rank
    (kiln.stream.serve_metrics). Which nodes a job lands on is the scheduler's choice, so every node of the pool is
    listed; a node between jobs serves nothing (TargetsUp notes it, no alert reads up of this job). On Kubernetes the
    PodMonitor kiln-tokens-consumers finds the training pods instead."""
    if kafka is None or kafka.mode != "baremetal":
        return []
    ranks: dict[str, int] = {}
    for t in kafka.topics:
        ranks[t.pool] = max(ranks.get(t.pool, 0), t.ranks_per_node)
    return [ScrapeTarget(job=STREAM_JOB, host=h.name, address=f"{h.management_address}:{base + i}",
                         labels=labels[h.name])
            for h in hosts if h.role == "compute" and h.pool in ranks for i in range(ranks[h.pool])]


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


def fill_mounts(filesystems: Sequence[str], fault_filesystem: str | None) -> tuple[str, ...]:
    """The mount points whose space used alerts (monitoring.filesystems and fault_filesystem), sorted."""
    return tuple(sorted({*filesystems, *([fault_filesystem] if fault_filesystem else [])}))


def mountpoint_selector(mounts: Sequence[str]) -> str:
    """The selector of those mount points, as the fill alerts and the hosts dashboard write it."""
    return f'{{mountpoint=~"{_regex(mounts)}"}}'


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



# --- promtool case helpers ------------------------------------------------------------------------------

#: Samples per test series: past every evaluation time (the longest for: is 900 s; scrape intervals from 5 s).
SAMPLES = 200
#: The hosts of the test series: a healthy neighbour and the host with the fault.
OK_HOST = {"host": "ok-host", "instance": "ok-host:1"}
BAD_HOST = {"host": "bad-host", "instance": "bad-host:1"}
#: Healthy samples before the fault in an "onset" case: the fault starts right after sample GOOD_SAMPLES - 1.
GOOD_SAMPLES = 3


def _held(metric: str, labels: dict[str, str], value: object, samples: int = SAMPLES) -> Series:
    """A series that holds one value for `samples` samples (SAMPLES unless a rule looks further)."""
    return Series(metric=metric, labels=labels, values=f"{value}x{samples}")


def _samples(horizon_s: int, every_s: int) -> int:
    """Samples that reach past `horizon_s` seconds and the case's evaluations, at least SAMPLES."""
    return max(SAMPLES, (horizon_s + 600) // every_s + 2 * GOOD_SAMPLES + 10)


def _onset(case: PromtoolCase) -> PromtoolCase:
    """The firing case of an injectable fault as it starts: each series of the faulty host first holds, for
    GOOD_SAMPLES samples, the value of its twin on the healthy host (one without a twin stays as it is)."""
    bad, ok = BAD_HOST["host"], OK_HOST["host"]
    values = {(s.metric, tuple(s.labels.items())): s.values for s in case.series}
    series = []
    for s in case.series:
        twin = tuple((k, v.replace(bad, ok)) for k, v in s.labels.items())
        healthy = values.get((s.metric, twin))
        if healthy is not None and any(bad in v for v in s.labels.values()):
            s = replace(s, values=f"{healthy.split('x', 1)[0]}x{GOOD_SAMPLES - 1} {s.values}")
        series.append(s)
    return replace(case, series=tuple(series), kind="onset")


def _increase_10m(step_s: int) -> float:
    """increase() over 10m of a counter rising 1 per sample: extrapolated as Prometheus does (rate.go)."""
    samples = 600 // step_s + 1  # samples inside the window, both ends included
    covered = (samples - 1) * step_s
    return (samples - 1) * 600 / covered


def _fill_levels(m: Monitoring) -> tuple[tuple[Severity, float, float], ...]:
    """(severity, percent, the share used in its test case) of the two fill levels: half-way between them for the
    warning, 99.5 % for the critical level."""
    return (
        ("warning", m.fill_warn_percent, (m.fill_warn_percent + m.fill_critical_percent) / 200),
        ("critical", m.fill_critical_percent, 0.995),
    )


def _fill_case(total: str, free: str, ok: dict[str, str], bad: dict[str, str], used: float) -> PromtoolCase:
    """`bad` has used `used` of its 1000 units (bytes or inodes), the healthy `ok` half of them."""
    free_bad = round(1000 * (1 - used))
    return PromtoolCase(
        series=(_held(total, ok, 1000), _held(free, ok, 500), _held(total, bad, 1000), _held(free, bad, free_bad)),
        fires=Firing(labels=bad, value=1 - free_bad / 1000),
    )


# --- the alerts -----------------------------------------------------------------------------------------


#: The share of an OST's or MDT's space used as `lfs df` prints it: used / (used + available), used = total - free
#: (lustre-release v2_15_8 lustre/utils/lfs.c, obd_statfs_ratio): kbytesavail, not kbytesfree, is what clients may
#: still write (free counts blocks reserved for root and the filesystem), so a target is full when avail is 0.
LUSTRE_SPACE_USED = ("(lustre_target_capacity_bytes - lustre_target_free_bytes) / (lustre_target_capacity_bytes - "
                     "lustre_target_free_bytes + lustre_target_available_bytes)")


def _space_case(ok: dict[str, str], bad: dict[str, str], used: float) -> PromtoolCase:
    """`bad` has 1000 units, 100 of them free but reserved, and `used` of the rest used as lfs df counts it: free
    alone (900 - used share) would read emptier. It fills, then frees space again by sample 20 (cleared)."""
    avail = round(900 * (1 - used))
    used_bytes = 900 - avail  # total - free, with free = avail + 100 reserved
    cap, free, av = "lustre_target_capacity_bytes", "lustre_target_free_bytes", "lustre_target_available_bytes"
    return PromtoolCase(
        series=(_held(cap, ok, 1000), _held(free, ok, 550), _held(av, ok, 450),
                _held(cap, bad, 1000), _held(free, bad, avail + 100), _held(av, bad, avail)),
        fires=Firing(labels=bad, value=used_bytes / (used_bytes + avail)),
    )


def _space_cleared(rule_for_s: int, every_s: int, ok: dict[str, str], bad: dict[str, str],
                   used: float) -> PromtoolCase:
    """The same target filling while the rule evaluates, then emptied (files deleted): silent again."""
    fill = _space_case(ok, bad, used)
    k = (max(rule_for_s, 600) + 2 * every_s) // every_s + 2  # full until just past the case's evaluation
    n = _samples(rule_for_s, every_s)
    empty = {"lustre_target_free_bytes": 550, "lustre_target_available_bytes": 450}
    series = tuple(
        replace(x, values=f"{x.values.split('x')[0]}x{k} {empty[x.metric]}x{n}")
        if x.labels == bad and x.metric in empty else replace(x, values=f"{x.values.split('x')[0]}x{k + n + 1}")
        for x in fill.series)
    return replace(fill, series=series, cleared_s=(k + 2) * every_s)


def _lustre_fill(m: Monitoring, every_s: int) -> list[AlertRule]:
    ok = {"target": "t-OST0000", "kind": "ost", **OK_HOST}
    full = {"target": "t-OST0001", "kind": "ost", **BAD_HOST}
    out: list[AlertRule] = []
    for sev, pct, used in _fill_levels(m):
        frac = round(pct / 100, 4)
        for_s = 300
        out.append(AlertRule(
            alert="LustreTargetSpaceFilling" if sev == "warning" else "LustreTargetSpaceFull", group="lustre",
            expr=f"{LUSTRE_SPACE_USED} > {frac}", for_s=for_s, severity=sev,
            summary="Lustre {{ $labels.target }} is {{ $value | humanizePercentage }} full",
            description=f"{{{{ $labels.target }}}} on {{{{ $labels.host }}}} has used more than {pct:g}% of the "
            "space clients may write (used / (used + available), as lfs df; monitoring.fill_*_percent).",
            tests=(_space_case(ok, full, used), _space_cleared(for_s, every_s, ok, full, used)),
        ))
        out.append(AlertRule(
            alert="LustreTargetInodesFilling" if sev == "warning" else "LustreTargetInodesFull", group="lustre",
            expr=f"1 - lustre_target_files_free / lustre_target_files > {frac}", for_s=300, severity=sev,
            summary="Lustre {{ $labels.target }} has used {{ $value | humanizePercentage }} of its inodes",
            description=f"{{{{ $labels.target }}}} on {{{{ $labels.host }}}} has used more than {pct:g}% of its "
            "inodes.",
            tests=(_fill_case("lustre_target_files", "lustre_target_files_free", ok, full, used),),
        ))
    return out


def _lustre_not_healthy() -> AlertRule:
    return AlertRule(
        alert="LustreServerNotHealthy", group="lustre", expr="lustre_health_healthy == 0", for_s=60,
        severity="critical", summary="Lustre on {{ $labels.host }} reports NOT HEALTHY",
        description="/sys/fs/lustre/health_check on {{ $labels.host }} is not 'healthy' (a target or the OSD "
        "failed).",
        tests=(PromtoolCase(
            series=(_held("lustre_health_healthy", dict(OK_HOST), 1),
                    _held("lustre_health_healthy", dict(BAD_HOST), 0)),
            fires=Firing(labels=dict(BAD_HOST), value=0),
        ),),
    )


def _lustre_recovering() -> AlertRule:
    done = {"target": "t-OST0000", "status": "COMPLETE", **OK_HOST}
    stuck = {"target": "t-OST0001", "status": "RECOVERING", **BAD_HOST}
    return AlertRule(
        alert="LustreTargetRecovering", group="lustre",
        expr='lustre_target_recovery_status{status!="COMPLETE"} == 1', for_s=900, severity="warning",
        summary="Lustre {{ $labels.target }} has been in recovery for 15 minutes",
        description="recovery_status of {{ $labels.target }} is {{ $labels.status }}: clients are not "
        "reconnecting.",
        tests=(PromtoolCase(
            series=(_held("lustre_target_recovery_status", done, 1), _held("lustre_target_recovery_status", stuck, 1)),
            fires=Firing(labels=stuck, value=1),
        ),),
    )


def _placement_cases(placed: list[LustreTarget], every_s: int) -> tuple[PromtoolCase, ...]:
    """One set of cases for every placement rule: each target on its planned server is silent; the first moved to
    another host, it alone fires, and is silent again once back; its server's Lustre exporter down (a restart),
    no placement alert fires (ExporterDown does)."""
    at = [{"target": t.name, "host": t.host} for t in placed]
    servers = sorted({t.host for t in placed})
    up = tuple(_held("up", {"job": "lustre", "host": h, "instance": f"{h}:1"}, 1) for h in servers)
    home = tuple(_held("lustre_target_info", {**w, "instance": f"{w['host']}:1"}, 1) for w in at)
    moved = _held("lustre_target_info", {**at[0], "host": "elsewhere", "instance": "elsewhere:1"}, 1)
    k = (600 + 2 * every_s) // every_s + 2  # moved until just past the case's evaluation, then home again
    back = replace(home[0], values=f"_x{k} 1x{SAMPLES}")
    gone = replace(moved, values=f"1x{k} _x{SAMPLES}")
    restart = tuple(replace(u, values="0x200") if u.labels["host"] == at[0]["host"] else u for u in up)
    return (
        PromtoolCase(series=(*up, *home), kind="alert"),
        PromtoolCase(series=(*up, moved, *home[1:]), fires=Firing(labels=at[0], value=1), kind="alert"),
        PromtoolCase(series=(*up, gone, back, *home[1:]), fires=Firing(labels=at[0], value=1), kind="alert",
                     cleared_s=(k + 2) * every_s),
        PromtoolCase(series=(*restart, *home[1:]), kind="alert"),
    )


def _lustre_target_not_on_planned_server(targets: tuple[LustreTarget, ...], every_s: int) -> list[AlertRule]:
    """One rule per MDT and OST; the first carries the cases of all of them (_placement_cases). A rule fires only
    while its planned server's Lustre exporter is up: one exporter restart is ExporterDown, not one critical per
    target on top of it."""
    placed = [t for t in targets if t.kind != "mgt"]
    out: list[AlertRule] = []
    for i, t in enumerate(placed):
        out.append(AlertRule(
            alert="LustreTargetNotOnPlannedServer", group="lustre",
            expr=f'absent(lustre_target_info{{target="{t.name}",host="{t.host}"}}) '
                 f'and on(host) up{{job="lustre",host="{t.host}"}} == 1', for_s=120, severity="critical",
            summary=f"{t.name} is not mounted on its planned server {t.host}",
            description=f"The plan places {t.name} on {t.host}"
            + (f" (failover partner {t.failover_host})" if t.failover_host else "")
            + "; its exporter there is up and does not report it mounted (stopped, or failed over).",
            labels={"target": t.name, "planned_host": t.host},
            tests=_placement_cases(placed, every_s) if i == 0 else (),
        ))
    return out


def _lnet_network_interface_down() -> AlertRule:
    up = {"net": "o2ib0", "nid": "10.0.0.1@o2ib", **OK_HOST}
    down = {"net": "o2ib0", "nid": "10.0.0.2@o2ib", **BAD_HOST}
    loopback = {"net": "lo", "nid": "0@lo", **OK_HOST}
    return AlertRule(
        alert="LnetNetworkInterfaceDown", group="lustre", expr='lustre_lnet_ni_up{net!="lo"} == 0', for_s=120,
        severity="critical", summary="LNet NI {{ $labels.nid }} on {{ $labels.host }} is down",
        description="lnetctl net show reports status down for {{ $labels.nid }}: the host lost a storage rail.",
        tests=(PromtoolCase(
            series=(_held("lustre_lnet_ni_up", up, 1), _held("lustre_lnet_ni_up", down, 0),
                    _held("lustre_lnet_ni_up", loopback, 0)),
            fires=Firing(labels=down, value=0),
        ),),
    )


def _lustre_rules(spec: ClusterSpec, targets: tuple[LustreTarget, ...]) -> list[AlertRule]:
    every_s = spec.monitoring.scrape_interval_s
    return [
        *_lustre_fill(spec.monitoring, every_s),
        _lustre_not_healthy(),
        _lustre_recovering(),
        *_lustre_target_not_on_planned_server(targets, every_s),
        _lnet_network_interface_down(),
    ]


def _rdma_port_rules(cls: dict[str, str], rate: float, devices: list[str]) -> list[AlertRule]:
    """RdmaPortNotActive and RdmaPortBelowPlannedRate for one host class (role, pool) and planned link rate."""
    sel = ",".join(f'{k}="{v}"' for k, v in cls.items()) + f',device=~"{_regex(devices)}"'
    bytes_s = int(rate * 1e9 / 8)
    planned = {"planned_Gbps": f"{rate:g}", "host_class": "/".join(cls.values())}
    port = {**cls, "device": sorted(set(devices))[0], "port": "1"}
    ok, bad = {**port, **OK_HOST}, {**port, **BAD_HOST}
    state, speed = "node_infiniband_state_id", "node_infiniband_rate_bytes_per_second"
    return [
        AlertRule(
            alert="RdmaPortNotActive", group="fabric", expr=f"{state}{{{sel}}} != {IB_STATE_ACTIVE}", for_s=120,
            severity="critical",
            summary="RDMA port {{ $labels.device }}/{{ $labels.port }} on {{ $labels.host }} is not ACTIVE",
            description="The port's state is not 4 (ACTIVE): the link is down or still training.",
            labels=dict(planned),
            tests=(PromtoolCase(series=(_held(state, ok, IB_STATE_ACTIVE), _held(state, bad, 1)),  # 1: DOWN
                                fires=Firing(labels=bad, value=1)),),
        ),
        AlertRule(
            alert="RdmaPortBelowPlannedRate", group="fabric", expr=f"{speed}{{{sel}}} < {bytes_s}", for_s=120,
            severity="warning",
            summary="RDMA port {{ $labels.device }} on {{ $labels.host }} runs below its planned rate",
            description=f"The plan expects {rate:g} Gb/s ({bytes_s} bytes/s); the port reports {{{{ $value }}}} "
            "bytes/s (a cable, transceiver or switch port negotiated down).",
            labels=dict(planned),
            tests=(PromtoolCase(series=(_held(speed, ok, bytes_s), _held(speed, bad, bytes_s // 2)),
                                fires=Firing(labels=bad, value=bytes_s // 2)),),
        ),
    ]


def _rdma_port_errors_rising(every_s: int) -> AlertRule:
    errors = " or ".join(
        f"increase(node_infiniband_{c}[10m]) > 0"
        for c in ("symbol_error_total", "link_downed_total", "port_errors_received_total",
                  "link_error_recovery_total")
    )
    port = {"device": "mlx5_0", "port": "1"}
    symbols = "node_infiniband_symbol_error_total"
    return AlertRule(
        alert="RdmaPortErrorsRising", group="fabric", expr=errors, for_s=0, severity="warning",
        summary="RDMA port {{ $labels.device }} on {{ $labels.host }} counts new errors",
        description="Symbol errors, link-downed events, receive errors or link recoveries rose in the last 10 "
        "minutes.",
        tests=(PromtoolCase(
            series=(_held(symbols, {**port, **OK_HOST}, 5),
                    Series(metric=symbols, labels={**port, **BAD_HOST}, values=f"0+1x{SAMPLES}")),
            fires=Firing(labels={**port, **BAD_HOST}, value=_increase_10m(every_s)),
        ),),
    )


def _fabric_rules(hosts: tuple[Host, ...], every_s: int) -> list[AlertRule]:
    # one rule per (host class, planned link rate): hosts of a pool (or a server role) share their NICs,
    # and every scrape target carries the role and pool labels (_scrape_targets)
    by_class: dict[tuple[str, str | None, float], dict[str, None]] = {}  # devices in order, once each
    for h in hosts:
        host_role, host_pool = h.role, h.pool
        for n in h.nics:
            if n.device:
                by_class.setdefault((host_role, host_pool, n.link_Gbps), {})[n.device] = None
    by_rate: dict[tuple[str, float], list[str]] = {}
    classes: dict[str, dict[str, str]] = {}
    for (role, pool, rate), devices in by_class.items():
        labels: dict[str, str] = {"role": role, **({"pool": pool} if pool else {})}
        cls = ",".join(f'{k}="{v}"' for k, v in labels.items())
        classes[cls] = labels
        by_rate[(cls, rate)] = list(devices)
    out: list[AlertRule] = []
    for (cls, rate), ds in sorted(by_rate.items()):
        out += _rdma_port_rules(classes[cls], rate, ds)
    if by_rate:
        out.append(_rdma_port_errors_rising(every_s))
    return out


def _gpu_case(metric: str, ok_value: int, bad_value: int) -> PromtoolCase:
    bad = {"gpu": "0", "Hostname": "bad-host", **BAD_HOST}
    ok = {"gpu": "0", "Hostname": "ok-host", **OK_HOST}
    return PromtoolCase(series=(_held(metric, ok, ok_value), _held(metric, bad, bad_value)),
                        fires=Firing(labels=bad, value=bad_value))


#: XIDs that never alert nor drain: those whose possible causes in NVIDIA's Xid listing include a user application
#: error, and those it lists with no cause or that its catalog calls informational (154). The same sets as
#: kiln/node/health.py's XID_APPLICATION | XID_INFORMATIONAL (that file runs alone on the nodes; a test pins them).
XID_NOT_HARDWARE = frozenset({8, 13, 24, 25, 31, 43, 45, 66, 67, 68, 93, 106, 107, 109, 137,
                              5, 10, 14, 15, 17, 23, 39, 40, 41, 49, 50, 51, 52, 53, 54, 55, 61, 87, 90, 91, 108,
                              126, 127, 128, 129, 130, 131, 132, 134, 135, 136, 138, 139, 141, 142, 154})
#: How long GpuXidError fires after a hardware XID first appears on a GPU.
XID_WINDOW_S = 3600


def _gpu_xid_error(every_s: int) -> AlertRule:
    """dcgm-exporter's DCGM_FI_DEV_XID_ERRORS (DCGM field 230) is a gauge holding the last XID, labelled err_code
    (dcgm-exporter 3.3.9-3.6.1 pkg/dcgmexporter/gpu_collector.go): a new XID is a new series. increase() would read
    the jump 0 → 79 as 79 errors and a later 13 as a counter reset, so the rule fires while a hardware XID's series
    is new, for XID_WINDOW_S, and ignores the application's and informational XIDs."""
    codes = "|".join(str(x) for x in sorted(XID_NOT_HARDWARE | {0}))
    metric = "DCGM_FI_DEV_XID_ERRORS"
    base = {"gpu": "0"}
    bad = {**base, "Hostname": "bad-host", **BAD_HOST, "err_code": "79"}
    app = {**base, "Hostname": "ok-host", **OK_HOST, "err_code": "13"}
    n = _samples(XID_WINDOW_S, every_s)
    first = 2  # err_code 0 for two samples, then the XID (a sample later: '_xN' is N + 1 missing samples)
    series = (Series(metric=metric, labels={**bad, "err_code": "0"}, values=f"0x{first - 1}"),
              Series(metric=metric, labels=bad, values=f"_x{first} 79x{n}"),
              Series(metric=metric, labels={**app, "err_code": "0"}, values=f"0x{first - 1}"),
              Series(metric=metric, labels=app, values=f"_x{first} 13x{n}"))
    return AlertRule(
        alert="GpuXidError", group="gpu",
        expr=f'{metric}{{err_code!~"{codes}"}} unless on(Hostname, gpu, err_code) {metric} offset {XID_WINDOW_S}s',
        for_s=0, severity="critical",
        summary="GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported hardware or driver XID {{ $value }}",
        description="dcgm-exporter reports an XID that NVIDIA's Xid listing does not attribute to the application "
        f"(DCGM_FI_DEV_XID_ERRORS, err_code {{{{ $labels.err_code }}}}); the alert holds for {XID_WINDOW_S // 60} "
        "minutes after it first appears. kiln-health's health.xid drains the node.",
        tests=(PromtoolCase(series=series, fires=Firing(labels=bad, value=79),
                            cleared_s=(first + 2) * every_s + XID_WINDOW_S),),
    )


def _gpu_memory_error(every_s: int) -> AlertRule:
    """Pending row remaps (DCGM field 396, DCGM_FI_DEV_ROW_REMAP_PENDING: a reset is needed) and remap failures
    (395, DCGM_FI_DEV_ROW_REMAP_FAILURE) are the signal; a remapped row (393) is the repair and never alerts."""
    pending, failed = "DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_ROW_REMAP_FAILURE"
    remapped = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
    bad = {"gpu": "0", "Hostname": "bad-host", **BAD_HOST}
    ok = {"gpu": "0", "Hostname": "ok-host", **OK_HOST}
    k = (600 + 2 * every_s) // every_s + 2  # pending until just past the evaluation, then reset and remapped
    healthy_after_repair = (_held(remapped, ok, 1), _held(pending, ok, 0), _held(failed, ok, 0))
    return AlertRule(
        alert="GpuUncorrectableMemoryError", group="gpu", expr=f"{pending} > 0 or {failed} > 0", for_s=0,
        severity="critical",
        summary="GPU {{ $labels.gpu }} on {{ $labels.Hostname }} has a pending or failed row remap",
        description="An uncorrectable memory error left a row remap pending (the GPU must be reset to apply it), or "
        "remapping failed (the GPU is out of spare rows: replace it). Rows already remapped are the repair and do "
        "not alert.",
        tests=(
            PromtoolCase(series=(*healthy_after_repair, Series(metric=pending, labels=bad, values=f"1x{k} 0x{SAMPLES}"),
                                 Series(metric=remapped, labels=bad, values=f"0x{k} 1x{SAMPLES}"),
                                 _held(failed, bad, 0)),
                         fires=Firing(labels=bad, value=1), cleared_s=(k + 2) * every_s),
            PromtoolCase(series=(*healthy_after_repair, _held(pending, bad, 0), _held(failed, bad, 1)),
                         fires=Firing(labels=bad, value=1)),
        ),
    )


def _gpu_rules(spec: ClusterSpec) -> list[AlertRule]:
    t = spec.monitoring.gpu_temp_max_C
    every_s = spec.monitoring.scrape_interval_s
    return [
        _gpu_xid_error(every_s),
        _gpu_memory_error(every_s),
        AlertRule(alert="GpuTooHot", group="gpu", expr=f"DCGM_FI_DEV_GPU_TEMP > {t}", for_s=300, severity="warning",
                  summary="GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is at {{ $value }} °C",
                  description=f"Above monitoring.gpu_temp_max_C ({t} °C) for 5 minutes: the GPU throttles.",
                  tests=(_gpu_case("DCGM_FI_DEV_GPU_TEMP", t - 20, t + 5),)),
    ]


def _exporter_down(every_s: int) -> AlertRule:
    bad = {"job": "node", **BAD_HOST}
    fires = PromtoolCase(series=(_held("up", {"job": "node", **OK_HOST}, 1), _held("up", bad, 0)),
                         fires=Firing(labels=bad, value=0))
    return AlertRule(
        alert="ExporterDown", group="exporters", expr="up == 0", for_s=2 * every_s, severity="critical",
        summary="{{ $labels.job }} exporter on {{ $labels.host }} is down",
        description="Prometheus could not scrape {{ $labels.instance }} (up == 0 for the rule's for:, two scrape "
        "intervals unless monitoring.alert_for_max_s caps it).",
        tests=(fires, _onset(fires)),
        fault=Fault(name="exporter_down", on="last", labels={"job": "node"},
                    how=Commands(inject="systemctl stop prometheus-node-exporter",
                                 repair="systemctl start prometheus-node-exporter")),
    )


def _sysctl_fault(t: Tunable) -> Fault | None:
    """Another value written into a single-valued sysctl that a host's network namespace owns (the lab's
    containers may set only those); the planned value written back repairs it."""
    value = str(t.value)
    if not (is_namespaced_sysctl(t.id) and value.isdigit()):
        return None
    wrong = int(value) - 1 if int(value) > 0 else 1
    return Fault(name="sysctl_drift", on="first", labels={"sysctl": t.param}, how=Commands(
        inject=f"sysctl -q -w {shlex.quote(f'{t.param}={wrong}')}",
        repair=f"sysctl -q -w {shlex.quote(f'{t.param}={value}')}",
        note=f"{t.param}: planned {value}, set to {wrong}",
    ))


def _sysctl_drift(t: Tunable, every_s: int) -> list[AlertRule]:
    """One rule per planned sysctl, or per field of a multi-value one."""
    values = str(t.value).split()
    keys: tuple[str | None, ...] = (None,) if len(values) == 1 else SYSCTL_KEYS[: len(values)]
    out: list[AlertRule] = []
    for key, value in zip(keys, values, strict=True):
        shown = f"{t.param}[{key}]" if key else t.param
        metric = sysctl_metric(t.param, key)
        fires = PromtoolCase(
            series=(_held(metric, dict(OK_HOST), value), _held(metric, dict(BAD_HOST), int(value) + 1)),
            fires=Firing(labels=dict(BAD_HOST), value=int(value) + 1),
        )
        out.append(AlertRule(
            alert="SysctlDrift", group="host", expr=f"{metric} != {value}", for_s=2 * every_s, severity="warning",
            summary=f"{shown} on {{{{ $labels.host }}}} differs from the plan",
            description=f"The plan sets {shown} = {value} ({t.id}); the host reports {{{{ $value }}}}.",
            labels={"sysctl": shown, "planned": value},
            tests=(fires, _onset(fires)),
            fault=_sysctl_fault(t) if key is None else None,
        ))
    return out


def _host_rules(sysctls: list[Tunable], every_s: int) -> list[AlertRule]:
    return [_exporter_down(every_s), *(r for t in sysctls for r in _sysctl_drift(t, every_s))]


def _disk_fault(m: Monitoring) -> Fault | None:
    """A file that fills monitoring.fault_filesystem half-way between the warn and critical levels (at most
    99 %)."""
    if not m.fault_filesystem:
        return None
    fraction = (m.fill_warn_percent + min(m.fill_critical_percent, 99.0)) / 200
    return Fault(name="disk_fill", on="first", labels={"mountpoint": m.fault_filesystem},
                 how=FilesystemFill(mountpoint=m.fault_filesystem, fraction=fraction))


def _filesystem_rules(spec: ClusterSpec) -> list[AlertRule]:
    """Space used on the planned mount points (node_exporter collector/filesystem_linux.go:
    node_filesystem_avail_bytes, node_filesystem_size_bytes, labelled by mountpoint)."""
    m = spec.monitoring
    mounts = fill_mounts(m.filesystems, m.fault_filesystem)
    if not mounts:
        return []
    sel = mountpoint_selector(mounts)
    ok, full = {"mountpoint": mounts[0], **OK_HOST}, {"mountpoint": mounts[0], **BAD_HOST}
    out = []
    for sev, pct, used in _fill_levels(m):
        case = _fill_case("node_filesystem_size_bytes", "node_filesystem_avail_bytes", ok, full, used)
        warn = sev == "warning"
        out.append(AlertRule(
            alert="HostFilesystemFilling" if warn else "HostFilesystemFull", group="host",
            expr=f"1 - node_filesystem_avail_bytes{sel} / node_filesystem_size_bytes{sel} > {round(pct / 100, 4)}",
            for_s=300, severity=sev,
            summary="{{ $labels.mountpoint }} on {{ $labels.host }} is {{ $value | humanizePercentage }} full",
            description=f"{{{{ $labels.mountpoint }}}} on {{{{ $labels.host }}}} has used more than {pct:g}% of "
            "its space (monitoring.filesystems, monitoring.fill_*_percent).",
            tests=(case, _onset(case)) if warn else (case,),
            fault=_disk_fault(m) if warn else None,
        ))
    return out


def _objectstore_rules(os_: ObjectStorePlan) -> list[AlertRule]:
    if os_.backend != "seaweedfs":
        return []
    volume, master = {"job": "seaweedfs-volume"}, {"job": "seaweedfs-master"}
    fires = PromtoolCase(
        series=(_held("up", {**volume, **OK_HOST}, 1), _held("up", {**volume, **BAD_HOST}, 0),
                _held("up", {**master, **BAD_HOST}, 0)),
        fires=Firing(labels={**volume, **BAD_HOST}, value=0),
    )
    return [AlertRule(
        alert="ObjectStoreVolumeServerDown", group="objectstore", expr='up{job="seaweedfs-volume"} == 0', for_s=60,
        severity="critical", summary="SeaweedFS volume server on {{ $labels.host }} is down",
        description="Its volumes are unreadable"
        + (" (replication 000 keeps one copy)" if os_.replication == "000" else "")
        + "; writes to its collections fail once the others are full.",
        tests=(fires, _onset(fires)),
        fault=Fault(name="objectstore_volume_down", on="objectstore",
                    how=Commands(inject="systemctl stop seaweedfs-volume", repair="systemctl start seaweedfs-volume")),
    )]


#: The data mover's checkpoint export lag (kiln/dataflow/progress.py families: the textfile on bare metal, the
#: `kiln data run --metrics-port` endpoint on Kubernetes; both carry the labels link and direction).
EXPORT_LAG = 'kiln_dataflow_lag_s{direction="checkpoint"}'


def _checkpoint_export_lagging(spec: ClusterSpec) -> AlertRule:
    budget = int(spec.workload.checkpoint.interval_min * 60)
    lag = {"link": "checkpoints", "direction": "checkpoint"}
    late = {**lag, **BAD_HOST}
    return AlertRule(
        alert="CheckpointExportLagging", group="datamover", expr=f"{EXPORT_LAG} > {budget}", for_s=0,
        severity="warning", summary="Checkpoint export to the object store lags {{ $value }} s",
        description=f"The export of checkpoints to the object store is behind by more than one checkpoint interval "
        f"({budget} s, workload.checkpoint.interval_min): a lost Lustre would lose more than one checkpoint.",
        labels={"budget_s": str(budget)},
        tests=(PromtoolCase(
            series=(_held("kiln_dataflow_lag_s", {**lag, **OK_HOST}, budget),
                    _held("kiln_dataflow_lag_s", late, budget + 60),
                    _held("kiln_dataflow_lag_s", {**late, "direction": "export"}, budget + 60)),
            fires=Firing(labels=late, value=budget + 60),
        ),),
    )


#: How long every pass of a link and direction may fail before DataMoverFailing fires.
MOVER_FAILING_S = 3600
#: A chain of its own the mover fault adds on the mover host and deletes again (nftables).
FAULT_NFT_TABLE = "kiln_fault"


def _mover_fault(spec: ClusterSpec, lake_port: int) -> Fault | None:
    """The mover's lake access refused on the mover host (an nftables table of its own rejects TCP to the S3 port),
    and one pass of the first link run through its stage unit, which must fail; repaired by deleting the table and
    running the pass again, which must succeed. None without a link."""
    df = spec.dataflow
    if df is None or not df.links:
        return None
    link = df.links[0].name
    unit = shlex.quote(f"kiln-datamover-stage@{link}")
    table = f"inet {FAULT_NFT_TABLE}"
    return Fault(name="mover_failing", on="mover", labels={"link": link, "direction": "import"}, how=Commands(
        inject=f"nft add table {table} && nft add chain {table} out '{{ type filter hook output priority 0; }}' && "
               f"nft add rule {table} out tcp dport {lake_port} reject with tcp reset && ! systemctl restart {unit}",
        repair=f"nft delete table {table}; systemctl restart {unit}",
        note=f"link {link}: TCP to the lake's port {lake_port} rejected on the mover host; one stage pass run",
    ))


def _mover_failing(spec: ClusterSpec, lake_port: int, every_s: int) -> AlertRule:
    """Every pass of a link and direction has failed for MOVER_FAILING_S: a failed status was seen within the
    window (kiln_dataflow_up 0; the pass in progress between two failed ones reports 1) and the latest status is not
    a success (kiln_dataflow_last_success is set only by a pass that verified everything; kiln/dataflow/progress.py
    families). One verified pass clears it at once."""
    w = f"{MOVER_FAILING_S}s"
    link = {"link": "corpus", "direction": "import"}
    ok, bad = {**link, **OK_HOST}, {**link, **BAD_HOST}
    n = _samples(MOVER_FAILING_S, every_s)
    k = (MOVER_FAILING_S + 600 + 2 * every_s) // every_s  # failing until just past the evaluation, then a success
    fires = PromtoolCase(
        series=(_held("kiln_dataflow_up", ok, 1, n), _held("kiln_dataflow_last_success", ok, 1.7e9, n),
                _held("kiln_dataflow_up", bad, 0, n), _held("kiln_dataflow_last_success", bad, 0, n)),
        fires=Firing(labels=bad, value=0),
    )
    # retries: failed, then a pass in progress (up 1, no success yet) every fourth sample; then one verified pass
    retrying = PromtoolCase(
        series=(Series(metric="kiln_dataflow_up", labels=bad, values=" ".join(["0 0 0 1"] * (k // 4 + 1))
                       + f" 1x{n}"),
                Series(metric="kiln_dataflow_last_success", labels=bad,
                       values=f"0x{(k // 4 + 1) * 4 - 1} 1.7e9x{n}")),
        fires=Firing(labels=bad, value=0), cleared_s=((k // 4 + 1) * 4 + 2) * every_s,
    )
    return AlertRule(
        alert="DataMoverFailing", group="datamover",
        expr=f"min_over_time(kiln_dataflow_up[{w}]) == 0 unless kiln_dataflow_last_success > 0",
        for_s=MOVER_FAILING_S, severity="critical",
        summary="Data mover: every {{ $labels.direction }} pass of link {{ $labels.link }} on {{ $labels.host }} "
        "fails",
        description="No pass of this link and direction has succeeded for an hour and passes keep failing (lake "
        "unreachable or refusing, credentials, the fast tier): data is not moving. `kiln data status` on the host "
        "shows the error.",
        labels={"failing_for_s": str(MOVER_FAILING_S)},
        tests=(fires, retrying, _onset(fires)),
        fault=_mover_fault(spec, lake_port),
    )


def _datamover_rules(spec: ClusterSpec, lake_port: int) -> list[AlertRule]:
    every_s = spec.monitoring.scrape_interval_s
    rules = [_checkpoint_export_lagging(spec)]
    if spec.dataflow is not None:
        rules.append(_mover_failing(spec, lake_port, every_s))
    return rules


# --- the token stream (pipeline.kafka, Strimzi) ----------------------------------------------------------
#
# Broker metrics are the JMX exporter's names under the rules kiln/render/manifests/kafka.py gives it (Strimzi's
# generic gauge rules, packaging/examples/metrics/kafka-metrics.yaml; the same names as Strimzi's
# prometheus-install/prometheus-rules/prometheus-kafka-rules.yaml): one series per Kafka pod, labelled namespace
# and pod by the ServiceMonitor. The stream's gauges are kiln.stream.TokenConsumer's, labelled topic and rank
# (partition for the checkpoint offsets).

KAFKA_RUNBOOK = "docs/runbooks/kafka-broker-down.md"
LAG_RUNBOOK = "docs/runbooks/kafka-lag.md"
RETENTION_RUNBOOK = "docs/runbooks/kafka-retention.md"
#: The window over which a rank's lag must rise, and how long it must keep rising, before KafkaConsumerLagGrowing.
LAG_WINDOW_S = 1800


def _kafka_case(metric: str, ok: dict[str, str], bad: dict[str, str], values: tuple[float, float], *, every_s: int,
                fires: dict[str, str] | None = None) -> tuple[PromtoolCase, PromtoolCase]:
    """A healthy series and a faulty one (firing with `fires`, the faulty series' labels unless given), and the same
    fault repaired to the healthy value just past the evaluation (silent again)."""
    good, wrong = values
    case = PromtoolCase(series=(_held(metric, ok, good), _held(metric, bad, wrong)),
                        fires=Firing(labels=bad if fires is None else fires, value=wrong))
    k = (600 + 2 * every_s) // every_s + 2
    repaired = Series(metric=metric, labels=bad, values=f"{wrong}x{k} {good}x{SAMPLES}")
    return case, replace(case, series=(case.series[0], repaired), cleared_s=(k + 2) * every_s)


@dataclass(frozen=True, slots=True)
class _KafkaScope:
    """Where the brokers' series come from: Strimzi pods (labelled namespace and pod by the ServiceMonitor) or
    bare-metal nodes (scrape job kafka, labelled host)."""

    labels: dict[str, str]  # the cluster's own labels: {namespace: kafka} or {job: kafka}
    member: str  # the label naming one broker or controller: pod or host

    @property
    def selector(self) -> str:
        return "{" + ",".join(f'{k}="{v}"' for k, v in self.labels.items()) + "}"

    @property
    def by(self) -> str:
        return ", ".join(self.labels)

    def node(self, name: str, *, healthy: bool = True) -> dict[str, str]:
        """A broker's labels in a test case: on bare metal the member is the host itself (ok-host or bad-host)."""
        host = OK_HOST if healthy else BAD_HOST
        return {**self.labels, **host} if self.member == "host" else {**self.labels, **host, self.member: name}


def _kafka_partitions(sc: _KafkaScope, every_s: int) -> list[AlertRule]:
    sel = sc.selector
    pod = sc.member == "pod"
    ok = sc.node(f"{CLUSTER}-{BROKER_POOL}-3" if pod else "kafka-03")
    bad = sc.node(f"{CLUSTER}-{BROKER_POOL}-4" if pod else "kafka-04", healthy=False)
    isr, offline = "kafka_server_replicamanager_underminisrpartitioncount", "kafka_controller_kafkacontroller_" \
        "offlinepartitionscount"
    return [
        AlertRule(
            alert="KafkaUnderMinIsrPartitions", group="kafka", expr=f"{isr}{sel} > 0", for_s=120,
            severity="critical",
            summary=f"{{{{ $value }}}} partitions led by {{{{ $labels.{sc.member} }}}} are under their min ISR",
            description="Fewer replicas than min.insync.replicas are in sync: acks=all producers get "
            "NotEnoughReplicas and the token stream stops growing (a broker is down or cannot keep up).",
            runbook_doc=KAFKA_RUNBOOK, tests=_kafka_case(isr, ok, bad, (0, 4), every_s=every_s),
        ),
        AlertRule(
            alert="KafkaOfflinePartitions", group="kafka", expr=f"sum by ({sc.by}) ({offline}{sel}) > 0",
            for_s=60, severity="critical", summary="{{ $value }} token stream partitions have no leader",
            description="The active controller counts partitions without a leader (every replica's broker down; "
            "unclean election is off): ranks reading them stop in next_batch().",
            runbook_doc=KAFKA_RUNBOOK, tests=_kafka_case(offline, ok, bad, (0, 2), every_s=every_s,
                                                                 fires=dict(sc.labels)),
        ),
        _kafka_controller(sc, every_s),
    ]


def _kafka_controller(sc: _KafkaScope, every_s: int) -> AlertRule:
    """The sum of ActiveControllerCount over the quorum is not 1: none (no metadata changes, no leader elections)
    or two (a split brain). No series at all counts as none."""
    metric = "kafka_controller_kafkacontroller_activecontrollercount"
    sel = f"{metric}{sc.selector}"
    c = dict(sc.labels)
    pods = ([sc.node(f"{CLUSTER}-controllers-{i}") for i in range(3)] if sc.member == "pod" else
            [{**c, "host": f"kraft-0{i}", "instance": f"kraft-0{i}:9404"} for i in range(1, 4)])

    def quorum(*active: int) -> tuple[Series, ...]:
        return tuple(_held(metric, p, a) for p, a in zip(pods, active, strict=True))

    k = (600 + 2 * every_s) // every_s + 2  # none active until just past the evaluation, then one elected
    elected = Series(metric=metric, labels=pods[0], values=f"0x{k} 1x{SAMPLES}")
    return AlertRule(
        alert="KafkaNoActiveController", group="kafka",
        expr=f"sum by ({sc.by}) ({sel}) != 1 or (absent({sel}) - 1)", for_s=60, severity="critical",
        summary="The token stream's KRaft quorum has {{ $value }} active controllers",
        description="ActiveControllerCount summed over the controllers is not 1: with none, no partition gets a "
        "new leader and no topic changes; with two, the quorum is split.",
        runbook_doc=KAFKA_RUNBOOK,
        tests=(PromtoolCase(series=quorum(1, 0, 0)),
               PromtoolCase(series=quorum(1, 1, 0), fires=Firing(labels=c, value=2)),
               PromtoolCase(series=(elected, *quorum(0, 0, 0)[1:]), fires=Firing(labels=c, value=0),
                            cleared_s=(k + 2) * every_s),
               PromtoolCase(series=(_held("up", {"job": "node", **OK_HOST}, 1),), fires=Firing(labels=c, value=0))),
    )


def _kafka_disk(m: Monitoring, ns: str) -> list[AlertRule]:
    """The brokers' log volumes (kubelet's volume stats; Strimzi names a node pool's JBOD claims
    data-<volume id>-<cluster>-<pool>-<node id>) at the kit's fill levels (monitoring.fill_*_percent)."""
    claims = f"data-[0-9]+-{CLUSTER}-{BROKER_POOL}-[0-9]+"
    sel = f'{{namespace="{ns}",persistentvolumeclaim=~"{claims}"}}'
    size, avail = "kubelet_volume_stats_capacity_bytes", "kubelet_volume_stats_available_bytes"
    ok = {"namespace": ns, "persistentvolumeclaim": f"data-0-{CLUSTER}-{BROKER_POOL}-3"}
    bad = {**ok, "persistentvolumeclaim": f"data-0-{CLUSTER}-{BROKER_POOL}-4"}
    out = []
    for sev, pct, used in _fill_levels(m):
        case = _fill_case(size, avail, ok, bad, used)
        ignored = _held(avail, {**bad, "persistentvolumeclaim": f"data-0-{CLUSTER}-controllers-0"}, 1)
        out.append(AlertRule(
            alert="KafkaBrokerDiskFilling" if sev == "warning" else "KafkaBrokerDiskFull", group="kafka",
            expr=f"1 - {avail}{sel} / {size}{sel} > {round(pct / 100, 4)}", for_s=300, severity=sev,
            summary="Kafka volume {{ $labels.persistentvolumeclaim }} is {{ $value | humanizePercentage }} full",
            description=f"A broker's log volume has used more than {pct:g}% of its space (monitoring.fill_*_percent;"
            " the plan retains at most kiln/knowledge/kafka.yaml broker_disk_fill of it): a full volume takes the "
            "broker's partitions offline.",
            runbook_doc=KAFKA_RUNBOOK,
            tests=(replace(case, series=(*case.series, ignored)), PromtoolCase(series=case.series[:2])),
        ))
    return out


def _kafka_logs_size(m: Monitoring, k: KafkaPlan) -> list[AlertRule]:
    """Bare metal: a node's partition logs (the sum of its replicas' kafka.log Log Size, JMX exporter name
    kafka_log_log_size) against the storage the plan gives each broker (pipeline.kafka.storage_GB_per_broker), at
    the kit's fill levels. The data directory shares a host filesystem, whose own fill node_exporter alerts on
    where monitoring.filesystems lists it."""
    size, planned = "kafka_log_log_size", k.storage_GB_per_broker * 1e9
    part = {"job": "kafka", "topic": k.topics[0].name}
    out = []
    for sev, pct, used in _fill_levels(m):
        over = round(planned * used)
        out.append(AlertRule(
            alert="KafkaBrokerLogsFilling" if sev == "warning" else "KafkaBrokerLogsFull", group="kafka",
            expr=f'sum by (host) ({size}{{job="kafka"}}) / {planned:.0f} > {round(pct / 100, 4)}', for_s=300,
            severity=sev,
            summary="Kafka on {{ $labels.host }} holds {{ $value | humanizePercentage }} of its planned storage",
            description=f"The node's partition logs exceed {pct:g}% of pipeline.kafka.storage_GB_per_broker "
            f"({k.storage_GB_per_broker:g} GB; monitoring.fill_*_percent; the plan retains at most "
            "kiln/knowledge/kafka.yaml broker_disk_fill of it): retention is not keeping up or the stream outgrew "
            "the plan, and a full data directory takes the node's partitions offline.",
            runbook_doc=KAFKA_RUNBOOK,
            tests=(PromtoolCase(series=(
                _held(size, {**part, "partition": "0", **OK_HOST}, round(planned * 0.1)),
                _held(size, {**part, "partition": "0", **BAD_HOST}, over // 2),
                _held(size, {**part, "partition": "1", **BAD_HOST}, over - over // 2)),
                fires=Firing(labels={"host": BAD_HOST["host"]}, value=over / planned)),
                PromtoolCase(series=(_held(size, {**part, "partition": "0", **OK_HOST}, round(planned * 0.1)),))),
        ))
    return out


def _kafka_stream(k: KafkaPlan, sc: _KafkaScope, every_s: int) -> list[AlertRule]:
    topics = f'{{topic=~"{_regex([t.name for t in k.topics])}"}}'
    rank = {"topic": k.topics[0].name, "rank": "0"}
    ok, bad = {**rank, **OK_HOST}, {**rank, "rank": "1", **BAD_HOST}
    lag, runway = "kiln_stream_lag_messages", "kiln_stream_runway_seconds"
    w, n = LAG_WINDOW_S, _samples(2 * LAG_WINDOW_S, every_s)
    rising = (LAG_WINDOW_S + 2 * every_s) // every_s + 2  # rising until just past the evaluation, then flat
    low = round(k.runway_min_s / 2, 3)
    return [
        AlertRule(
            alert="KafkaConsumerLagGrowing", group="kafka", expr=f"deriv({lag}{topics}[{w}s]) > 0", for_s=w,
            severity="warning", summary="Rank {{ $labels.rank }} of {{ $labels.topic }} falls further behind",
            description=f"The rank's lag (messages between its position and the partitions' ends) has kept rising "
            f"over {w // 60}-minute windows for {w // 60} minutes ({{{{ $value }}}} messages/s): the producer "
            "publishes faster than the rank trains, which only matters when its runway is low too or retention "
            "nears.",
            runbook_doc=LAG_RUNBOOK,
            tests=(PromtoolCase(series=(_held(lag, ok, 500, n), Series(metric=lag, labels=bad, values=f"0+10x{n}")),
                                fires=Firing(labels=bad, value=10 / every_s)),
                   PromtoolCase(series=(_held(lag, ok, 500, n), Series(
                       metric=lag, labels=bad, values=f"0+10x{rising} {10 * rising}x{n}")),
                       fires=Firing(labels=bad, value=10 / every_s), cleared_s=(rising + 2) * every_s + w)),
        ),
        AlertRule(
            alert="KafkaRunwayLow", group="kafka", expr=f"{runway}{topics} < {k.runway_min_s:g}", for_s=300,
            severity="warning",
            summary="Rank {{ $labels.rank }} of {{ $labels.topic }} has {{ $value }} s of tokens buffered",
            description=f"Below the plan's runway ({k.runway_min_s:g} s, kiln/knowledge/kafka.yaml runway_min_s: "
            "enough to outlast a broker failure): the rank waits on the stream at the next leader move.",
            labels={"runway_min_s": f"{k.runway_min_s:g}"}, runbook_doc=LAG_RUNBOOK,
            tests=_kafka_case(runway, ok, bad, (10 * k.runway_min_s, low), every_s=every_s),
        ),
        _kafka_retention(k, sc, every_s),
    ]


def _kafka_retention(k: KafkaPlan, sc: _KafkaScope, every_s: int) -> AlertRule:
    """The topic no longer holds the oldest message a kept checkpoint resumes from: a partition's log start offset
    (the highest of its replicas') is past the lowest offset of that partition in any kept checkpoint
    (TokenConsumer.report_checkpoints)."""
    start, kept = "kafka_log_log_logstartoffset", "kiln_stream_checkpoint_offset"
    topics = f'topic=~"{_regex([t.name for t in k.topics])}"'
    part = {"topic": k.topics[0].name, "partition": "7"}
    ok = {**part, "partition": "6"}
    broker = sc.node(f"{CLUSTER}-{BROKER_POOL}-3")
    follower = {**broker, "host": "follower-host", "instance": "follower-host:1"} if sc.member == "host" else \
        {**broker, sc.member: f"{CLUSTER}-{BROKER_POOL}-4"}
    ranks = {"rank": "0", **OK_HOST}
    cluster = ",".join(f'{key}="{value}"' for key, value in sc.labels.items())
    return AlertRule(
        alert="KafkaRetentionBehindCheckpoint", group="kafka",
        expr=f"max by ({sc.by}, topic, partition) ({start}{{{cluster},{topics}}}) > on (topic, "
             f"partition) group_left min by (topic, partition) ({kept}{{{topics}}})",
        for_s=2 * every_s, severity="critical",
        summary="Partition {{ $labels.partition }} of {{ $labels.topic }} starts at offset {{ $value }}, past a "
        "kept checkpoint",
        description="Retention deleted messages that the oldest kept checkpoint resumes from: a resume from it "
        "stops with StreamGapError. Newer checkpoints may still resume.",
        runbook_doc=RETENTION_RUNBOOK,
        tests=(PromtoolCase(series=(
            _held(start, {**ok, **broker}, 100), _held(start, {**ok, **follower}, 100),
            _held(kept, {**ok, **ranks}, 100),
            _held(start, {**part, **broker}, 250), _held(start, {**part, **follower}, 90),
            _held(kept, {**part, **ranks}, 200), _held(kept, {**part, **ranks, "host": "bad-host"}, 400)),
            fires=Firing(labels={**sc.labels, **part}, value=250)),),
    )


def _kafka_rules(m: Monitoring, k: KafkaPlan | None) -> list[AlertRule]:
    """The token stream's alerts: the brokers' (Strimzi pods, or the bare-metal nodes' scrape job `kafka`), the
    Strimzi log volumes' fill (a bare-metal node's data directory is a host filesystem: node_exporter's fill
    alerts), and the training ranks'."""
    if k is None:
        return []
    every_s = m.scrape_interval_s
    if k.mode == "strimzi":
        sc = _KafkaScope({"namespace": k.namespace}, "pod")
        return [*_kafka_partitions(sc, every_s), *_kafka_disk(m, k.namespace), *_kafka_stream(k, sc, every_s)]
    sc = _KafkaScope({"job": "kafka"}, "host")
    return [*_kafka_partitions(sc, every_s), *_kafka_logs_size(m, k), *_kafka_stream(k, sc, every_s)]


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


def _node_exporter_args(m: Monitoring, sysctls: list[Tunable]) -> list[str]:
    # node_exporter 1.5.0 registers infiniband enabled and sysctl disabled by default
    # (collector/infiniband_linux.go, collector/sysctl_linux.go: registerCollector): name both.
    args = ["--collector.infiniband"]
    if m.filesystems or m.fault_filesystem:
        args.append(f"--collector.filesystem.mount-points-exclude={MOUNT_POINTS_EXCLUDE}")
    if sysctls:
        args += ["--collector.sysctl"] + [f"--collector.sysctl.include={_sysctl_include(t)}" for t in sysctls]
    return args


def build_monitoring(
    spec: ClusterSpec,
    hosts: tuple[Host, ...],
    targets: tuple[LustreTarget, ...],
    tunables: tuple[Tunable, ...],
    objectstore: ObjectStorePlan,
    demand_read_GBps: float,
    kafka: KafkaPlan | None = None,
) -> tuple[MonitoringPlan, list[SpecIssue]]:
    m = spec.monitoring
    issues = _issues(spec, hosts)
    monitors = tuple(m.hosts) or default_hosts(hosts)
    if issues:
        monitors = default_hosts(hosts)
    sysctls = _sysctls(tunables)
    rules = (
        _host_rules(sysctls, m.scrape_interval_s)
        + _filesystem_rules(spec)
        + _lustre_rules(spec, targets)
        + _fabric_rules(hosts, m.scrape_interval_s)
        + (_gpu_rules(spec) if any(h.gpus for h in hosts) else [])
        + _objectstore_rules(objectstore)
        + _datamover_rules(spec, objectstore.s3_port)
        + _kafka_rules(m, kafka)
    )
    if m.alert_for_max_s is not None:
        cap = m.alert_for_max_s
        rules = [replace(r, for_s=min(r.for_s, cap)) for r in rules]
    plan = MonitoringPlan(
        hosts=monitors,
        retention_days=m.retention_days,
        scrape_interval_s=m.scrape_interval_s,
        receivers=tuple(
            Receiver(name=r.name, webhook_url=r.webhook_url, severities=tuple(r.severities),
                     send_resolved=r.send_resolved)
            for r in m.receivers
        ),
        scrape_targets=tuple(_scrape_targets(hosts, monitors, objectstore, kafka)),
        node_exporter_args=tuple(_node_exporter_args(m, sysctls)),
        rules=tuple(rules),
        snapshots=tuple(SnapshotPlan(name=s.name, every_hours=s.every_hours, keep=s.keep) for s in m.lustre_snapshots),
        fill_warn_percent=m.fill_warn_percent,
        fill_critical_percent=m.fill_critical_percent,
        demand_read_GBps=demand_read_GBps,
        filesystems=tuple(m.filesystems),
        for_max_s=m.alert_for_max_s,
        fault_injection=m.fault_injection,
        fault_filesystem=m.fault_filesystem,
    )
    return plan, issues



#: The faults `kiln verify` injects on a running cluster, one acceptance row monitoring.fault_<name> each, with
#: the alert that must fire. The fault itself is carried by that alert's rule (AlertRule.fault, Fault.name);
#: kiln/verify/checks/monitoring.py carries it out and repairs it.
FAULTS: dict[str, tuple[str, str]] = {
    "objectstore_volume_down": ("ObjectStoreVolumeServerDown", "stop a SeaweedFS volume server"),
    "disk_fill": ("HostFilesystemFilling", "fill a planned filesystem past fill_warn_percent"),
    "sysctl_drift": ("SysctlDrift", "set a planned sysctl to another value"),
    "exporter_down": ("ExporterDown", "stop node_exporter on a host"),
    "mover_failing": ("DataMoverFailing", "refuse the data mover's lake access and run a pass of its first link"),
}

#: kiln-health's sub-checks (kiln/node/health.py run_checks), one acceptance row each on the compute hosts: what
#: each judges and the part of the host it is about (the target's `requires`: a sign-off needs the row where the
#: plan has that part, kiln/plan/signoff.py; kiln-health itself says when the host lacks it).
HEALTH_CHECKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "health.gpu": ("GPUs present, every value readable, no uncorrectable ECC errors, no hardware slowdown", ("gpu",)),
    "health.xid": ("no hardware or driver XID in this boot's kernel log", ("gpu",)),
    "health.rdma": ("planned RDMA ports ACTIVE at their planned rate", ("rdma",)),
    "health.lustre": ("Lustre mounted, an import of every planned OST/MDT, each FULL or IDLE", ("lustre",)),
    "health.lnet": ("every Lustre server NID answers lnetctl ping", ("lustre",)),
    "health.clock": ("the clock is synchronised", ("clock",)),
    "health.nvme": ("local NVMe scratch mounted read-write, not memory-backed", ("nvme",)),
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
        AcceptanceTarget(
            check="monitoring.targets_up", metric="targets down", unit="count", expected=0, warn=0, fail=0,
            why="every planned scrape target is up in Prometheus (/api/v1/targets)", scope="aggregate",
            higher_is_better=False, group="all",
        ),
        AcceptanceTarget(
            check="monitoring.panels_with_data", metric="panels without data", unit="count", expected=0, warn=0, fail=0,
            why="every dashboard panel's query returns data from the live Prometheus", scope="aggregate",
            higher_is_better=False, group="all",
        ),
    ]
    names = {r.alert for r in m.rules}
    for name, (alert, what) in FAULTS.items() if m.fault_injection else ():
        if alert not in names or (name == "disk_fill" and not m.fault_filesystem):
            continue
        bound = fire_bound_s(m, m.rule(alert))
        out.append(AcceptanceTarget(
            check=f"monitoring.fault_{name}", metric="seconds to fire", unit="s", expected=bound, warn=bound,
            fail=bound,
            why=f"{what}: {alert} fires within 2 scrape intervals + its for: ({bound} s) and clears after repair",
            scope="aggregate", higher_is_better=False, group="all",
        ))
    for check, (why, requires) in HEALTH_CHECKS.items():
        out.append(AcceptanceTarget(
            check=check, metric="faults", unit="count", expected=0, warn=0, fail=0, why=f"kiln-health: {why}",
            scope="host", higher_is_better=False, group=COMPUTE, requires=requires,
        ))
    return out

