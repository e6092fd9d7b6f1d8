"""The lab survives being killed while it writes state, and podman timeouts are clean errors."""

from __future__ import annotations

import io
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kiln.lab import lifecycle, podman
from kiln.lab.lifecycle import Lab, _write_if_changed


def test_a_write_killed_halfway_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.txt"
    _write_if_changed(path, "old\n")

    def killed(src: str, dst: str) -> None:
        raise KeyboardInterrupt  # the run is interrupted between writing the temporary file and the rename

    monkeypatch.setattr(lifecycle.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        _write_if_changed(path, "new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["state.txt"]  # no temporary file left behind


def test_an_empty_secret_file_is_regenerated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab.load("lab")
    lab.root = tmp_path  # messages name paths relative to the checkout
    lab.state = tmp_path / "state"
    lab.out = io.StringIO()
    lab.secret_file.parent.mkdir(parents=True)
    lab.secret_file.write_text("")  # what an older kiln left when it was killed mid-write
    lab.inventory()
    env = lab.secret_env()
    assert env["KILN_S3_ACCESS_KEY"] == lab.plan.objectstore.access_key_id
    assert len(env["KILN_S3_SECRET_KEY"]) >= 30
    assert stat.S_IMODE(os.stat(lab.secret_file).st_mode) == 0o600
    before = lab.secret_file.read_text()
    lab.inventory()  # a complete secret is kept
    assert lab.secret_file.read_text() == before


def test_a_podman_timeout_is_a_clean_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(*args: Any, **kwargs: Any) -> None:
        raise subprocess.TimeoutExpired(cmd=args[0], timeout=kwargs.get("timeout", 1))

    monkeypatch.setattr(podman.shutil, "which", lambda name: "/usr/bin/podman")
    monkeypatch.setattr(podman.subprocess, "run", slow)
    with pytest.raises(podman.PodmanError, match="did not finish within 5 s"):
        podman._run(["ps"], timeout=5)
