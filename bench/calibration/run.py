"""Calibration: the sizing model's predictions against published measurements, held to ±20 %.

Each file in bench/calibration/cases/ describes one measured system as a kiln spec (`cluster:`, the
`kiln:cluster` object of a stack) and the published figures measured on it (`measurements:`, each with
its source). The script plans every system (no hardware, no network: it only plans), prints predicted
against published, the ratio and the layer that set the prediction, and exits 1 when any in-scope case is
outside the band. A measurement the model does not cover says so with `out_of_scope: <reason>` and is
printed, not judged. Published figures in GiB/s (IO500) or MiB/s (MLPerf Storage) are converted to GB/s.

MLPerf Storage v1.0 and later results and IO500 submissions from 2024 on are held out: they judge the model
independently and are never used to set a factor. Such a measurement says `held_out: <reason>`; it is printed
with its ratio and counted apart, never judged, and a measurement from those sources without `held_out` is
refused (HELD_OUT below).

A case whose source does not record every part of the measured system (an IO500 entry names its storage
servers, drives and network but not the drive model or the clients' NICs) fills those parts with stated
placeholders and lists the layers they feed under `assumed_layers:` (with `assumed_reason:`). A measurement
whose prediction is set by an assumed layer is judged OFF: a placeholder may make a spec valid, never a
figure.

Usage: python bench/calibration/run.py [--cases DIR] [--band 0.2]
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln import yamlio
from kiln.plan import build_plan
from kiln.plan.model import Plan
from kiln.spec import SpecError, validate

CASES = Path(__file__).resolve().parent / "cases"
#: Sources held out of calibration: MLPerf Storage v1.0 and later, IO500 submissions from 2024 on.
HELD_OUT = re.compile(r"storage_results_v[1-9]|/20(2[4-9]|[3-9]\d)/|\b(isc|sc)(2[4-9]|[3-9]\d)\b", re.I)
#: Units a published figure may be given in, and their size in GB/s.
UNITS = {"GB/s": 1.0, "GiB/s": 2**30 / 1e9, "MiB/s": 2**20 / 1e9}
#: Sizing figures a measurement may name as `sizing:<key>`.
SIZING_KEYS = (
    "aggregate_read_GBps",
    "aggregate_write_GBps",
    "single_client_read_GBps",
    "single_client_write_GBps",
    "objectstore_GBps",
)


@dataclass(frozen=True)
class Row:
    case: str
    metric: str
    predicted: float
    published: float
    unit: str
    out_of_scope: str | None
    source: str
    limit: str = ""
    assumed: bool = False
    held_out: str | None = None

    @property
    def published_GBps(self) -> float:
        return self.published * UNITS[self.unit]

    @property
    def ratio(self) -> float:
        return self.predicted / self.published_GBps

    def within(self, band: float) -> bool:
        return not self.assumed and abs(self.ratio - 1.0) <= band


class CaseError(Exception):
    """A case file that cannot be judged: names the file and the problem."""


def predict(plan: Plan, metric: str) -> tuple[float, str]:
    """(predicted figure, the sizing layer that set it; "" for a target)."""
    kind, _, name = metric.partition(":")
    sz = plan.sizing
    if kind == "sizing" and name in SIZING_KEYS:
        value = float(getattr(sz, name))
        layers = {layer.name: layer for layer in sz.layers}
        if name == "objectstore_GBps":
            return value, "objectstore"
        write = "write" in name
        bottleneck = layers[sz.write_bottleneck if write else sz.read_bottleneck]
        if value >= (bottleneck.write_GBps if write else bottleneck.read_GBps) - 1e-9:
            return value, bottleneck.name
        return value, "client_hosts"  # a single client's ceiling is below the aggregate
    if kind == "target":
        found = [t for t in plan.targets if t.check == name]
        if found:
            return float(found[0].expected), ""
    raise KeyError(f"metric {metric!r}: use target:<check id> or sizing:<{'|'.join(SIZING_KEYS)}>")


def load_case(path: Path) -> list[Row]:
    doc: Any = yamlio.load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or "cluster" not in doc or not doc.get("measurements"):
        raise CaseError(f"{path.name}: needs `cluster:` (a kiln spec) and `measurements:` (at least one)")
    try:
        plan = build_plan(validate(doc["cluster"], str(path)), path.stem)
    except SpecError as e:
        raise CaseError(f"{path.name}: the spec is not valid:\n{e}") from None
    assumed = [str(x) for x in doc.get("assumed_layers") or ()]
    if assumed and not doc.get("assumed_reason"):
        raise CaseError(f"{path.name}: `assumed_layers:` needs `assumed_reason:` (which parts are placeholders, why)")
    rows = []
    for m in doc["measurements"]:
        missing = [k for k in ("id", "metric", "published", "unit", "source") if not m.get(k)]
        if missing:
            raise CaseError(f"{path.name}: measurement {m.get('id', '?')} lacks {', '.join(missing)}")
        if str(m["unit"]) not in UNITS:
            raise CaseError(f"{path.name}: {m['id']}: unit {m['unit']!r}: use one of {', '.join(UNITS)}")
        if HELD_OUT.search(str(m["source"])) and not m.get("held_out"):
            raise CaseError(f"{path.name}: {m['id']}: its source is held out of calibration (MLPerf Storage v1.0+, "
                            "IO500 2024+): mark it `held_out: <reason>` so it is reported, never judged or fitted")
        try:
            predicted, limit = predict(plan, str(m["metric"]))
        except KeyError as e:
            raise CaseError(f"{path.name}: {m['id']}: {e.args[0]}") from None
        rows.append(
            Row(str(m["id"]), str(m["metric"]), predicted, float(m["published"]), str(m["unit"]),
                m.get("out_of_scope"), " ".join(str(m["source"]).split()), limit, limit in assumed,
                m.get("held_out"))
        )
    return rows


def table(rows: list[Row], band: float) -> str:
    lines = [f"{'case':38} {'metric':36} {'predicted':>10} {'published':>10} {'ratio':>6}  {'limit':14} verdict"]
    for r in rows:
        if r.held_out:
            verdict = f"held out (reported, never judged): {r.held_out}"
        elif r.out_of_scope:
            verdict = f"out of scope: {r.out_of_scope}"
        elif r.assumed:
            verdict = f"OFF: set by {r.limit}, a placeholder layer of this case"
        else:
            verdict = "ok" if r.within(band) else "OFF"
        pub = f"{r.published_GBps:10.1f}"
        note = "" if r.unit == "GB/s" else f" (published {r.published:g} {r.unit})"
        lines.append(
            f"{r.case:38} {r.metric:36} {r.predicted:10.1f} {pub} {r.ratio:6.2f}  {r.limit or '-':14} {verdict}"
            f" [GB/s]{note}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--cases", type=Path, default=CASES, help="directory of case files (*.yaml)")
    ap.add_argument("--band", type=float, default=0.2, help="allowed |predicted/published - 1| (default 0.2)")
    args = ap.parse_args(argv)
    files = sorted(args.cases.glob("*.yaml"))
    if not files:
        print(f"calibration: no case files in {args.cases}", file=sys.stderr)
        return 2
    rows: list[Row] = []
    try:
        for f in files:
            rows += load_case(f)
    except CaseError as e:
        print(f"calibration: {e}", file=sys.stderr)
        return 2
    print(table(rows, args.band))
    judged = [r for r in rows if not r.out_of_scope and not r.held_out]
    off = [r for r in judged if not r.within(args.band)]
    print(f"\n{len(judged) - len(off)} of {len(judged)} in-scope measurements within ±{args.band:.0%}"
          f"{'' if not off else '; off: ' + ', '.join(r.case for r in off)}")
    held = [r for r in rows if r.held_out]
    if held:
        inside = sum(1 for r in held if abs(r.ratio - 1) <= args.band)
        print(f"held out: {inside} of {len(held)} within ±{args.band:.0%} (not judged; ratios "
              f"{', '.join(f'{r.ratio:.2f}' for r in held)})")
    return 1 if off else 0


if __name__ == "__main__":
    sys.exit(main())
