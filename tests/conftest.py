"""Shared fixtures: the stacks, a helper to build variants of a spec, and kiln installed from its wheel."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.plugins.loader import filter_loader, init_plugin_loader, lookup_loader, test_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

ROOT = Path(__file__).resolve().parents[1]
WHEEL_CACHE = ROOT / ".cache" / "wheels"
# What the sdist of kiln needs to build its wheel (pyproject.toml's readme and license files, the collection's files
# that kiln/collection links to).
WHEEL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "kiln", "galaxy.yml", "meta", "plugins", "playbooks",
                 "roles")
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


def stack_data(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())
    return copy.deepcopy(doc["config"]["kiln:cluster"])


@pytest.fixture
def lab_data() -> dict[str, Any]:
    return stack_data("lab")


@pytest.fixture
def prod_data() -> dict[str, Any]:
    return stack_data("prod-h100")


@pytest.fixture
def stack() -> Any:
    """stack(name) → a deep copy of that stack's kiln:cluster object, to mutate in a test."""
    return stack_data


def init_ansible_plugins() -> None:
    """What ansible-playbook does first, with this checkout's collection on the path (as ansible.cfg has it), from a
    clean loader: the collection finder then owns ansible_collections.* for the rest of the session. Tests collected
    earlier may have imported the collection's plugins as plain modules (tests/unit/ansible_modules/kiln_filters.py),
    without the metadata the finder needs, or configured the loader without this collection: both are undone."""
    if AnsibleCollectionConfig.collection_finder is not None:
        _AnsibleCollectionFinder._remove()
    for name in [n for n in sys.modules if n == "ansible_collections" or n.startswith("ansible_collections.")]:
        del sys.modules[name]
    for plugin_loader in (filter_loader, lookup_loader, test_loader):
        plugin_loader._clear_caches()
    init_plugin_loader([str(ROOT / "ansible" / "collections")])


def user_env(**extra: str) -> dict[str, str]:
    """The user's environment: without this checkout on the import path or a stacks directory preset."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KILN_STACKS_DIR", "KILN_CHECKOUT")}
    return {**env, **extra}


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The user's environment: with this checkout on PYTHONPATH pip would take its kiln as already installed.
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args],
                          capture_output=True, text=True, check=False, env=user_env())


def _install(python: Path, *requirements: str) -> None:
    """Install from the wheel cache; on a miss fill the cache from PyPI once and install from it. --no-compile:
    the `ansible` package's 40,000 files are byte-compiled on first import instead, of the few that are imported."""
    offline = ("install", "--no-compile", "--no-index", "--find-links", str(WHEEL_CACHE), *requirements)
    if _pip(python, *offline).returncode == 0:
        return
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    got = _pip(python, "download", "--dest", str(WHEEL_CACHE), *requirements)
    assert got.returncode == 0, f"pip download into {WHEEL_CACHE} failed:\n{got.stderr}"
    for own in WHEEL_CACHE.glob("kiln-*.whl"):  # the cache holds third-party wheels only, never a stale kiln
        own.unlink()
    done = _pip(python, *offline)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="session")
def kiln_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of this tree's sources (links followed, as an sdist holds them)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in WHEEL_SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "venv", str(work / "build-venv")], check=True)
    python = work / "build-venv" / "bin" / "python"
    _install(python, *tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"])
    built = _pip(python, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(work / "dist"), str(src))
    assert built.returncode == 0, built.stderr
    (wheel,) = (work / "dist").glob("kiln-*.whl")
    return wheel


@pytest.fixture(scope="session")
def wheel_venv(kiln_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """wheel_venv(extras) → bin/ of a fresh virtualenv with `kiln[extras]` installed from the wheel (one per extras)."""
    made: dict[str, Path] = {}

    def venv(extras: str = "") -> Path:
        if extras not in made:
            work = tmp_path_factory.mktemp(f"venv-{extras or 'base'}")
            subprocess.run([sys.executable, "-m", "venv", str(work)], check=True)
            python = work / "bin" / "python"
            _install(python, f"{kiln_wheel}[{extras}]" if extras else str(kiln_wheel))
            where = subprocess.run([str(python), "-c", "import kiln; print(kiln.__file__)"], capture_output=True,
                                   text=True, check=True, cwd=work, env=user_env())
            assert str(work) in where.stdout, f"kiln is not imported from the wheel: {where.stdout}"
            made[extras] = python.parent
        return made[extras]

    return venv
