"""The acceptance suites as pytest items: one test per (check, host or pair) of the plan, through testinfra.

    pytest tests/acceptance/test_acceptance_suites.py --kiln-stack lab -n 4 --dist loadgroup
    KILN_VERIFY_STACK=lab KILN_S3_SECRET_KEY=... pytest tests/acceptance -k "conformance" -n 8

PASS and WARN pass (WARN with a warning), NOT APPLICABLE skips with its reason (fails with --kiln-strict),
FAIL and ERROR fail with the finding and the runbook section. The merged report lands in --kiln-out.
Without a stack the suite is skipped, so a plain `pytest` stays fast.
"""

from __future__ import annotations

import warnings

import pytest
from acceptance_suite import Item, items, run_item, shared_resource, suite_config

from kiln.verify.judge import Verdict


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kiln_item" not in metafunc.fixturenames:
        return
    sc = suite_config(metafunc.config)
    if not sc.stack:
        metafunc.parametrize("kiln_item", [pytest.param(None, marks=pytest.mark.skip(
            reason="no stack: pass --kiln-stack STACK or set KILN_VERIFY_STACK"))], ids=["no-stack"])
        return
    params = []
    for it in items(sc):
        marks = [pytest.mark.xdist_group("kiln-shared")] if shared_resource(it) else []
        params.append(pytest.param(it, marks=marks, id=it.id))
    metafunc.parametrize("kiln_item", params)


def test_acceptance(kiln_item: Item | None, request: pytest.FixtureRequest, worker_id: str) -> None:
    assert kiln_item is not None
    sc = suite_config(request.config)
    res = run_item(sc, kiln_item, worker_id)
    where = f"{res.check} @ {res.subject.label}"
    look = f"\nfirst place to look: {res.runbook}" if res.runbook else ""
    if res.verdict is Verdict.NOT_APPLICABLE:
        if sc.strict:
            pytest.fail(f"{where}: {res.message} (strict: not applicable counts as a failure)")
        pytest.skip(f"{where}: {res.message}")
    if res.verdict in (Verdict.FAIL, Verdict.ERROR):
        details = "\n".join(res.details[:20])
        pytest.fail(f"{res.verdict.value} {where}: {res.message}\n{details}{look}", pytrace=False)
    if res.verdict is Verdict.WARN:
        warnings.warn(f"WARN {where}: {res.message}", stacklevel=1)
