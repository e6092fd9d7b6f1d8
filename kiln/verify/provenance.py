"""What produced a report: its schema, kiln's version and a digest of the code that measures and judges (a
checkout's version string stays the same while its checks change), and the one time format reports use."""

from __future__ import annotations

import datetime as dt
import hashlib
from functools import cache
from pathlib import Path
from typing import Any

from kiln.spec.models import Acceptance

REPORT_SCHEMA = "kiln.verify.report/v2"
_KILN = Path(__file__).resolve().parents[1]


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("kiln")
    except Exception:  # not installed: running from a checkout
        return "unknown"


KILN_VERSION = _version()


@cache
def kiln_build() -> str:
    """A digest of kiln/verify/ and the Lustre library it parses with: another build measures or judges
    differently, so its figures are not reused."""
    h = hashlib.sha256()
    for path in sorted([*(_KILN / "verify").rglob("*.py"), *(_KILN / "lustre").glob("*.py")]):
        h.update(path.relative_to(_KILN).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def acceptance_dict(a: Acceptance) -> dict[str, Any]:
    """The protocol a report's benchmarks ran with."""
    return {"repetitions": a.repetitions, "warmup": a.warmup, "cv_limit": a.cv_limit,
            "fio_size_factor": a.fio_size_factor}


def iso(t: float) -> str:
    """An epoch time as the reports write it: UTC, ISO 8601, seconds."""
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds")
