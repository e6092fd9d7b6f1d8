"""How the report groups its rows: by layer (the check id's first word: fabric, storage, gpu, ...), and NOT
APPLICABLE rows collapsed into one line per reason, so the rows that matter are not buried."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kiln.verify.judge import Verdict
from kiln.verify.verdict import Evidence, evidence

if TYPE_CHECKING:
    from kiln.verify.runner import Result

#: Layers in report order, bottom of the stack first, with their titles. A check of another area (a later one)
#: gets a layer of its own after these, titled from its id.
LAYERS: dict[str, str] = {
    "fabric": "Fabric",
    "network": "Network",
    "storage": "Storage",
    "objectstore": "Object store",
    "gpu": "GPU",
    "dataflow": "Data flow",
    "stream": "Token stream",
    "monitoring": "Monitoring",
    "health": "Node health",
    "conformance": "Conformance",
    "security": "Security",
}


def layer_of(check: str) -> str:
    return check.split(".", 1)[0]


def layer_title(layer: str) -> str:
    return LAYERS.get(layer) or (layer.upper() if len(layer) <= 3 else layer.capitalize())


def by_layer(results: Iterable[Result]) -> list[tuple[str, list[Result]]]:
    """(layer, its rows in the given order), in LAYERS order, then other layers by name."""
    groups: dict[str, list[Result]] = {}
    for r in results:
        groups.setdefault(layer_of(r.check), []).append(r)
    order = list(LAYERS) + sorted(set(groups) - set(LAYERS))
    return [(k, groups[k]) for k in order if k in groups]


_PREFIX = re.compile(r"^not applicable( on this host)?:\s*")


def reason_of(r: Result) -> str:
    """A row's reason without the verdict's prefix and without a leading '<host>: ' of its own subject."""
    text = _PREFIX.sub("", r.message)
    for h in r.subject.hosts:
        if text.startswith(f"{h}: "):
            return text[len(h) + 2:]
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class Collapsed:
    """NOT APPLICABLE rows that share a reason (and what they mean for the sign-off), as one line."""

    reason: str
    evidence: Evidence
    checks: tuple[str, ...]
    subjects: tuple[str, ...]
    rows: int


def collapse(results: Sequence[Result]) -> list[Collapsed]:
    """The NOT APPLICABLE rows of `results`, one entry per (reason, evidence), in order of first appearance."""
    groups: dict[tuple[str, Evidence], list[Result]] = {}
    for r in results:
        if r.verdict is Verdict.NOT_APPLICABLE:
            groups.setdefault((reason_of(r), evidence(r)), []).append(r)
    return [
        Collapsed(reason=reason, evidence=ev, rows=len(rows),
                  checks=tuple(dict.fromkeys(r.check for r in rows)),
                  subjects=tuple(dict.fromkeys(r.subject.label for r in rows)))
        for (reason, ev), rows in groups.items()
    ]
