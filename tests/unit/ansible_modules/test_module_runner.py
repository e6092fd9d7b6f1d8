"""The two ways the module tests run a module (kiln_ansible_support.ModuleRunner) give the same result.

Most module tests run the module's main() in process (``run_module``); each module's first end-to-end test
and this file run it through the ``ansible`` CLI (``run_module_ansible``). Here one case per module (check
mode, a change, a settled re-run, a warning or a failure) runs both ways, on fresh doubles, and the results
and the tool calls must be equal: what the in-process tests assert is what Ansible would report.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from kiln_ansible_support import Doubles, ModuleRunner
from test_module_host_probe import host_tree
from test_module_host_probe import probe as probe_args
from test_module_kiln_sysctl import RMEM, SWAP, proc_tree
from test_module_kiln_sysctl import args as sysctl_args
from test_module_lustre_layout import PFL, layout_args
from test_module_lustre_param import RPC, client_params, param_args
from test_module_lustre_quota import USER, quota_args
from test_module_lustre_target import blank_device, ost_args

Case = Callable[[ModuleRunner, Doubles, Path], list[dict[str, Any]]]
# What the controller adds to a task result (the module never returns them): the action's name, the no_log
# flag, and for a failure without a traceback the text "(traceback unavailable)".
CONTROLLER_ONLY = {"action": None, "_ansible_no_log": None, "exception": "(traceback unavailable)"}


def sysctl_case(run: ModuleRunner, doubles: Doubles, tmp: Path) -> list[dict[str, Any]]:
    root = proc_tree(tmp / "sys", {"net.ipv4.tcp_rmem": "4096\t131072\t6291456", "vm.swappiness": "1"})
    wanted = sysctl_args(root, [RMEM, SWAP])
    return [run("kiln_sysctl", wanted, check=True), run("kiln_sysctl", wanted), run("kiln_sysctl", wanted),
            run("kiln_sysctl", sysctl_args(root, [{"name": "vm.swappiness"}]))]


def probe_case(run: ModuleRunner, doubles: Doubles, tmp: Path) -> list[dict[str, Any]]:
    root = host_tree(tmp / "host")
    doubles.set_state(host={"container": "podman", "modules": ["lnet"], "packages": {"fio": [["installed", "3.33-3"]]},
                            "units": {"chrony.service": {"load_state": "loaded", "enabled": "enabled"}}})
    wanted = probe_args(doubles, root, container=True, paths=["/", str(root / "missing")], units=["chrony.service"],
                        kernel_modules=["lnet"], packages=["fio"], pci_vendors=["0x10de"], interfaces=["ib0"])
    return [run("host_probe", wanted, check=True), run("host_probe", wanted),
            run("host_probe", probe_args(doubles, root, module_parameters=[{"module": "mdt"}]))]


def layout_case(run: ModuleRunner, doubles: Doubles, tmp: Path) -> list[dict[str, Any]]:
    directory = tmp / "ckpt"
    directory.mkdir()
    wanted = layout_args(doubles, directory, PFL)
    return [run("lustre_layout", wanted, check=True), run("lustre_layout", wanted), run("lustre_layout", wanted)]


def param_case(run: ModuleRunner, doubles: Doubles, tmp: Path) -> list[dict[str, Any]]:
    doubles.set_state(params=client_params())
    wanted = param_args(doubles, [{"name": RPC, "value": "16M"}, {"name": "osc.*.max_dirty_mb", "value": "2G"}])
    unknown = param_args(doubles, [{"name": "osc.*.no_such_param", "value": "1"}])
    return [run("lustre_param", wanted, check=True), run("lustre_param", wanted), run("lustre_param", wanted),
            run("lustre_param", unknown)]


def quota_case(run: ModuleRunner, doubles: Doubles, tmp: Path) -> list[dict[str, Any]]:
    wanted = quota_args(doubles, tmp, USER)
    bad = quota_args(doubles, tmp, {"type": "project", "block_soft_KiB": 4096, "block_hard_KiB": 2048})
    return [run("lustre_quota", wanted, check=True), run("lustre_quota", wanted), run("lustre_quota", wanted),
            run("lustre_quota", bad)]


def target_case(run: ModuleRunner, doubles: Doubles, tmp: Path) -> list[dict[str, Any]]:
    device = blank_device(tmp)
    moved = ost_args(doubles, device, servicenode=[["10.0.0.11@o2ib0"], ["10.0.0.13@o2ib0"]])
    wanted = ost_args(doubles, device)
    return [run("lustre_target", wanted, check=True), run("lustre_target", wanted), run("lustre_target", wanted),
            run("lustre_target", moved)]


CASES: dict[str, Case] = {
    "host_probe": probe_case,
    "kiln_sysctl": sysctl_case,
    "lustre_layout": layout_case,
    "lustre_param": param_case,
    "lustre_quota": quota_case,
    "lustre_target": target_case,
}


def run_case(case: Case, via: Literal["python", "ansible"], tmp_path: Path) -> tuple[list[Any], list[list[str]]]:
    """The case's results and tool calls, with its directory written as TMP and the controller's keys left out."""
    tmp = tmp_path / via
    tmp.mkdir()
    doubles = Doubles(state_path=tmp / "double-state.json", log_path=tmp / "double-calls.jsonl")
    results = case(ModuleRunner(tmp_path=tmp, doubles=doubles, via=via), doubles, tmp)
    results = [{k: v for k, v in result.items() if k not in CONTROLLER_ONLY or CONTROLLER_ONLY[k] not in (None, v)}
               for result in results]
    text = json.dumps([results, doubles.calls()], sort_keys=True).replace(str(tmp), "TMP")
    found, calls = json.loads(text)
    return found, calls


@pytest.mark.parametrize("module", sorted(CASES))
def test_in_process_run_reports_what_ansible_reports(module: str, tmp_path: Path) -> None:
    ansible_results, ansible_calls = run_case(CASES[module], "ansible", tmp_path)
    python_results, python_calls = run_case(CASES[module], "python", tmp_path)
    # The case did something (host_probe only reads: it never changes anything, and fails on a bad entry).
    if module == "host_probe":
        assert [r["changed"] for r in ansible_results] == [False, False, False]
        assert ansible_results[-1]["failed"] is True
    else:
        assert [r.get("changed") for r in ansible_results][:3] == [True, True, False]
    assert python_results == ansible_results
    assert python_calls == ansible_calls
