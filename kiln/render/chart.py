"""The layer limits as an inline SVG bar chart: one bar per supply layer on a log scale, the demand as a line, the
bottleneck in its own colour. Self-contained markup (no script, no fetch), every label escaped."""

from __future__ import annotations

import math
from html import escape
from typing import Any

WIDTH, LABEL, ROW, TOP = 900, 150, 24, 30
BAR, BOTTLENECK, DEMAND, AXIS = "#8fa9c4", "#d9534f", "#2b7a2b", "#999999"


def _ticks(lo: float, hi: float) -> list[float]:
    return [10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def layer_chart(doc: dict[str, Any], op: str) -> str:
    """An SVG of every supply layer's `op` ("read" or "write") limit against the demand, log scale."""
    s = doc["sizing"]
    rows = [(la["name"], la[f"{op}_GBps"]) for la in s["layers"] if la["kind"] == "supply" and la[f"{op}_GBps"]]
    demand = next((la[f"{op}_GBps"] for la in s["layers"] if la["kind"] == "demand"), None)
    values = [v for _, v in rows] + ([demand] if demand else [])
    lo, hi = min(values) / 2, max(values) * 1.5
    span = math.log10(hi) - math.log10(lo)

    def x(v: float) -> float:
        return LABEL + (WIDTH - LABEL - 20) * (math.log10(v) - math.log10(lo)) / span

    height = TOP + ROW * len(rows) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" role="img" '
        f'font-family="sans-serif" font-size="12"><title>{escape(op)} limit of each layer, GB/s (log scale)</title>',
        f'<text x="0" y="16" font-weight="bold">{escape(op)} (GB/s, log scale)</text>',
    ]
    for t in _ticks(lo, hi):
        if lo <= t <= hi:
            out.append(f'<line x1="{x(t):.1f}" y1="{TOP - 6}" x2="{x(t):.1f}" y2="{height - 24}" stroke="#eeeeee"/>')
            out.append(f'<text x="{x(t):.1f}" y="{height - 10}" fill="{AXIS}" text-anchor="middle">{t:g}</text>')
    bottleneck = s["bottleneck"][op]
    for i, (name, value) in enumerate(rows):
        y = TOP + i * ROW
        colour = BOTTLENECK if name == bottleneck else BAR
        tag = " (bottleneck)" if name == bottleneck else ""
        out += [
            f'<text x="{LABEL - 6}" y="{y + 15}" text-anchor="end">{escape(name)}</text>',
            f'<rect x="{LABEL}" y="{y + 3}" width="{max(x(value) - LABEL, 1):.1f}" height="{ROW - 8}" '
            f'fill="{colour}"><title>{escape(name)}{tag}: {value:,.1f} GB/s</title></rect>',
            f'<text x="{x(value) + 4:.1f}" y="{y + 15}">{value:,.1f}{escape(tag)}</text>',
        ]
    if demand:
        out.append(f'<line x1="{x(demand):.1f}" y1="{TOP - 6}" x2="{x(demand):.1f}" y2="{height - 24}" '
                   f'stroke="{DEMAND}" stroke-width="2" stroke-dasharray="5,3"/>')
        out.append(f'<text x="{x(demand) + 4:.1f}" y="{TOP - 10}" fill="{DEMAND}">demand {demand:,.1f}</text>')
    out.append("</svg>")
    return "\n".join(out)
