"""kiln_sysctl against a directory standing in for /proc/sys (in process; the first test through ``ansible -m``)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kiln_ansible_support import MODULES, ModuleRunner, collection_env

ANSIBLE_DOC = Path(sys.executable).parent / "ansible-doc"


def proc_tree(root: Path, values: dict[str, str]) -> Path:
    for name, value in values.items():
        path = root / name.replace(".", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return root


def read(root: Path, name: str) -> str:
    return (root / name.replace(".", "/")).read_text()


def args(root: Path, sysctls: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"sysctls": sysctls, "proc_sys": str(root), **extra}


RMEM = {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 16777216", "namespaced": True, "reason": "r"}
SWAP = {"name": "vm.swappiness", "value": 1, "namespaced": False, "reason": "r"}


def test_sets_only_what_differs_then_settles(run_module_ansible: ModuleRunner, tmp_path: Path) -> None:
    root = proc_tree(tmp_path / "sys", {"net.ipv4.tcp_rmem": "4096\t131072\t6291456", "vm.swappiness": "1"})
    first = run_module_ansible("kiln_sysctl", args(root, [RMEM, SWAP]))
    assert first.get("failed") is not True, first
    assert first["changed"] is True
    assert first["changed_names"] == ["net.ipv4.tcp_rmem"]
    assert first["previous"] == {"net.ipv4.tcp_rmem": "4096 131072 6291456", "vm.swappiness": "1"}
    assert read(root, "net.ipv4.tcp_rmem").split() == ["4096", "87380", "16777216"]
    assert [r["applied"] for r in first["results"]] == [True, True]
    assert first["results"][1] == {"name": "vm.swappiness", "value": "1", "namespaced": False, "applied": True,
                                   "not_applicable": ""}

    second = run_module_ansible("kiln_sysctl", args(root, [RMEM, SWAP]))
    assert second["changed"] is False and second["changed_names"] == []
    assert second["results"] == first["results"]


def test_check_mode_reports_the_change_and_writes_nothing(run_module: ModuleRunner, tmp_path: Path) -> None:
    root = proc_tree(tmp_path / "sys", {"net.ipv4.tcp_rmem": "4096 131072 6291456"})
    planned = run_module("kiln_sysctl", args(root, [RMEM]), check=True)
    assert planned["changed"] is True and planned["changed_names"] == ["net.ipv4.tcp_rmem"]
    assert "net.ipv4.tcp_rmem = 4096 87380 16777216" in planned["diff"]["after"]
    assert read(root, "net.ipv4.tcp_rmem").split() == ["4096", "131072", "6291456"]


def test_a_missing_key_fails_on_a_host(run_module: ModuleRunner, tmp_path: Path) -> None:
    root = proc_tree(tmp_path / "sys", {"vm.swappiness": "1"})
    result = run_module("kiln_sysctl", args(root, [RMEM, SWAP]))
    assert result["failed"] is True
    assert "net.ipv4.tcp_rmem does not exist on this kernel" in result["msg"]


def test_in_a_container_host_global_and_missing_keys_are_not_applicable(
    run_module: ModuleRunner, tmp_path: Path
) -> None:
    root = proc_tree(tmp_path / "sys", {"vm.swappiness": "60"})
    result = run_module(
        "kiln_sysctl", args(root, [RMEM, SWAP], in_container=True, container_kind="podman",
                            sysctl_file="/etc/sysctl.d/90-kiln.conf")
    )
    assert result.get("failed") is not True, result
    assert result["changed"] is False
    rmem, swap = result["results"]
    assert not rmem["applied"] and rmem["not_applicable"] == (
        "net.ipv4.tcp_rmem does not exist in this container's network namespace"
    )
    assert not swap["applied"] and "is not namespaced" in swap["not_applicable"]
    assert "(podman)" in swap["not_applicable"] and "/etc/sysctl.d/90-kiln.conf" in swap["not_applicable"]
    assert read(root, "vm.swappiness").strip() == "60", "a host-global key must not be touched from a container"


def test_a_bad_item_is_refused(run_module: ModuleRunner, tmp_path: Path) -> None:
    result = run_module("kiln_sysctl", args(tmp_path, [{"name": "vm.swappiness", "value": ""}]))
    assert result["failed"] is True and "needs a name and a value" in result["msg"]


def load_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kiln_sysctl_under_test", MODULES / "kiln_sysctl.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_read_only_entry_in_a_container_is_not_applicable(tmp_path: Path) -> None:
    # Root may write any file, so a read-only /proc/sys is simulated through the probe the module takes.
    mod = load_module()
    path = proc_tree(tmp_path, {"net.core.somaxconn": "4096"}) / "net/core/somaxconn"
    item = {"name": "net.core.somaxconn", "value": 4096, "namespaced": True}
    why = mod.not_applicable(item, path, True, "podman", "/f", writable=lambda p: False)
    assert why == "net.core.somaxconn: /proc/sys is read-only in this container (podman)"
    assert mod.not_applicable(item, path, True, "podman", "/f", writable=lambda p: True) == ""
    assert mod.not_applicable(item, path, False, "podman", "/f", writable=lambda p: False) == ""


def test_ansible_doc_parses_the_documentation(tmp_path: Path) -> None:
    proc = subprocess.run([str(ANSIBLE_DOC), "-j", "kiln.cluster.kiln_sysctl"],
                          capture_output=True, text=True, env=collection_env(tmp_path), check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["kiln.cluster.kiln_sysctl"]
    assert doc["doc"]["module"] == "kiln_sysctl" and doc["examples"].strip() and doc["return"]


@pytest.mark.parametrize("text,value,same", [("1\n", 1, True), ("4096\t87380 6\n", "4096 87380 6", True),
                                             ("0\n", "1", False)])
def test_fields_compare_whitespace_insensitively(text: str, value: object, same: bool) -> None:
    mod = load_module()
    assert (mod.fields(text) == mod.fields(value)) is same
