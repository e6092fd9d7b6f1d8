"""`kiln data` (kiln/cli/data.py) where no lake is needed: refusals with the fix, and the status table.

The moving commands against a real SeaweedFS are tested in tests/dataflow/test_mover.py (`test_cli_*`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kiln.cli import EXIT_FAIL, EXIT_OK, main
from kiln.dataflow import progress


def test_a_missing_secret_is_one_line_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KILN_S3_SECRET_KEY", raising=False)
    argv = ["data", "stage", "lab", "corpus", "--state-dir", str(tmp_path / "state"),
            "--mount-point", str(tmp_path / "lustre")]
    assert main(argv) == EXIT_FAIL
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "KILN_S3_SECRET_KEY is not set; fix: export the S3 secret of kiln" in captured.err
    assert not (tmp_path / "lustre").exists()


@pytest.mark.parametrize(("argv", "words"), [
    (["data", "stage", "lab", "nope"], "no link 'nope' in lab; fix: use one of corpus"),
    (["data", "models", "lab", "--index", "9", "--filer", "f:8888", "--relay", "/r"],
     "dataflow.models[9] does not exist; fix: use 0.."),
])
def test_an_unknown_link_or_model_names_the_choices(
        argv: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--state-dir", str(tmp_path)]) == EXIT_FAIL
    assert words in capsys.readouterr().err


def test_export_of_a_link_without_export_policy_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("boto3")  # the mover's S3 client is made (it contacts nothing) before the link is checked
    monkeypatch.setenv("KILN_S3_SECRET_KEY", "not-used-nothing-is-contacted")
    assert main(["data", "export", "lab", "--state-dir", str(tmp_path)]) == EXIT_FAIL
    assert "no exportable link None; fix: use one of" in capsys.readouterr().err


def test_status_prints_a_table_or_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    assert main(["data", "status", "--state-dir", str(state), "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == []
    progress.write(progress.Status(link="corpus", direction="import", state="done", files_done=3, files_total=3),
                   state, None)
    assert main(["data", "status", "--state-dir", str(state)]) == EXIT_OK
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["link", "direction", "state"]
    assert row.split()[:5] == ["corpus", "import", "done", "3/3", "files"]
