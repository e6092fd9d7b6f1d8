"""Acceptance suites (pytest + testinfra + xdist) and the rolling restart of a three-node object store.

The suite runs with --import-mode=importlib, so this directory (podman_hosts, acceptance_suite) is put on sys.path.
Options of the testinfra suites (test_acceptance_suites.py); each also reads an environment variable, for
runs where this conftest is not an initial one (plain `pytest` from the repository root):

  --kiln-stack STACK        KILN_VERIFY_STACK      stack to verify (the suites are skipped without one)
  --kiln-inventory DIR      KILN_VERIFY_INVENTORY  kiln inventory (default: rendered from the plan)
  --kiln-hosts PATTERN      KILN_VERIFY_HOSTS      host/group globs
  --kiln-only CHECK,...     KILN_VERIFY_ONLY       check ids, prefixes or globs
  --kiln-strict             KILN_VERIFY_STRICT=1   NOT APPLICABLE fails instead of skipping
  --kiln-out DIR            KILN_VERIFY_OUT        report directory (default reports/pytest-<stack>)
  --kiln-option KEY=VALUE   KILN_VERIFY_OPTIONS    run options, comma-separated in the variable

    pytest tests/acceptance --kiln-stack lab -n 4 --dist loadgroup
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kiln", "kiln acceptance suites")
    g.addoption("--kiln-stack", default=None)
    g.addoption("--kiln-inventory", default=None)
    g.addoption("--kiln-hosts", default=None)
    g.addoption("--kiln-only", default=None)
    g.addoption("--kiln-strict", action="store_true", default=False)
    g.addoption("--kiln-out", default=None)
    g.addoption("--kiln-option", action="append", default=[])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """On the controller (not on xdist workers): merge the workers' rows into report.json/.md/.html."""
    if hasattr(session.config, "workerinput"):
        return
    from acceptance_suite import write_merged_report

    write_merged_report(session.config)
