"""What changed between two sign-offs (`kiln verify --compare OLD.json`): the verdict, and per row (check and
subject) its verdict and its median, regressions first. A regression is a row whose verdict got worse (PASS → WARN
→ NOT APPLICABLE → ERROR → FAIL) or whose median moved the wrong way by more than FIGURE_TOLERANCE; new and gone
rows follow, then improvements; unchanged rows are counted. The host facts that changed (a driver, a kernel, a
tool) are listed: the usual reason to look."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: A median that moves the wrong way by more than this share is a regression even when its verdict holds.
FIGURE_TOLERANCE = 0.10
BADNESS = {"PASS": 0, "WARN": 1, "NOT_APPLICABLE": 2, "ERROR": 3, "FAIL": 4}
SIGN_OFF_BADNESS = {"ACCEPTED": 0, "ACCEPTED WITH WAIVERS": 1, "INCOMPLETE": 2, "REJECTED": 3}
ORDER = {"regression": 0, "new": 1, "gone": 2, "improvement": 3, "unchanged": 4}


@dataclass(frozen=True, slots=True, kw_only=True)
class RowChange:
    check: str
    subject: str
    kind: str  # regression, new, gone, improvement, unchanged
    old_verdict: str
    new_verdict: str
    old_median: float | None
    new_median: float | None
    unit: str
    change: float | None  # new ÷ old − 1, None without both medians
    why: str

    def line(self) -> str:
        def fig(x: float | None) -> str:
            return "—" if x is None else f"{x:.4g}"

        moved = "" if self.change is None else f" ({self.change:+.1%})"
        return (f"{self.kind.upper()}: {self.check} @ {self.subject}: {self.old_verdict} → {self.new_verdict}, "
                f"{fig(self.old_median)} → {fig(self.new_median)} {self.unit}{moved} — {self.why}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    old_verdict: str
    new_verdict: str
    old_started: str
    new_started: str
    rows: tuple[RowChange, ...]
    facts: tuple[str, ...]  # "<host> <fact>: <old> → <new>"

    @property
    def regressions(self) -> tuple[RowChange, ...]:
        return tuple(r for r in self.rows if r.kind == "regression")

    def as_dict(self) -> dict[str, Any]:
        return {"old": {"verdict": self.old_verdict, "started": self.old_started},
                "new": {"verdict": self.new_verdict, "started": self.new_started},
                "rows": [{k: getattr(r, k) for k in RowChange.__dataclass_fields__} for r in self.rows],
                "facts": list(self.facts)}

    def text(self) -> str:
        worse = SIGN_OFF_BADNESS.get(self.new_verdict, 2) > SIGN_OFF_BADNESS.get(self.old_verdict, 2)
        head = (f"sign-off {self.old_verdict} ({self.old_started}) → {self.new_verdict} ({self.new_started})"
                + (" — WORSE" if worse else ""))
        lines = [head]
        lines += [f"  {r.line()}" for r in self.rows if r.kind != "unchanged"]
        same = sum(1 for r in self.rows if r.kind == "unchanged")
        lines.append(f"  {same} rows unchanged (same verdict, median within {FIGURE_TOLERANCE:.0%})")
        if self.facts:
            lines.append("  host facts that changed:")
            lines += [f"    {f}" for f in self.facts]
        return "\n".join(lines)


def _verdict(report: dict[str, Any]) -> str:
    summary = report.get("summary") or {}
    if "verdict" in summary:
        return str(summary["verdict"])
    return "ACCEPTED" if summary.get("exit_code") == 0 else "REJECTED"  # a v1 report knew no other sign-off


def _median(row: dict[str, Any]) -> float | None:
    m = row.get("measured")
    return None if not m else float(m["median"])


def _classify(old: dict[str, Any], new: dict[str, Any]) -> tuple[str, float | None, str]:
    ov, nv = old["verdict"], new["verdict"]
    om, nm = _median(old), _median(new)
    change = None if om is None or nm is None or om == 0 else nm / om - 1
    if BADNESS.get(nv, 2) > BADNESS.get(ov, 2):
        return "regression", change, f"verdict {ov} → {nv}: {new.get('message', '')[:160]}"
    if BADNESS.get(nv, 2) < BADNESS.get(ov, 2):
        return "improvement", change, f"verdict {ov} → {nv}"
    if change is not None and abs(change) > FIGURE_TOLERANCE:
        higher = bool((new.get("target") or {}).get("higher_is_better", True))
        worse = change < 0 if higher else change > 0
        side = "lower" if change < 0 else "higher"
        return ("regression" if worse else "improvement"), change, f"median {side} by {abs(change):.0%}"
    return "unchanged", change, "same verdict, median within tolerance"


def _fact_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    before, after = old.get("host_facts") or {}, new.get("host_facts") or {}
    for host in sorted(set(before) | set(after)):
        a, b = before.get(host) or {}, after.get(host) or {}
        for section in ("facts", "tools"):
            x, y = a.get(section) or {}, b.get(section) or {}
            out += [f"{host} {k}: {x.get(k, '—')} → {y.get(k, '—')}" for k in sorted(set(x) | set(y))
                    if x.get(k) != y.get(k) and k != "boot"]
    return out


def compare_reports(old: dict[str, Any], new: dict[str, Any]) -> Comparison:
    """What changed from the `old` report.json to the `new` one (both as loaded dicts)."""
    before = {(r["check"], r["subject"]): r for r in old.get("results", [])}
    after = {(r["check"], r["subject"]): r for r in new.get("results", [])}
    rows: list[RowChange] = []
    for key in list(after) + [k for k in before if k not in after]:
        o, n = before.get(key), after.get(key)
        if o is not None and n is not None:
            kind, change, why = _classify(o, n)
        else:
            kind, change, why = ("new", None, "no such row before") if o is None else ("gone", None, "not in this run")
        row = n or o
        assert row is not None
        rows.append(RowChange(
            check=key[0], subject=key[1], kind=kind, old_verdict=o["verdict"] if o else "—",
            new_verdict=n["verdict"] if n else "—", old_median=_median(o) if o else None,
            new_median=_median(n) if n else None, unit=str((row.get("target") or {}).get("unit", "")),
            change=change, why=why,
        ))
    # regressions first, a worse verdict before a worse figure, the largest move first
    rows.sort(key=lambda r: (ORDER[r.kind], r.old_verdict == r.new_verdict, -abs(r.change or 0.0), r.check,
                             r.subject))
    return Comparison(old_verdict=_verdict(old), new_verdict=_verdict(new), old_started=str(old.get("started")),
                      new_started=str(new.get("started")), rows=tuple(rows), facts=tuple(_fact_changes(old, new)))
