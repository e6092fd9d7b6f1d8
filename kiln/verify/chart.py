"""The picture the HTML report opens with: per layer, what passed, failed and was not measured (one stacked bar of
its rows), and every measured benchmark as a bar of measured ÷ target (100 % = the target; the warn and fail
thresholds marked). Geometry only: kiln/templates/verify-report.html.j2 draws it as inline SVG (no script, no
network fetch), escaping every label."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kiln.verify.judge import Verdict, effective
from kiln.verify.layers import by_layer, layer_title
from kiln.verify.verdict import Evidence, evidence

if TYPE_CHECKING:
    from kiln.verify.runner import Result

WIDTH = 1240
LABEL_W = 330  # the row labels
BAR_X = LABEL_W + 10
BAR_W = 420  # 0 … SCALE × the target
SCALE = 2.0  # the bar's right end: 200 % of the target
ROW_H = 20
COLORS = {
    "PASS": "#2e7d32", "WARN": "#f9a825", "FAIL": "#c62828", "ERROR": "#ad1457",
    "missing": "#616161", "optional": "#c8c8c8",
}
# The stacked bar's segments, in order, with their legend words.
SEGMENTS = (("PASS", "pass"), ("WARN", "warn"), ("FAIL", "fail"), ("ERROR", "error"),
            ("missing", "not measured"), ("optional", "not applicable (not required)"))


@dataclass(frozen=True, slots=True)
class Shape:
    tag: str  # rect, line or text
    attrs: tuple[tuple[str, str], ...]
    text: str = ""


@dataclass
class Chart:
    width: int = WIDTH
    height: int = 0
    shapes: list[Shape] = field(default_factory=list)

    def add(self, tag: str, text: str = "", **attrs: float | str) -> None:
        self.shapes.append(Shape(tag, tuple((k.replace("_", "-"), _attr(v)) for k, v in attrs.items()), text))


def _attr(v: float | str) -> str:
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def category(r: Result, strict: bool) -> str:
    """The stacked bar's segment of a row: its verdict, or whether a NOT APPLICABLE row is missing evidence."""
    v = effective(r.verdict, strict)
    if v is not Verdict.NOT_APPLICABLE:
        return v.value
    return "missing" if evidence(r) is Evidence.MISSING else "optional"


def score(r: Result) -> float | None:
    """Measured ÷ target with 1.0 = the target and more = better; None where a ratio means nothing (no
    measurement, a target of 0 such as a count of mismatches)."""
    t, st = r.target, r.stats
    if st is None or r.kind == "conformance" or t.expected <= 0:
        return None
    if t.higher_is_better:
        return st.median / t.expected
    return t.expected / st.median if st.median > 0 else SCALE


def _threshold(r: Result, value: float) -> float | None:
    t = r.target
    if value <= 0 or t.expected <= 0:
        return None
    return value / t.expected if t.higher_is_better else t.expected / value


def _x(ratio: float) -> float:
    return BAR_X + BAR_W * min(max(ratio, 0.0), SCALE) / SCALE


def _short(text: str, n: int = 52) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _legend(c: Chart, y: float) -> float:
    x = 0.0
    for key, word in SEGMENTS:
        c.add("rect", x=x, y=y, width=12, height=12, fill=COLORS[key])
        c.add("text", word, x=x + 16, y=y + 11, font_size=12)
        x += 24 + 7 * len(word)
    c.add("line", x1=_x(1.0), y1=y, x2=_x(1.0), y2=y + 12, stroke="#000")
    c.add("text", "target (100 %); dashed: warn and fail", x=_x(1.0) + 6, y=y + 11, font_size=12)
    return y + 26


def _layer_bar(c: Chart, title: str, rows: Sequence[Result], strict: bool, y: float) -> float:
    counts = {key: 0 for key, _ in SEGMENTS}
    for r in rows:
        counts[category(r, strict)] += 1
    c.add("text", title, x=0, y=y + 14, font_size=15, font_weight="bold")
    x, total = float(BAR_X), max(1, len(rows))
    for key, _ in SEGMENTS:
        if counts[key]:
            w = BAR_W * counts[key] / total
            c.add("rect", x=x, y=y + 2, width=w, height=16, fill=COLORS[key])
            x += w
    words = [f"{counts[k]} {w}" for k, w in SEGMENTS if counts[k]]
    c.add("text", f"{len(rows)} rows: " + ", ".join(words), x=BAR_X + BAR_W + 10, y=y + 15, font_size=12)
    return y + ROW_H + 4


def _benchmark_bar(c: Chart, r: Result, strict: bool, y: float) -> float:
    ratio = score(r)
    assert ratio is not None and r.stats is not None
    c.add("text", _short(f"{r.check} @ {r.subject.label}"), x=12, y=y + 13, font_size=12)
    c.add("rect", x=BAR_X, y=y + 3, width=BAR_W, height=12, fill="#f1f1f1")
    c.add("rect", x=BAR_X, y=y + 3, width=_x(ratio) - BAR_X, height=12,
          fill=COLORS[effective(r.verdict, strict).value])
    for value in (r.target.warn, r.target.fail):
        mark = _threshold(r, value)
        if mark is not None:
            c.add("line", x1=_x(mark), y1=y + 1, x2=_x(mark), y2=y + 17, stroke="#555", stroke_dasharray="3,2")
    c.add("line", x1=_x(1.0), y1=y, x2=_x(1.0), y2=y + 18, stroke="#000")
    more = "" if ratio <= SCALE else ", bar capped"
    c.add("text", f"{_fmt(r.stats.median)} vs target {_fmt(r.target.expected)} {r.target.unit} "
                  f"({ratio:.0%}{more})", x=BAR_X + BAR_W + 10, y=y + 13, font_size=12)
    return y + ROW_H


def build_chart(results: Sequence[Result], strict: bool) -> Chart:
    """The chart of a run's rows: a legend, then per layer its stacked bar and its measured benchmarks."""
    c = Chart()
    y = _legend(c, 0.0)
    for layer, rows in by_layer(results):
        y = _layer_bar(c, layer_title(layer), rows, strict, y)
        for r in rows:
            if score(r) is not None:
                y = _benchmark_bar(c, r, strict, y)
        y += 8
    c.height = int(y) + 4
    return c
