"""The alerts an independent review found wrong, each held by its promtool cases (firing, silent, clearing): the
cases run against the rule as it was must fail, so they prove the fix. Skips with the reason without promtool."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kiln.cli.common import load, write_files
from kiln.node import health
from kiln.plan.monitoring import XID_NOT_HARDWARE
from kiln.render.monitoring import render_monitoring

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool absent (Debian package prometheus)")

#: The expressions as they were; the new cases must fail against each.
BEFORE = {
    "GpuXidError": "DCGM_FI_DEV_XID_ERRORS > 0",
    "GpuUncorrectableMemoryError": "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS > 0 or DCGM_FI_DEV_ROW_REMAP_FAILURE > 0",
    "LustreTargetSpaceFilling": "1 - lustre_target_free_bytes / lustre_target_capacity_bytes > 0.8",
    "LustreTargetNotOnPlannedServer": None,  # each rule's absent(...) without the exporter's up guard
    "DataMoverFailing": "kiln_dataflow_up == 0",  # the obvious rule, which a pass in progress resets
}


def _rendered(tmp_path: Path, stack: str = "dev") -> tuple[dict[str, object], Path]:
    _, plan = load(stack)
    write_files(tmp_path, render_monitoring(plan))
    path = tmp_path / "prometheus/rules/kiln.rules.yml"
    return yaml.safe_load(path.read_text()), path


def _promtool(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, "test", "rules", "rules/kiln.rules.test.yml"], cwd=tmp_path / "prometheus",
                          capture_output=True, text=True, timeout=120, check=False)


@needs_promtool
def test_the_cases_fail_on_each_rule_as_it_was(tmp_path: Path) -> None:
    """One promtool run with every rule put back as it was: each one's cases fail (the rendered cases pass on the
    rules as they are: test_monitoring.py runs promtool on every stack)."""
    rules, path = _rendered(tmp_path)
    for g in rules["groups"]:  # type: ignore[attr-defined]
        for r in g["rules"]:
            if r.get("alert") in BEFORE:
                r["expr"] = BEFORE[r["alert"]] or r["expr"].split(" and on(host)")[0]
    path.write_text(yaml.safe_dump(rules))
    res = _promtool(tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert {a for a in BEFORE if f"alertname: {a}" in out} == set(BEFORE), out[-3000:]


@needs_promtool
def test_every_changed_alert_has_firing_silent_and_clearing_cases(tmp_path: Path) -> None:
    _rendered(tmp_path)
    tests = yaml.safe_load((tmp_path / "prometheus/rules/kiln.rules.test.yml").read_text())
    for alert in BEFORE:
        evals = [c for t in tests["tests"] for c in t["alert_rule_test"] if c["alertname"] == alert]
        fired = [c for c in evals if c["exp_alerts"]]
        silent = [c for c in evals if not c["exp_alerts"]]
        assert fired and silent, alert
        # a clearing case: one test whose alert fires and is silent again later
        assert any([bool(c["exp_alerts"]) for c in t["alert_rule_test"] if c["alertname"] == alert] == [True, False]
                   for t in tests["tests"]), alert
        # a neighbour that must stay silent beside every firing one: the expected alerts are the faulty host's only
        assert all(a["exp_labels"].get("host") != "ok-host" for c in fired for a in c["exp_alerts"]), alert


def test_the_alert_and_kiln_health_agree_on_which_xids_are_hardware() -> None:
    """kiln/node/health.py runs alone on the nodes and keeps its own copy of NVIDIA's listing: the same sets."""
    assert XID_NOT_HARDWARE == health.XID_APPLICATION | health.XID_INFORMATIONAL
