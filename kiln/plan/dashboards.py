"""What each Grafana dashboard shows, derived from the plan: its panels' titles, PromQL queries, legends and units.

The renderer (kiln/render/monitoring.py) writes them as Grafana JSON; the monitoring.panels_with_data check
(kiln/verify/checks/monitoring.py) runs the same queries against Prometheus. Both read this module, so neither
imports the other. Metric names are those of the exporters listed in kiln/plan/monitoring.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from kiln.plan.model import Plan
from kiln.plan.monitoring import EXPORT_LAG, MonitoringPlan, fill_mounts, mountpoint_selector


@dataclass(frozen=True, slots=True, kw_only=True)
class Panel:
    title: str
    queries: tuple[tuple[str, str], ...]  # (PromQL, legend), one line of the panel each
    unit: str  # Grafana's unit id


@dataclass(frozen=True, slots=True, kw_only=True)
class Dashboard:
    file: str  # under grafana/dashboards/
    uid: str  # the part after kiln-<stack>-
    title: str  # the part after "kiln <stack>: "
    panels: tuple[Panel, ...]


def _filesystem_panel(m: MonitoringPlan) -> tuple[Panel, ...]:
    """Space used on the planned filesystems (monitoring.filesystems and fault_filesystem), as their alerts."""
    mounts = fill_mounts(m.filesystems, m.fault_filesystem)
    if not mounts:
        return ()
    sel = mountpoint_selector(mounts)
    return (Panel(title="Planned filesystems used", queries=(
        (f"1 - node_filesystem_avail_bytes{sel} / node_filesystem_size_bytes{sel}", "{{host}} {{mountpoint}}"),),
        unit="percentunit"),)


def _overview(plan: Plan) -> Dashboard:
    m = plan.monitoring
    s = plan.sizing
    demand = m.demand_read_GBps * 1e9
    supply = s.aggregate_read_GBps * 1e9
    return Dashboard(file="overview.json", uid="overview", title="is the storage feeding the GPUs", panels=(
        Panel(title="Lustre read rate vs the plan's GPU demand", queries=(
            ('sum(rate(lustre_target_read_bytes_total{kind="ost"}[5m]))', "OSTs read"),
            (f"vector({demand:.0f})", f"planned GPU demand ({m.demand_read_GBps:g} GB/s)"),
            (f"vector({supply:.0f})", f"planned supply ({s.aggregate_read_GBps:g} GB/s, {s.read_bottleneck})"),
        ), unit="Bps"),
        Panel(title="Lustre write rate (checkpoints)", queries=(
            ('sum(rate(lustre_target_write_bytes_total{kind="ost"}[5m]))', "OSTs written"),
            (f"vector({s.aggregate_write_GBps * 1e9:.0f})", "planned write supply"),
        ), unit="Bps"),
        Panel(title="GPU utilisation", queries=(("avg(DCGM_FI_DEV_GPU_UTIL)", "mean GPU util"),), unit="percent"),
        Panel(title="Firing alerts", queries=(('count by (severity) (ALERTS{alertstate="firing"})', "{{severity}}"),),
              unit="short"),
    ))


_LUSTRE = Dashboard(file="lustre.json", uid="lustre", title="Lustre", panels=(
    Panel(title="OST/MDT space used", queries=(("1 - lustre_target_free_bytes / lustre_target_capacity_bytes",
                                                "{{target}}"),), unit="percentunit"),
    Panel(title="OST/MDT inodes used", queries=(("1 - lustre_target_files_free / lustre_target_files",
                                                 "{{target}}"),), unit="percentunit"),
    Panel(title="Read per target", queries=(("rate(lustre_target_read_bytes_total[5m])", "{{target}}"),), unit="Bps"),
    Panel(title="Write per target", queries=(("rate(lustre_target_write_bytes_total[5m])", "{{target}}"),),
          unit="Bps"),
    Panel(title="Top jobs by bytes", queries=(("topk(10, sum by (job_id) (rate(lustre_job_read_bytes_total[5m]) + "
                                               "rate(lustre_job_write_bytes_total[5m])))", "{{job_id}}"),), unit="Bps"),
    Panel(title="LNet messages", queries=(
        ("sum by (host) (rate(lustre_lnet_send_count_total[5m]))", "{{host}} sent"),
        ("sum by (host) (rate(lustre_lnet_drop_count_total[5m]))", "{{host}} dropped"),
    ), unit="ops"),
))

_FABRIC = Dashboard(file="fabric.json", uid="fabric", title="RDMA fabric", panels=(
    Panel(title="Port state (4 = ACTIVE)", queries=(("node_infiniband_state_id", "{{host}} {{device}}"),),
          unit="short"),
    Panel(title="Port rate", queries=(("node_infiniband_rate_bytes_per_second", "{{host}} {{device}}"),), unit="Bps"),
    Panel(title="Received", queries=(("rate(node_infiniband_port_data_received_bytes_total[5m])",
                                      "{{host}} {{device}}"),), unit="Bps"),
    Panel(title="Errors", queries=(("increase(node_infiniband_symbol_error_total[10m]) + "
                                    "increase(node_infiniband_port_errors_received_total[10m])",
                                    "{{host}} {{device}}"),), unit="short"),
))

_GPU = Dashboard(file="gpu.json", uid="gpu", title="GPUs", panels=(
    Panel(title="GPU utilisation", queries=(("DCGM_FI_DEV_GPU_UTIL", "{{Hostname}} {{gpu}}"),), unit="percent"),
    Panel(title="GPU temperature", queries=(("DCGM_FI_DEV_GPU_TEMP", "{{Hostname}} {{gpu}}"),), unit="celsius"),
    Panel(title="Last XID", queries=(("DCGM_FI_DEV_XID_ERRORS", "{{Hostname}} {{gpu}}"),), unit="short"),
    Panel(title="Remapped rows (uncorrectable)", queries=(("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                                                           "{{Hostname}} {{gpu}}"),), unit="short"),
))

_OBJECTSTORE = Dashboard(file="objectstore.json", uid="objectstore", title="Object store", panels=(
    Panel(title="SeaweedFS components up", queries=(('up{job=~"seaweedfs-.*"}', "{{job}} {{host}}"),), unit="short"),
    Panel(title="Checkpoint export lag", queries=((EXPORT_LAG, "{{host}} {{link}}"),), unit="s"),
))


def _hosts(m: MonitoringPlan) -> Dashboard:
    return Dashboard(file="hosts.json", uid="hosts", title="Hosts", panels=(
        Panel(title="Scrape targets up", queries=(("up", "{{job}} {{host}}"),), unit="short"),
        Panel(title="CPU busy", queries=(('1 - avg by (host) (rate(node_cpu_seconds_total{mode="idle"}[5m]))',
                                          "{{host}}"),), unit="percentunit"),
        Panel(title="Memory available", queries=(("node_memory_MemAvailable_bytes", "{{host}}"),), unit="bytes"),
        *_filesystem_panel(m),
    ))


def dashboards(plan: Plan) -> tuple[Dashboard, ...]:
    """Every dashboard kiln renders for this plan, in the order it writes them."""
    return (_overview(plan), _LUSTRE, _FABRIC, _GPU, _OBJECTSTORE, _hosts(plan.monitoring))
