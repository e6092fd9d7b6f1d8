"""`kiln verify` (kiln/cli/verify.py): registration and bad options."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kiln.cli import parser
from kiln.cli import verify as cli
from kiln.verify.checks.options import Options


def test_cli_registers_and_rejects_bad_options(caplog: pytest.LogCaptureFixture) -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers()
    cli.register(sub)
    args = ap.parse_args(["verify", "lab", "--only", "conformance", "--strict", "-n", "2", "--option", "bogus=1"])
    assert args.func(args) == 2
    assert "unknown option 'bogus'" in caplog.text  # diagnostics go through logging (kiln.cli.main sets it up)


def test_kiln_cli_knows_verify() -> None:
    args = parser().parse_args(["verify", "lab", "--hosts", "gpu*", "--out", "/tmp/x"])
    assert args.hosts == "gpu*" and args.func.__name__ == "cmd_verify"


@pytest.mark.parametrize("full", [False, True])
def test_a_default_run_reuses_the_newest_earlier_report_and_full_reuses_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full: bool) -> None:
    """Without --out the run reuses from the newest reports/verify-<stack>-*/ holding a report.json; --full measures
    everything (no earlier report, and Options.full set, which the runner reads: kiln/verify/runner.py)."""
    monkeypatch.chdir(tmp_path)
    for name, has_report in (("verify-lab-20261101-000000", True), ("verify-lab-20261102-000000", True),
                             ("verify-lab-20261103-000000", False), ("verify-dev-20261104-000000", True)):
        (tmp_path / "reports" / name).mkdir(parents=True)
        if has_report:
            (tmp_path / "reports" / name / "report.json").write_text("{}")
    seen: list[Options] = []

    def fake_run(args: argparse.Namespace, out: Path, opts: Options) -> None:
        seen.append(opts)
        raise ValueError("stopped by the test")

    monkeypatch.setattr(cli, "_run", fake_run)
    args = parser().parse_args(["verify", "lab", *(["--full"] if full else [])])
    assert args.func(args) == 2 and len(seen) == 1
    if full:
        assert seen[0].full and seen[0].reuse_from is None
    else:
        assert not seen[0].full and seen[0].reuse_from == str(Path("reports") / "verify-lab-20261102-000000")
