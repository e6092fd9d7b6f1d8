"""`kiln verify` (kiln/cli/verify.py): registration and bad options."""

from __future__ import annotations

import argparse

import pytest

from kiln.cli import parser
from kiln.cli import verify as cli


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
