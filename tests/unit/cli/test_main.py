"""The `kiln` entry point (kiln/cli/__init__.py): shared options, exit codes, one-line errors, --version."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

import kiln
from kiln.cli import EXIT_SPEC, main, parser

ROOT = Path(__file__).resolve().parents[3]


def _installed_version() -> str:
    try:
        return metadata.version("kiln")
    except metadata.PackageNotFoundError:
        return kiln.__version__


def test_options_before_or_after_the_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stacks = str(ROOT / "stacks")
    for argv in (["--stacks-dir", stacks, "validate", "dev"], ["validate", "dev", "--stacks-dir", stacks]):
        assert main(argv) == 0
        assert capsys.readouterr().out.startswith("dev: spec is valid")
    args = parser().parse_args(["-v", "plan", "dev", "--stacks-dir", "/s"])
    assert args.debug and args.stacks_dir == "/s"
    args = parser().parse_args(["--stacks-dir", "/s", "plan", "dev", "--debug"])
    assert args.debug and args.stacks_dir == "/s"


def test_unexpected_error_is_one_line_unless_debug(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    argv = ["inventory", "lab", "--out", str(tmp_path / "file" / "inv")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("kiln: error: NotADirectoryError") and "(run with -v/--debug for the traceback)" in err
    assert main(["-v", *argv]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_interrupt_exits_130_with_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import kiln.cli.plan

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(kiln.cli.plan, "cmd_validate", interrupted)
    assert main(["validate", "lab"]) == 130
    assert capsys.readouterr().err == "kiln: error: interrupted\n"


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"kiln {_installed_version()}\n"
    r = subprocess.run([sys.executable, "-m", "kiln.cli", "--version"], capture_output=True, text=True, cwd=ROOT,
                       check=False)
    assert (r.returncode, r.stdout) == (0, f"kiln {_installed_version()}\n"), r.stderr


def test_version_falls_back_to_the_package_constant(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"kiln {kiln.__version__}\n"


@pytest.mark.parametrize("argv", [
    ["validate", "{stack}"],
    ["plan", "{stack}", "--json"],
    ["inventory", "{stack}", "--out", "{out}"],
    ["render", "{stack}", "--out", "{out}"],
    ["monitoring", "{stack}", "--out", "{out}"],
    ["verify", "{stack}", "--out", "{out}"],
    ["lab", "status", "--stack", "{stack}"],
    ["data", "stage", "{stack}", "corpus", "--state-dir", "{out}"],
], ids=lambda argv: argv[0])
def test_every_command_exits_spec_on_a_bad_spec(
        argv: list[str], tmp_path: Path, stack: Any, capsys: pytest.CaptureFixture[str]) -> None:
    data = stack("prod-h100")
    data["lustre"]["oss"]["nodes"] = 3
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text(yaml.safe_dump({"config": {"kiln:cluster": data}}))
    out = tmp_path / "out"
    assert main([a.format(stack=path, out=out) for a in argv]) == EXIT_SPEC
    captured = capsys.readouterr()
    assert "lustre.oss.nodes = 3" in captured.err and "fix:" in captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert not out.exists()
