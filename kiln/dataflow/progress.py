"""Progress and lag an operator can read (JSON status) and scrape: a Prometheus node-exporter textfile (bare
metal) or an HTTP endpoint (`kiln data run --metrics-port`, Kubernetes). Both come from `families`, the one place
that turns Status records into metric families, so the names and labels cannot differ between the two.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kiln.redact import redact


@dataclass
class Status:
    link: str
    direction: str  # import | export | checkpoint
    state: str = "idle"  # idle | listing | transferring | verifying | done | failed (done and failed end a pass)
    bytes_total: int = 0  # bytes this pass decided to move (the backlog at its start)
    bytes_done: int = 0
    files_total: int = 0
    files_done: int = 0  # files moved and verified
    rate_Bps: float = 0.0
    eta_s: float | None = None
    backlog_files: int = 0  # files still to move or verify
    backlog_bytes: int = 0
    lag_s: float = 0.0  # export: age of the oldest file not yet verified in the lake; import: 0 when done
    started: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    last_success: float | None = None
    error: str = ""
    error_class: str = ""  # what failed the pass: an exception's class (EndpointConnectionError …), or FileFailures

    def from_engine(self, stats: dict[str, Any]) -> None:
        """Fold one rclone stats record in (bytes and rate of the pass so far)."""
        self.bytes_done = int(stats.get("bytes", 0))
        self.rate_Bps = float(stats.get("speed") or 0.0)
        eta = stats.get("eta")
        self.eta_s = float(eta) if eta is not None else None
        self.backlog_bytes = max(0, self.bytes_total - self.bytes_done)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Unique per writer: on Kubernetes several pods on several nodes write the same state directory on Lustre.
    tmp = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


METRICS = (
    ("bytes_total", "gauge", "Bytes this pass set out to move."),
    ("bytes_done", "gauge", "Bytes moved so far in this pass."),
    ("files_total", "gauge", "Files this pass set out to move."),
    ("files_done", "gauge", "Files moved and verified in this pass."),
    ("rate_Bps", "gauge", "Transfer rate, bytes per second."),
    ("backlog_files", "gauge", "Files still to move or verify."),
    ("backlog_bytes", "gauge", "Bytes still to move or verify."),
    ("lag_s", "gauge", "Age of the oldest file not yet verified at its destination, seconds."),
    ("last_success", "gauge", "Unix time of the last pass that finished with everything verified."),
)


UP_HELP = "1 while the last pass succeeded."
LABELS = ("link", "direction")


def families(statuses: Iterable[Status]) -> list[GaugeMetricFamily]:
    """kiln_dataflow_<field>{link, direction} for each METRICS field, and kiln_dataflow_up, over the statuses."""
    rows = list(statuses)
    out = []
    for name, _kind, help_ in METRICS:
        fam = GaugeMetricFamily(f"kiln_dataflow_{name}", help_, labels=LABELS)
        for st in rows:
            fam.add_metric([st.link, st.direction], float(getattr(st, name) or 0))
        out.append(fam)
    up = GaugeMetricFamily("kiln_dataflow_up", UP_HELP, labels=LABELS)
    for st in rows:
        up.add_metric([st.link, st.direction], 0.0 if st.state == "failed" else 1.0)
    out.append(up)
    return out


class _Fixed(Collector):
    def __init__(self, statuses: list[Status]) -> None:
        self.statuses = statuses

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from families(self.statuses)


class StateDirCollector(Collector):
    """Every status file in a state directory, read at each scrape: on Kubernetes the stage Jobs, CronJobs and
    model distribution pods write theirs on Lustre and the mover Deployment's endpoint serves them all."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from families(read_statuses(self.state_dir))


def exposition(statuses: Iterable[Status]) -> str:
    """The statuses in the Prometheus text format (what the textfile holds and the endpoint serves)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(list(statuses)))
    return generate_latest(reg).decode("utf-8")


def write(status: Status, state_dir: Path, textfile_dir: Path | None) -> None:
    """status → <state_dir>/<link>.<direction>.status.json and, if given, <textfile_dir>/kiln_dataflow_<link>.prom."""
    status.updated = time.time()
    status.error = redact(status.error)  # no signed URL or secret reaches the file (kiln/redact.py)
    _write_atomic(state_dir / f"{status.link}.{status.direction}.status.json", json.dumps(asdict(status), indent=1))
    if textfile_dir is None:
        return
    _write_atomic(textfile_dir / f"kiln_dataflow_{status.link}_{status.direction}.prom", exposition([status]))


def serve(state_dir: Path, port: int, address: str = "0.0.0.0") -> None:
    """Serve the metrics of every status file under state_dir on http://<address>:<port>/metrics (a thread)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StateDirCollector(state_dir))
    start_http_server(port, addr=address, registry=reg)


def read_all(state_dir: Path) -> list[dict[str, Any]]:
    """Every status file under state_dir, as dicts; one being replaced or unreadable right now is left out."""
    out = []
    for p in sorted(state_dir.glob("*.status.json")):
        try:
            row = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(row, dict):
            out.append(row)
    return out


def read_statuses(state_dir: Path) -> list[Status]:
    known = {f.name for f in fields(Status)}
    return [Status(**{k: v for k, v in row.items() if k in known}) for row in read_all(state_dir)]
