"""lustre_quota run end to end (in process; the first test through ``ansible localhost -m``) with the fake lfs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kiln_ansible_support import Doubles, ModuleRunner

USER = {"type": "user", "block_soft_KiB": 2147483648, "block_hard_KiB": 2306867200, "inode_soft": 5000000,
        "inode_hard": 5500000}
USER_ARGS = ["-U", "-b", "2147483648", "-B", "2306867200", "-i", "5000000", "-I", "5500000"]


def quota_args(doubles: Doubles, path: Path, limits: dict[str, Any]) -> dict[str, Any]:
    return {"path": str(path), "lfs": doubles.tool("lfs"), **limits}


def setquotas(doubles: Doubles) -> list[list[str]]:
    return [argv for argv in doubles.calls("lfs") if argv[0] == "setquota"]


def test_default_user_quota_set_once(run_module_ansible: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    args = quota_args(doubles, tmp_path, USER)
    planned = run_module_ansible("lustre_quota", args, check=True)
    assert planned["changed"] is True
    assert planned["current"] == {"block_soft_KiB": 0, "block_hard_KiB": 0, "inode_soft": 0, "inode_hard": 0}
    assert planned["command"][1:] == ["setquota", *USER_ARGS, str(tmp_path)]
    assert setquotas(doubles) == []

    assert run_module_ansible("lustre_quota", args)["changed"] is True
    settled = run_module_ansible("lustre_quota", args)
    assert settled["changed"] is False and settled["drift"] == [] and settled["command"] == []
    assert setquotas(doubles) == [["setquota", *USER_ARGS, str(tmp_path)]]
    # the group default is a different table: untouched
    assert run_module_ansible("lustre_quota", quota_args(doubles, tmp_path, {"type": "group", "inode_hard": 2000}),
                      check=True)["drift"] == [{"field": "inode_hard", "current": 0, "wanted": 2000}]


def test_bad_limits_are_refused_before_lfs_runs(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    limits = {"type": "project", "block_soft_KiB": 4096, "block_hard_KiB": 2048, "inode_soft": 10}
    result = run_module("lustre_quota", quota_args(doubles, tmp_path, limits))
    assert result["failed"] is True
    assert "block_soft_KiB 4096: above block_hard_KiB 2048" in result["msg"]
    assert "inode_soft 10: at most 1024" in result["msg"]
    assert doubles.calls("lfs") == []


def test_a_default_that_does_not_take_fails(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    doubles.set_state(quirks={"setquota_ignored": True})
    result = run_module("lustre_quota", quota_args(doubles, tmp_path, USER))
    assert result["failed"] is True
    assert "user default quota still differs" in result["msg"]
    assert {"field": "inode_hard", "current": 0, "wanted": 5500000} in result["drift"]
