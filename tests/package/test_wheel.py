"""kiln as people install it: build the wheel, install it into a fresh virtualenv and run `kiln` from
directories that hold a stack file and nothing of the checkout. Its output must equal the golden files the
checkout is tested against (so templates and knowledge data ship in the wheel), and errors stay one line.

Select with `-m package`. The build backend and kiln's dependencies come from PyPI once, into
.cache/wheels/, and from there (offline) afterwards (the `kiln_wheel` and `wheel_venv` fixtures, tests/conftest.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import user_env

pytestmark = pytest.mark.package

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(scope="module")
def venv(wheel_venv: Callable[[str], Path]) -> Path:
    """bin/ of a fresh virtualenv with the wheel built from this tree installed (no extras)."""
    return wheel_venv("")


def kiln(bin_dir: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir / "kiln"), *args], capture_output=True, text=True, cwd=cwd,
                          env=user_env(**env), check=False, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory holding only stacks/Pulumi.dev.yaml."""
    (tmp_path / "stacks").mkdir()
    shutil.copy2(ROOT / "stacks" / "Pulumi.dev.yaml", tmp_path / "stacks" / "Pulumi.dev.yaml")
    return tmp_path


def test_validate_plan_inventory_render_from_a_stacks_dir(venv: Path, project: Path) -> None:
    r = kiln(venv, project, "validate", "dev")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("dev: spec is valid (5 hosts, 16 GPUs")

    r = kiln(venv, project, "plan", "dev")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (GOLDEN / "plan" / "dev.report.txt").read_text()

    r = kiln(venv, project, "plan", "dev", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["stack"] == "dev" and doc["schema"] == "kiln.plan/v2"
    assert doc == json.loads((GOLDEN / "plan" / "dev.json").read_text())

    r = kiln(venv, project, "inventory", "dev")
    assert r.returncode == 0, r.stderr
    hosts = yaml.safe_load((project / "inventory" / "dev" / "hosts.yml").read_text())
    assert hosts["all"]["children"], hosts

    r = kiln(venv, project, "render", "dev")
    assert r.returncode == 0, r.stderr
    rendered = project / "rendered" / "dev"
    golden = sorted(p.name for p in (GOLDEN / "dev").glob("*.yaml"))
    assert sorted(p.name for p in rendered.iterdir()) == golden
    for name in golden:
        assert (rendered / name).read_text() == (GOLDEN / "dev" / name).read_text(), name


def test_stack_given_as_a_path_in_a_bare_directory(venv: Path, tmp_path: Path) -> None:
    shutil.copy2(ROOT / "stacks" / "Pulumi.dev.yaml", tmp_path / "Pulumi.dev.yaml")
    r = kiln(venv, tmp_path, "plan", "./Pulumi.dev.yaml", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["stack"] == "dev"


def test_stacks_dir_option_and_environment(venv: Path, project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    stacks = str(project / "stacks")
    assert kiln(venv, elsewhere, "validate", "dev", "--stacks-dir", stacks).returncode == 0
    assert kiln(venv, elsewhere, "--stacks-dir", stacks, "validate", "dev").returncode == 0
    assert kiln(venv, elsewhere, "validate", "dev", KILN_STACKS_DIR=stacks).returncode == 0


@pytest.mark.parametrize("command", ["validate", "plan", "inventory", "render", "verify"])
def test_unknown_stack_exits_2_naming_where_it_looked(venv: Path, project: Path, command: str) -> None:
    r = kiln(venv, project, command, "nope", KILN_STACKS_DIR="/nonexistent/stacks")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert "/nonexistent/stacks/Pulumi.nope.yaml ($KILN_STACKS_DIR)" in r.stderr
    assert f"{project / 'stacks' / 'Pulumi.nope.yaml'} (./stacks of the working directory)" in r.stderr
    assert "--stacks-dir DIR" in r.stderr and "stacks there: dev" in r.stderr
    assert not (project / "inventory").exists() and not (project / "rendered").exists()


def test_unexpected_error_is_one_line_and_debug_shows_the_traceback(venv: Path, project: Path) -> None:
    (project / "a-file").write_text("not a directory\n")
    r = kiln(venv, project, "inventory", "dev", "--out", "a-file/inventory")  # mkdir under a regular file
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("kiln: error: NotADirectoryError: ")
    assert lines[0].endswith("(run with -v/--debug for the traceback)")

    r = kiln(venv, project, "-v", "inventory", "dev", "--out", "a-file/inventory")
    assert r.returncode == 1 and "Traceback (most recent call last)" in r.stderr


def test_lab_from_a_wheel_says_it_needs_a_checkout(venv: Path, project: Path) -> None:
    r = kiln(venv, project, "lab", "status")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "the lab needs a kiln checkout" in r.stderr and "KILN_CHECKOUT=DIR" in r.stderr
