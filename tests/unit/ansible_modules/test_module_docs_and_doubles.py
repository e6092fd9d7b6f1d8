"""The modules' embedded documentation parses, and the doubles say what they are."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kiln_ansible_support import DOUBLES, MODULE_UTILS, MODULES, collection_env

ANSIBLE_DOC = Path(sys.executable).parent / "ansible-doc"
MODULE_NAMES = ["lustre_target", "lustre_param", "lustre_layout", "lustre_quota"]
DOUBLE_NAMES = ["mkfs.lustre", "tunefs.lustre", "blkid", "wipefs", "lctl", "lfs", "zpool", "zfs", "mdadm"]
#: The doubles of host_probe's tools, and what each is not.
HOST_DOUBLES = {"systemctl": "systemd", "systemd-detect-virt": "systemd", "dpkg-query": "dpkg", "modprobe": "kmod"}


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_ansible_doc_parses_documentation_examples_and_return(name: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(ANSIBLE_DOC), "-j", f"kiln.cluster.{name}"],
        capture_output=True,
        text=True,
        env=collection_env(tmp_path),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)[f"kiln.cluster.{name}"]
    assert doc["doc"]["module"] == name
    assert doc["examples"].strip()
    assert doc["return"]


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_module_supports_check_mode_and_returns_diff(name: str) -> None:
    source = (MODULES / f"{name}.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    keywords = {kw.arg: kw.value for call in calls for kw in call.keywords}
    assert isinstance(keywords.get("supports_check_mode"), ast.Constant)
    assert keywords["supports_check_mode"].value is True
    assert "diff" in keywords, f"{name} must pass diff= to exit_json"
    assert "from ansible_collections.kiln.cluster.plugins.module_utils.lustre_" in source


@pytest.mark.parametrize("lib", ["lustre_common", "lustre_target", "lustre_param", "lustre_layout"])
def test_module_utils_is_pure(lib: str) -> None:
    source = (MODULE_UTILS / f"{lib}.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    relative = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level}
    assert imported <= {"__future__", "json", "re", "dataclasses", "typing"}
    # The library files import only each other (relatively: the same text is kiln.lustre.* and
    # ansible_collections.kiln.cluster.plugins.module_utils.*).
    assert relative <= {"lustre_common", "lustre_target", "lustre_param", "lustre_layout"}


@pytest.mark.parametrize("name", DOUBLE_NAMES)
def test_double_declares_itself_and_is_executable(name: str) -> None:
    path = DOUBLES / name
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("#!")
    assert lines[1] == "# TEST DOUBLE: records calls; not Lustre"
    assert os.access(path, os.X_OK)


@pytest.mark.parametrize("name", sorted(HOST_DOUBLES))
def test_host_probe_double_declares_itself_and_is_executable(name: str) -> None:
    path = DOUBLES / name
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("#!")
    assert lines[1] == f"# TEST DOUBLE: records calls; not {HOST_DOUBLES[name]}"
    assert os.access(path, os.X_OK)
