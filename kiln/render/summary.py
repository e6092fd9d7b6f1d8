"""The one-screen summary of a plan: the bottleneck, GPUs fed, capacity, checkpoint time, degraded mode and the
warnings that matter, as (label, text) rows every report format renders (text, Markdown, HTML).

It reads the plan JSON (kiln.plan.serialize.plan_to_dict), the contract the report shows, so what the summary
says is what `kiln plan --json` carries.
"""

from __future__ import annotations

from typing import Any

#: Warning paths in the order they matter to someone buying the system: capacity and feeding the GPUs first,
#: then the checkpoint, redundancy and failover, then the rest in the plan's order.
PRIORITY = (
    "lustre.oss.nodes",
    "lustre.mds.mdts",
    "lustre.oss.osts",
    "workload.checkpoint",
    "lustre.failover",
    "lustre.oss.osts.protection",
    "lustre.*.protection",
    "lustre.ha",
)


def duration(seconds: float | None) -> str:
    """A time as people read it: seconds below two minutes, minutes below two hours, then hours, then days."""
    if seconds is None:
        return "never (a target is offline)"
    if seconds < 1:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def count(n: float) -> str:
    """A large count in thousands (k), millions (M) or billions (G)."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n:.0f}"


def _rank(line: str) -> int:
    for i, prefix in enumerate(PRIORITY):
        if line.startswith(prefix):
            return i
    return len(PRIORITY)


def top_warnings(warnings: list[str], n: int = 3) -> list[str]:
    """The `n` warnings that matter most (PRIORITY), stable within a rank."""
    return sorted(warnings, key=_rank)[:n]


def _layer(s: dict[str, Any], name: str) -> dict[str, Any]:
    return next(la for la in s["layers"] if la["name"] == name)


def _bottleneck(s: dict[str, Any]) -> str:
    def one(op: str) -> str:
        name = s["bottleneck"][op]
        how = [f.split(":", 1)[1] for f in _layer(s, name)["factors"] if f.startswith("protection:")]
        return f"{op} {name}{' (' + how[0] + ')' if how else ''} {s['aggregate'][op + '_GBps']:,.1f} GB/s"

    return f"{one('read')} · {one('write')}"


def _fed(s: dict[str, Any]) -> str:
    if not s["gpus_total"]:
        return "no GPUs: storage-only clients"
    return (
        f"{s['gpus_fed']:,} of {s['gpus_total']:,} at {s['demand']['read_per_gpu_GBps']:g} GB/s per GPU, bound by "
        f"{s['gpus_fed_bound']}; read headroom {s['headroom_read']:.2f}×"
    )


def _capacity(c: dict[str, Any] | None) -> str:
    if c is None:
        return "not planned"
    return (
        f"{c['demand_TB']:,.1f} TB of {c['usable_TB']:,.1f} TB usable ({c['fill_percent']:.0f} % full; alerts warn at "
        f"{c['fill_warn_percent']:g} %) · {count(c['files'])} files for {count(c['mdt_inodes'])} MDT inodes"
    )


def _checkpoint(ck: dict[str, Any]) -> str:
    verdict = "MEETS BUDGET" if ck["meets_budget"] else "MISSES BUDGET"
    bound = "≥ " if ck["lower_bound"] else ""
    terms = ", ".join(f"{t['name'].replace('_', ' ')} {duration(t['seconds'])}" for t in ck["terms"])
    return (
        f"{ck['bytes'] / 1e9:,.0f} GB: save {bound}{duration(ck['save_total_s'])} ({terms}"
        f"{'; serialisation not modelled, a lower bound' if ck['lower_bound'] else ''}) against "
        f"{duration(ck['budget_s'])} → {verdict}"
    )


def _degraded(d: dict[str, Any] | None, s: dict[str, Any]) -> str:
    if d is None:
        return "not planned"
    if d["failover"] != "pairs":
        return f"failover {d['failover']}: a down OSS's targets are offline → the demand does NOT hold"
    verdict = "the demand holds" if d["holds"] else "the demand does NOT hold"
    return (
        f"one OSS down: {d['read_GBps']:,.1f} GB/s read, {d['write_GBps']:,.1f} write, checkpoint write "
        f"{duration(d['checkpoint_save_s'])}; one MDS down: {count(d['create_ops_per_s'])} creates/s; "
        f"{d['gpus_fed']:,} of {s['gpus_total']:,} GPUs fed (bound by {d['read_bound']}) → {verdict}"
    )


def summary_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) rows of the summary, from the plan JSON."""
    s = doc["sizing"]
    stage = s["stage_in"]
    rows = [
        ("bottleneck", _bottleneck(s)),
        ("GPUs fed", _fed(s)),
        ("capacity", _capacity(doc.get("capacity"))),
        ("checkpoint", _checkpoint(s["checkpoint"])),
        ("degraded", _degraded(doc.get("degraded"), s)),
        ("stage-in", f"the dataset in {duration(stage['seconds'])} at {stage['GBps']:,.1f} GB/s "
                     f"({stage['bottleneck']})"),
    ]
    warnings = doc["warnings"]
    if warnings:
        shown = top_warnings(warnings)
        more = f", the {len(shown)} that matter most (all under LAYERS)" if len(warnings) > len(shown) else ""
        rows.append(("warnings", f"{len(warnings)}{more}"))
        rows += [("!", w) for w in shown]
    else:
        rows.append(("warnings", "none"))
    return rows
