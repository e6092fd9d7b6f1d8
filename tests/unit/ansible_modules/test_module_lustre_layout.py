"""lustre_layout run end to end (in process; the first test through ``ansible localhost -m``) with the fake lfs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kiln_ansible_support import Doubles, ModuleRunner

PFL = [
    {"extent_end": "1M", "dom": True},
    {"extent_end": "64M", "stripe_count": 1, "stripe_size": "1M", "pool": "flash"},
    {"extent_end": "EOF", "stripe_count": -1, "stripe_size": "4M", "pool": "flash"},
]
PFL_ARGS = ["-E", "1M", "-L", "mdt", "-E", "64M", "-c", "1", "-S", "1M", "-p", "flash"]
PFL_ARGS += ["-E", "-1", "-c", "-1", "-S", "4M", "-p", "flash"]


def layout_args(doubles: Doubles, path: Path, layout: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"path": str(path), "layout": layout, "lfs": doubles.tool("lfs")}
    args.update(overrides)
    return args


def setstripes(doubles: Doubles) -> list[list[str]]:
    return [argv for argv in doubles.calls("lfs") if argv[0] == "setstripe"]


def test_directory_without_layout_gets_pfl_dom_pool_once(
    run_module_ansible: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    directory = tmp_path / "ckpt"
    directory.mkdir()
    args = layout_args(doubles, directory, PFL)

    planned = run_module_ansible("lustre_layout", args, check=True)
    assert planned["changed"] is True
    assert planned["drift"][0]["field"] == "layout"
    assert planned["command"][1:] == ["setstripe", *PFL_ARGS, str(directory)]
    assert planned["diff"]["before"] == "(no default layout)\n"
    assert "[1M, 64M) raid0 count=1 size=1M pool=flash" in planned["diff"]["after"]
    assert setstripes(doubles) == []

    assert run_module_ansible("lustre_layout", args)["changed"] is True
    assert setstripes(doubles) == [["setstripe", *PFL_ARGS, str(directory)]]

    settled = run_module_ansible("lustre_layout", args)
    assert settled["changed"] is False
    assert settled["drift"] == []
    assert settled["current"][2] == {
        "extent_end": "EOF",
        "stripe_count": -1,
        "stripe_size": "4M",
        "overstripe_count": None,
        "pool": "flash",
        "dom": False,
    }
    assert len(setstripes(doubles)) == 1


def test_existing_layout_drift_is_reported_field_by_field(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    directory = tmp_path / "shared"
    directory.mkdir()
    plain = [{"extent_end": "EOF", "stripe_count": 4, "stripe_size": "1M"}]
    run_module("lustre_layout", layout_args(doubles, directory, plain))
    assert setstripes(doubles) == [["setstripe", "-c", "4", "-S", "1M", str(directory)]]

    wider = [{"extent_end": "EOF", "overstripe_count": 32, "stripe_size": "4M"}]
    result = run_module("lustre_layout", layout_args(doubles, directory, wider), check=True)
    assert result["changed"] is True
    assert result["drift"] == [
        {"component": 0, "field": "overstripe_count", "current": None, "wanted": 32},
        {"component": 0, "field": "stripe_size", "current": "1M", "wanted": "4M"},
    ]
    assert result["diff"]["before"] == "[0, EOF) raid0 count=4 size=1M\n"
    assert result["diff"]["after"] == "[0, EOF) raid0,overstriped count=32 size=4M\n"


def test_unset_fields_are_not_drift(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    directory = tmp_path / "d"
    directory.mkdir()
    run_module("lustre_layout", layout_args(doubles, directory, [{"stripe_count": 2}]))
    assert run_module("lustre_layout", layout_args(doubles, directory, [{"stripe_count": 2}]))["changed"] is False


def test_create(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    directory = tmp_path / "new" / "dir"
    refused = run_module("lustre_layout", layout_args(doubles, directory, PFL))
    assert refused["failed"] is True
    assert "set create: true" in refused["msg"]

    planned = run_module("lustre_layout", layout_args(doubles, directory, PFL, create=True), check=True)
    assert planned["changed"] is True
    assert planned["created"] is True
    assert not directory.exists()
    assert doubles.calls("lfs") == []

    result = run_module("lustre_layout", layout_args(doubles, directory, PFL, create=True))
    assert result["created"] is True
    assert directory.is_dir()
    assert run_module("lustre_layout", layout_args(doubles, directory, PFL, create=True))["changed"] is False


def test_invalid_layout_is_refused_before_lfs_runs(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    bad = [{"extent_end": "1M", "stripe_size": "4M"}, {"extent_end": "EOF", "dom": True}]
    result = run_module("lustre_layout", layout_args(doubles, tmp_path, bad))
    assert result["failed"] is True
    assert "multiple of its stripe_size" in result["msg"]
    assert "only the first component can be Data-on-MDT" in result["msg"]
    assert doubles.calls("lfs") == []


def test_lfs_without_yaml_falls_back_to_text(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    doubles.set_state(quirks={"no_yaml": True})
    run_module("lustre_layout", layout_args(doubles, tmp_path, PFL))
    assert run_module("lustre_layout", layout_args(doubles, tmp_path, PFL))["changed"] is False
    assert ["getstripe", "-d", str(tmp_path)] in doubles.calls("lfs")


def test_layout_that_does_not_take_fails(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    doubles.set_state(quirks={"setstripe_ignores_pool": True})
    result = run_module("lustre_layout", layout_args(doubles, tmp_path, PFL))
    assert result["failed"] is True
    assert "still differs" in result["msg"]
    assert {"component": 1, "field": "pool", "current": None, "wanted": "flash"} in result["drift"]


PLAIN = [{"extent_end": "EOF", "stripe_count": 1, "stripe_size": "1M"}]


def setdirstripes(doubles: Doubles) -> list[list[str]]:
    return [argv for argv in doubles.calls("lfs") if argv[0] == "setdirstripe"]


def test_dir_default_is_set_once_and_read_back(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    wanted = {"mdt_count": 4, "mdt_index": -1, "max_inherit": 3}
    args = layout_args(doubles, tmp_path, PLAIN, dir_default=wanted, mdt_count=4)

    planned = run_module("lustre_layout", args, check=True)
    assert planned["changed"] is True
    assert {"component": "dir_default", "field": "dir_default", "current": None, "wanted": wanted} in planned["drift"]
    assert planned["dir_command"][1:] == ["setdirstripe", "-D", "-c", "4", "-i", "-1", "-X", "3", str(tmp_path)]
    assert planned["diff"]["after"].endswith("subdirectories: -D -c 4 -i -1 -X 3\n")
    assert setdirstripes(doubles) == []

    assert run_module("lustre_layout", args)["changed"] is True
    settled = run_module("lustre_layout", args)
    assert settled["changed"] is False
    assert settled["current_dir_default"] == wanted
    assert settled["dir_command"] == []
    assert len(setdirstripes(doubles)) == 1
    assert ["getdirstripe", "-D", "--yaml", str(tmp_path)] in doubles.calls("lfs")


def test_dir_default_drift_names_the_field(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    run_module("lustre_layout", layout_args(doubles, tmp_path, PLAIN, dir_default={"mdt_count": 1}))
    assert setdirstripes(doubles) == [["setdirstripe", "-D", "-c", "1", "-i", "-1", str(tmp_path)]]
    # lfs stored max_inherit -1 for a count of 1; an unset max_inherit is not compared
    wider = layout_args(doubles, tmp_path, PLAIN, dir_default={"mdt_count": 2, "max_inherit": 3})
    result = run_module("lustre_layout", wider, check=True)
    assert result["drift"] == [
        {"component": "dir_default", "field": "mdt_count", "current": 1, "wanted": 2},
        {"component": "dir_default", "field": "max_inherit", "current": -1, "wanted": 3},
    ]


def test_dir_default_above_the_mdt_count_is_refused_before_lfs_runs(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    args = layout_args(doubles, tmp_path, PLAIN, dir_default={"mdt_count": 8, "max_inherit": 251}, mdt_count=4)
    result = run_module("lustre_layout", args)
    assert result["failed"] is True
    assert "mdt_count 8: the filesystem has 4 MDT(s)" in result["msg"]
    assert "max_inherit 251" in result["msg"]
    assert doubles.calls("lfs") == []


def test_dir_default_text_fallback_and_one_that_does_not_take(
    run_module: ModuleRunner, doubles: Doubles, tmp_path: Path
) -> None:
    doubles.set_state(quirks={"no_yaml": True, "setdirstripe_ignores_count": True})
    result = run_module("lustre_layout", layout_args(doubles, tmp_path, PLAIN, dir_default={"mdt_count": 4}))
    assert result["failed"] is True
    assert "default directory layout still differs" in result["msg"]
    assert result["drift"] == [{"component": "dir_default", "field": "mdt_count", "current": 1, "wanted": 4}]
    assert ["getdirstripe", "-D", str(tmp_path)] in doubles.calls("lfs")
