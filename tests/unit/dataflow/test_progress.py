"""The data mover's metrics: one definition (kiln.dataflow.progress.families) behind the node-exporter textfile
and the HTTP endpoint of `kiln data run --metrics-port`, and the names the alert rules and dashboards query."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from kiln.dataflow import progress
from kiln.plan.monitoring import EXPORT_LAG


def _samples(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {(s.name, tuple(sorted(s.labels.items())), s.value)
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _statuses() -> list[progress.Status]:
    stage = progress.Status("pretrain", "import", state="done", bytes_total=10 << 20, bytes_done=10 << 20,
                            files_total=4, files_done=4, last_success=1.7e9)
    ck = progress.Status("checkpoints", "checkpoint", state="transferring", bytes_total=8 << 30,
                         bytes_done=2 << 30, backlog_files=3, backlog_bytes=6 << 30, lag_s=412.0)
    failed = progress.Status("corpus", "export", state="failed", error="2 file(s) failed verification")
    return [stage, ck, failed]


def test_textfile_and_endpoint_carry_the_same_series(tmp_path: Path) -> None:
    state, textfiles = tmp_path / "state", tmp_path / "prom"
    for st in _statuses():
        progress.write(st, state, textfiles)
    from_files = set().union(*(_samples(p.read_text()) for p in sorted(textfiles.glob("*.prom"))))
    port = _free_port()
    progress.serve(state, port, "127.0.0.1")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        served = {s for s in _samples(r.read().decode()) if s[0].startswith("kiln_dataflow_")}
    assert served == from_files
    assert ("kiln_dataflow_lag_s", (("direction", "checkpoint"), ("link", "checkpoints")), 412.0) in served
    assert ("kiln_dataflow_up", (("direction", "export"), ("link", "corpus")), 0.0) in served
    assert ("kiln_dataflow_up", (("direction", "import"), ("link", "pretrain")), 1.0) in served
    # 10 gauges per link and direction: the METRICS fields and up
    assert len(served) == 3 * (len(progress.METRICS) + 1)


def test_the_endpoint_reads_status_files_written_after_it_started(tmp_path: Path) -> None:
    """A stage Job that finishes after the mover Deployment started is scraped from its status file."""
    state = tmp_path / "state"
    state.mkdir()
    port = _free_port()
    progress.serve(state, port, "127.0.0.1")
    (state / "half.import.status.json").write_text("{")  # a file being written is left out, not an error
    progress.write(progress.Status("late", "import", state="done", files_done=7), state, None)
    deadline = time.monotonic() + 5
    body = ""
    while time.monotonic() < deadline and "late" not in body:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            body = r.read().decode()
    assert 'kiln_dataflow_files_done{direction="import",link="late"} 7.0' in body \
        or 'kiln_dataflow_files_done{link="late",direction="import"} 7.0' in body


def test_the_export_lag_alert_queries_a_series_the_mover_exports() -> None:
    name = re.match(r"[a-z_]+", EXPORT_LAG)
    assert name is not None
    exported = {f.name for f in progress.families(_statuses())}
    assert name.group(0) in exported
    ck = next(f for f in progress.families(_statuses()) if f.name == name.group(0))
    labels = dict(re.findall(r'(\w+)="([^"]*)"', EXPORT_LAG))
    assert any(all(s.labels.get(k) == v for k, v in labels.items()) and s.value == 412.0 for s in ck.samples)
