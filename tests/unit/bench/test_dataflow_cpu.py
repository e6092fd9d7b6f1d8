"""bench/dataflow_cpu.py: the CPU-bound ceiling arithmetic and the shape of its JSON (no SeaweedFS started)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


@pytest.fixture()
def cpu(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # the bench scripts import their siblings by name
    return importlib.import_module("dataflow_cpu")


def test_ceiling_is_naive_wall_over_cpu_spread_on_the_cores(cpu: ModuleType) -> None:
    # 1000 objects: naive 3.0 s; engine 1.0 ms server + 0.9 ms client per object = 1.9 CPU-s, on 2 cores 0.95 s.
    assert cpu.ceiling(3.0, 1.0, 0.9, 2) == pytest.approx(3.0 / 0.95)
    # Twice the cores, twice the ceiling; twice the CPU, half of it.
    assert cpu.ceiling(3.0, 1.0, 0.9, 4) == pytest.approx(2 * cpu.ceiling(3.0, 1.0, 0.9, 2))
    assert cpu.ceiling(3.0, 2.0, 1.8, 2) == pytest.approx(cpu.ceiling(3.0, 1.0, 0.9, 2) / 2)
    # 1000 objects, naive 3.92 s: rclone to disk (1.25 + 1.79 CPU-s) stays under 3× on 2 cores, the C client with
    # an MD5 per file (1.04 + 1.49 CPU-s) just above it.
    assert cpu.ceiling(3.92, 1.25, 1.79, 2) == pytest.approx(2.579, abs=1e-3)
    assert cpu.ceiling(3.92, 1.04, 1.49, 2) == pytest.approx(3.099, abs=1e-3)


@pytest.mark.parametrize(("server", "client", "cores"), [(0.0, 0.0, 2), (1.0, 0.5, 0)])
def test_ceiling_refuses_what_has_no_meaning(cpu: ModuleType, server: float, client: float, cores: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        cpu.ceiling(3.0, server, client, cores)


def test_summary_shape_and_figures(cpu: ModuleType) -> None:
    S = cpu.Sample
    samples = {
        "naive": [S(3.0, 1.0, 2.0, 1000), S(3.3, 1.1, 2.1, 1000), S(2.9, 1.0, 1.9, 1000)],
        "rclone_memory": [S(1.5, 1.0, 0.9, 1000), S(1.2, 1.1, 0.9, 1000), S(1.6, 1.0, 1.0, 999)],
    }
    out = cpu.summarise(samples, 1000, 2)
    assert set(out) == {"naive", "rclone_memory"}
    row = out["rclone_memory"]
    assert set(row) == {
        "wall_s", "server_cpu_ms_per_object", "client_cpu_ms_per_object", "total_cpu_ms_per_object",
        "speedup_vs_naive", "ceiling_on_cores", "files_min", "runs",
    }
    for figure in ("wall_s", "server_cpu_ms_per_object", "ceiling_on_cores"):
        assert set(row[figure]) == {"median", "cv"}
    assert row["wall_s"]["median"] == 1.5
    assert row["client_cpu_ms_per_object"]["median"] == pytest.approx(0.9)
    assert row["total_cpu_ms_per_object"]["median"] == pytest.approx(2.0)
    assert row["files_min"] == 999  # one repetition delivered one object short: the summary shows it
    # Per repetition against that repetition's naive wall: 3.0/1.5, 3.3/1.2, 2.9/1.6 → median 2.0.
    assert row["speedup_vs_naive"]["median"] == pytest.approx(2.0)
    # Ceilings 3.0/(1.9/2), 3.3/(2.0/2), 2.9/(2.0/2) → median 3.158.
    assert row["ceiling_on_cores"]["median"] == pytest.approx(3.0 / 0.95, abs=1e-3)
    assert row["wall_s"]["cv"] > 0
    assert out["naive"]["speedup_vs_naive"] == {"median": 1.0, "cv": 0.0}
    assert len(row["runs"]) == 3 and set(row["runs"][0]) == {"wall_s", "server_cpu_s", "client_cpu_s"}
    json.dumps(out)  # plain JSON


def test_recorded_result_has_every_case(cpu: ModuleType) -> None:
    """The committed result names every case: measured, or why not (awscrt is optional)."""
    rec = json.loads((BENCH / "results/dataflow_cpu.json").read_text())
    assert set(rec["cases"]) == set(cpu.CASES)
    for name, row in rec["cases"].items():
        if isinstance(row, str):
            assert name.startswith("crt") and row == cpu.CRT_MISSING
        else:
            assert row["files_min"] == rec["objects"], name
            assert row["ceiling_on_cores"]["median"] > 0
    assert {"load_average_before", "load_average_after", "cores", "versions"} <= set(rec)
