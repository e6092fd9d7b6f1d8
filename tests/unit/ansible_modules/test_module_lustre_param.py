"""lustre_param run end to end (in process; the first test through ``ansible localhost -m``) with the fake lctl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kiln_ansible_support import Doubles, ModuleRunner

RPC = "osc.*.max_pages_per_rpc"
OSCS = [f"osc.lab-OST000{i}-osc-ffff8803c9c0f000" for i in range(4)]


def client_params() -> dict[str, str]:
    params = {f"{osc}.max_pages_per_rpc": "4096" for osc in OSCS}
    params[f"{OSCS[2]}.max_pages_per_rpc"] = "256"
    params.update({f"{osc}.max_dirty_mb": "2048" for osc in OSCS})
    return params


def param_args(doubles: Doubles, params: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"params": params, "lctl": doubles.tool("lctl"), "page_size": 4096}
    args.update(overrides)
    return args


def sets(doubles: Doubles) -> list[list[str]]:
    return [argv for argv in doubles.calls("lctl") if argv[0] in ("set_param", "conf_param")]


def test_runtime_drift_on_one_device_is_set_once_and_then_settles(
    run_module_ansible: ModuleRunner, doubles: Doubles
) -> None:
    doubles.set_state(params=client_params())
    args = param_args(doubles, [{"name": RPC, "value": "16M"}, {"name": "osc.*.max_dirty_mb", "value": "2G"}])

    planned = run_module_ansible("lustre_param", args, check=True)
    assert planned["changed"] is True
    assert planned["drift"] == [
        {"name": RPC, "device": f"{OSCS[2]}.max_pages_per_rpc", "current": "256", "wanted": "16M"}
    ]
    assert planned["changed_params"] == [RPC]
    assert planned["diff"]["before"] == f"{OSCS[2]}.max_pages_per_rpc=256\n"
    assert planned["diff"]["after"] == f"{OSCS[2]}.max_pages_per_rpc=4096 (16M)\n"
    assert sets(doubles) == []

    result = run_module_ansible("lustre_param", args)
    assert result["changed"] is True
    assert sets(doubles) == [["set_param", f"{RPC}=16M"]]
    assert doubles.state()["params"][f"{OSCS[2]}.max_pages_per_rpc"] == "4096"

    settled = run_module_ansible("lustre_param", args)
    assert settled["changed"] is False
    assert settled["drift"] == []
    assert len(sets(doubles)) == 1


def test_value_in_other_units_is_no_change(run_module: ModuleRunner, doubles: Doubles) -> None:
    doubles.set_state(params=client_params())
    result = run_module("lustre_param", param_args(doubles, [{"name": "osc.*.max_dirty_mb", "value": "2G"}]))
    assert result["changed"] is False
    assert result["current"]["osc.*.max_dirty_mb"][f"{OSCS[0]}.max_dirty_mb"] == "2048"
    assert sets(doubles) == []


def test_unknown_parameter_fails_with_lctl_message(run_module: ModuleRunner, doubles: Doubles) -> None:
    doubles.set_state(params=client_params())
    result = run_module("lustre_param", param_args(doubles, [{"name": "mdc.*.max_rpcs_in_flight", "value": 64}]))
    assert result["failed"] is True
    assert "get_param mdc.*.max_rpcs_in_flight exited 2" in result["msg"]
    assert "No such file or directory" in result["msg"]


def test_value_that_does_not_take_fails_after_set(run_module: ModuleRunner, doubles: Doubles) -> None:
    doubles.set_state(params=client_params(), quirks={"ignore_set": [f"{OSCS[2]}.max_pages_per_rpc"]})
    result = run_module("lustre_param", param_args(doubles, [{"name": RPC, "value": "16M"}]))
    assert result["failed"] is True
    assert f"set {RPC}=16M but it reads back as {OSCS[2]}.max_pages_per_rpc=256" in result["msg"]


def test_persistent_reads_the_params_llog_and_sets_with_dash_p(run_module: ModuleRunner, doubles: Doubles) -> None:
    doubles.set_state(llogs={"params": []})
    wanted = [{"name": "osc.lab-OST*.max_pages_per_rpc", "value": "16M"}]
    args = param_args(doubles, wanted, mode="set_param_persistent")

    planned = run_module("lustre_param", args, check=True)
    assert planned["changed"] is True
    assert planned["drift"][0]["current"] is None
    assert "(unset)" in planned["diff"]["before"]
    assert sets(doubles) == []

    assert run_module("lustre_param", args)["changed"] is True
    assert sets(doubles) == [["set_param", "-P", "osc.lab-OST*.max_pages_per_rpc=16M"]]
    assert ["--device", "MGS", "llog_print", "params"] in doubles.calls("lctl")

    assert run_module("lustre_param", args)["changed"] is False
    changed = param_args(doubles, [{"name": "osc.lab-OST*.max_pages_per_rpc", "value": "4M"}])
    changed["mode"] = "set_param_persistent"
    result = run_module("lustre_param", changed)
    assert result["drift"][0]["current"] == "16M"
    assert sets(doubles)[-1] == ["set_param", "-P", "osc.lab-OST*.max_pages_per_rpc=4M"]


def test_persistent_equal_value_in_other_units_is_no_change(run_module: ModuleRunner, doubles: Doubles) -> None:
    record = {"index": 2, "event": "set_param", "device": "general", "parameter": RPC, "value": "4096"}
    doubles.set_state(llogs={"params": [record]})
    args = param_args(doubles, [{"name": RPC, "value": "16M"}], mode="set_param_persistent")
    assert run_module("lustre_param", args)["changed"] is False


def test_conf_param_reads_fs_logs(run_module: ModuleRunner, doubles: Doubles) -> None:
    doubles.set_state(llogs={"lab-client": [], "lab-MDT0000": []})
    args = param_args(
        doubles, [{"name": "lab-OST0000.osc.max_dirty_mb", "value": 512}], mode="conf_param", fsname="lab"
    )
    assert run_module("lustre_param", args)["changed"] is True
    assert sets(doubles) == [["conf_param", "lab-OST0000.osc.max_dirty_mb=512"]]
    assert ["--device", "MGS", "llog_print", "lab-MDT0000"] in doubles.calls("lctl")
    assert run_module("lustre_param", args)["changed"] is False


def test_conf_param_without_fsname_or_llogs_is_explained(run_module: ModuleRunner, doubles: Doubles) -> None:
    args = param_args(doubles, [{"name": "lab.llite.max_read_ahead_mb", "value": 16}], mode="conf_param")
    result = run_module("lustre_param", args)
    assert result["failed"] is True
    assert "needs fsname" in result["msg"]


def sysfs(tmp_path: Path, value: str) -> Path:
    param = tmp_path / "sys" / "module" / "mdt" / "parameters" / "max_mod_rpcs_per_client"
    param.parent.mkdir(parents=True)
    param.write_text(value + "\n", encoding="ascii")
    return param


def test_module_param_in_sysfs(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    param = sysfs(tmp_path, "8")
    args = param_args(
        doubles,
        [{"name": "mdt.max_mod_rpcs_per_client", "value": 64}],
        mode="module_params",
        sysfs_root=str(tmp_path / "sys"),
    )
    planned = run_module("lustre_param", args, check=True)
    assert planned["changed"] is True
    assert planned["commands"] == [["write", str(param), "64"]]
    assert param.read_text(encoding="ascii") == "8\n"

    assert run_module("lustre_param", args)["changed"] is True
    assert param.read_text(encoding="ascii") == "64\n"
    assert run_module("lustre_param", args)["changed"] is False
    assert doubles.calls("lctl") == []


def test_module_param_missing_module_is_explained(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    args = param_args(
        doubles,
        [{"name": "mdt.max_mod_rpcs_per_client", "value": 64}],
        mode="module_params",
        sysfs_root=str(tmp_path / "sys"),
    )
    result = run_module("lustre_param", args)
    assert result["failed"] is True
    assert "is the module loaded?" in result["msg"]


# -- persistent values read back where they apply (an MGS record is no proof) ----------------------

BRW = "obdfilter.*.brw_size"
OSTS = [f"obdfilter.lab-OST000{i}.brw_size" for i in range(2)]


def test_persistent_value_is_read_back_on_a_host_that_applies_it(run_module: ModuleRunner, doubles: Doubles) -> None:
    doubles.set_state(llogs={"params": []}, params={name: "4" for name in OSTS})
    args = param_args(doubles, [{"name": BRW, "value": 16}], mode="set_param_persistent", readback_timeout=0)
    result = run_module("lustre_param", args)
    assert result["changed"] is True
    assert result["applied"][BRW]["applied"] == "yes"
    assert result["applied"][BRW]["readback"] == {name: "16" for name in OSTS}
    assert ["get_param", BRW] in doubles.calls("lctl")


def test_persistent_value_rejected_by_the_target_fails(run_module: ModuleRunner, doubles: Doubles) -> None:
    """The MGS record alone says success while the OSS keeps its old value: the module must fail."""
    doubles.set_state(llogs={"params": []}, params={name: "4" for name in OSTS}, quirks={"ignore_set": [OSTS[1]]})
    args = param_args(doubles, [{"name": BRW, "value": 16}], mode="set_param_persistent", readback_timeout=0)
    result = run_module("lustre_param", args)
    assert result["failed"] is True
    assert f"the MGS stores {BRW}=16, but this host runs {OSTS[1]}=4" in result["msg"]
    assert "rejected or clamped" in result["msg"]
    # A second run finds the record already right, and still refuses to call the value applied.
    again = run_module("lustre_param", args)
    assert again["failed"] is True and f"{OSTS[1]}=4" in again["msg"]


def test_persistent_value_not_visible_here_is_unknown_not_applied(
    run_module: ModuleRunner, doubles: Doubles
) -> None:
    """On an MGS without obdfilter devices the module cannot verify: it says so."""
    doubles.set_state(llogs={"params": []}, params={"mgs.MGS.uuid": "MGS_uuid"})
    args = param_args(doubles, [{"name": BRW, "value": 16}], mode="set_param_persistent", readback_timeout=0)
    result = run_module("lustre_param", args)
    assert result["changed"] is True and not result.get("failed")
    assert result["applied"][BRW]["applied"] == "unknown"
    assert "no device on this host matches obdfilter.*.brw_size" in result["applied"][BRW]["reason"]
    assert "readback_only" in result["applied"][BRW]["reason"]


def test_readback_only_reads_this_host_and_leaves_the_mgs_alone(run_module: ModuleRunner, doubles: Doubles) -> None:
    """An OSS reads back what the MGS stored: equal is applied, a clamped value fails, nothing is set."""
    doubles.set_state(params={OSTS[0]: "16", OSTS[1]: "16"})
    args = param_args(doubles, [{"name": BRW, "value": 16}], mode="set_param_persistent", readback_only=True,
                      readback_timeout=0)
    result = run_module("lustre_param", args)
    assert result["changed"] is False and result["applied"][BRW]["applied"] == "yes"
    assert sets(doubles) == [] and not [c for c in doubles.calls("lctl") if "llog_print" in c]
    doubles.set_state(params={OSTS[0]: "16", OSTS[1]: "4"})
    failed = run_module("lustre_param", args)
    assert failed["failed"] is True and f"this host runs {OSTS[1]}=4" in failed["msg"]


def test_readback_only_without_the_targets_mounted_is_unknown(run_module: ModuleRunner, doubles: Doubles) -> None:
    doubles.set_state(params={})
    args = param_args(doubles, [{"name": BRW, "value": 16}], mode="set_param_persistent", readback_only=True,
                      readback_timeout=0)
    result = run_module("lustre_param", args)
    assert not result.get("failed") and result["applied"][BRW]["applied"] == "unknown"


def test_read_ahead_above_half_of_memtotal_fails_before_lctl(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    """lproc_llite.c max_read_ahead_mb_store refuses pages > totalram / 2: MemTotal, not the installed RAM."""
    ra = "llite.*.max_read_ahead_mb"
    doubles.set_state(params={"llite.lab-ff01.max_read_ahead_mb": "64"})
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:        2037152 kB\nMemFree:          100000 kB\n", encoding="ascii")  # a "2 GiB" VM
    result = run_module("lustre_param", param_args(doubles, [{"name": ra, "value": 1024}], meminfo=str(meminfo)))
    assert result["failed"] is True
    assert "at most 994 MiB" in result["msg"] and "max_read_ahead_mb_store" in result["msg"]
    assert sets(doubles) == []
    ok = run_module("lustre_param", param_args(doubles, [{"name": ra, "value": 512}], meminfo=str(meminfo)))
    assert ok["changed"] is True and sets(doubles) == [["set_param", f"{ra}=512"]]

