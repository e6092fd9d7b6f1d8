"""Progress and lag an operator can read (JSON status) and scrape (Prometheus node-exporter textfile)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Status:
    link: str
    direction: str  # import | export | checkpoint
    state: str = "idle"  # idle | listing | transferring | verifying | done | failed
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

    def from_engine(self, stats: dict[str, Any]) -> None:
        """Fold one rclone stats record in (bytes and rate of the pass so far)."""
        self.bytes_done = int(stats.get("bytes", 0))
        self.rate_Bps = float(stats.get("speed") or 0.0)
        eta = stats.get("eta")
        self.eta_s = float(eta) if eta is not None else None
        self.backlog_bytes = max(0, self.bytes_total - self.bytes_done)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


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


def write(status: Status, state_dir: Path, textfile_dir: Path | None) -> None:
    """status → <state_dir>/<link>.<direction>.status.json and, if given, <textfile_dir>/kiln_dataflow_<link>.prom."""
    status.updated = time.time()
    _write_atomic(state_dir / f"{status.link}.{status.direction}.status.json", json.dumps(asdict(status), indent=1))
    if textfile_dir is None:
        return
    labels = f'link="{_label(status.link)}",direction="{_label(status.direction)}"'
    lines = []
    for name, kind, help_ in METRICS:
        value = getattr(status, name)
        lines += [f"# HELP kiln_dataflow_{name} {help_}", f"# TYPE kiln_dataflow_{name} {kind}"]
        lines.append(f"kiln_dataflow_{name}{{{labels}}} {float(value or 0):g}")
    lines += ["# HELP kiln_dataflow_up 1 while the last pass succeeded.", "# TYPE kiln_dataflow_up gauge"]
    lines.append(f"kiln_dataflow_up{{{labels}}} {0 if status.state == 'failed' else 1}")
    _write_atomic(textfile_dir / f"kiln_dataflow_{status.link}_{status.direction}.prom", "\n".join(lines) + "\n")


def read_all(state_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(state_dir.glob("*.status.json"))]
