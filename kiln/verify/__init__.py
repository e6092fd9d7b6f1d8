"""Acceptance: conformance checks and real benchmarks judged against the plan's targets (docs/acceptance.md).

Layers: parsers (tool output → typed results), judge (repetitions → verdict), checks (what runs on which
host), runner (selection, applicability, repetitions, progress), report (json/md/html), api (the Python
entry point `kiln verify` calls: kiln/cli/verify.py).
"""

from __future__ import annotations
