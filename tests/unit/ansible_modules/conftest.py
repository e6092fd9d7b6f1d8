"""Fixtures for the tests of kiln's Lustre Ansible modules (see kiln_ansible_support)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The suite runs with --import-mode=importlib, so this directory (kiln_ansible_support)
# and the module_utils directory (kiln_lustre) are put on sys.path here.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kiln_ansible_support import Doubles, ModuleRunner


@pytest.fixture
def doubles(tmp_path: Path) -> Doubles:
    return Doubles(state_path=tmp_path / "double-state.json", log_path=tmp_path / "double-calls.jsonl")


@pytest.fixture
def run_module(tmp_path: Path, doubles: Doubles) -> ModuleRunner:
    """The module's main() in this process (the tests about the module's decisions)."""
    return ModuleRunner(tmp_path=tmp_path, doubles=doubles, via="python")


@pytest.fixture
def run_module_ansible(tmp_path: Path, doubles: Doubles) -> ModuleRunner:
    """The module through the ``ansible`` CLI (AnsiballZ, the collection, check mode and diff end to end)."""
    return ModuleRunner(tmp_path=tmp_path, doubles=doubles, via="ansible")
