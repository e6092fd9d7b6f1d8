"""kiln as people install it: build the wheel, install it into a fresh virtualenv and run `kiln` from
directories that hold a stack file and nothing of the checkout. Its output must equal the golden files the
checkout is tested against (so templates and knowledge data ship in the wheel), and errors stay one line.

Select with `-m package`. The build backend and kiln's dependencies come from PyPI once, into
.cache/wheels/, and from there (offline) afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.package

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "wheels"
GOLDEN = ROOT / "tests" / "golden"
# What the sdist of kiln needs to build its wheel (pyproject.toml's readme and license files included).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "kiln")


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The user's environment: with this checkout on PYTHONPATH pip would take its kiln as already installed.
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args],
                          capture_output=True, text=True, check=False, env=_env())


def _install(python: Path, *requirements: str) -> None:
    """Install from the wheel cache; on a miss fill the cache from PyPI once and install from it."""
    offline = ("install", "--no-index", "--find-links", str(CACHE), *requirements)
    if _pip(python, *offline).returncode == 0:
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    got = _pip(python, "download", "--dest", str(CACHE), *requirements)
    assert got.returncode == 0, f"pip download into {CACHE} failed:\n{got.stderr}"
    for own in CACHE.glob("kiln-*.whl"):  # the cache holds third-party wheels only, never a stale kiln
        own.unlink()
    done = _pip(python, *offline)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel built from this tree installed; returns its bin/ directory."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
    python = work / "venv" / "bin" / "python"
    build_requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    _install(python, *build_requires)
    built = _pip(python, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(work / "dist"), str(src))
    assert built.returncode == 0, built.stderr
    (wheel,) = (work / "dist").glob("kiln-*.whl")
    _install(python, str(wheel))
    where = subprocess.run([str(python), "-c", "import kiln; print(kiln.__file__)"], capture_output=True, text=True,
                           check=True, cwd=work, env=_env())
    assert str(work / "venv") in where.stdout, f"kiln is not imported from the wheel: {where.stdout}"
    return python.parent


def _env(**extra: str) -> dict[str, str]:
    """The user's environment without this checkout on the import path or a stacks directory preset."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KILN_STACKS_DIR", "KILN_CHECKOUT")}
    return {**env, **extra}


def kiln(bin_dir: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir / "kiln"), *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(**env), check=False, timeout=120)


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
