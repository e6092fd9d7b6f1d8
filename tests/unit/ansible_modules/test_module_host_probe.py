"""host_probe on a directory tree standing in for the host's fixed paths (``root``) and the doubles for
systemctl, systemd-detect-virt, dpkg-query and modprobe (in process; the first test through ``ansible -m``)."""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kiln_ansible_support import COLLECTIONS, MODULES, Doubles, ModuleRunner, collection_env

ANSIBLE_DOC = Path(sys.executable).parent / "ansible-doc"


def host_tree(root: Path) -> Path:
    """The fixed paths the probe reads under ``root``: /sys/module, /sys/class/net, /sys/bus/pci/devices."""
    for module in ("lnet", "mdt"):
        (root / "sys/module" / module / "parameters").mkdir(parents=True)
    (root / "sys/module/mdt/parameters/max_mod_rpcs_per_client").write_text("8\n")
    (root / "sys/class/net/ib0").mkdir(parents=True)
    (root / "sys/class/net/eth0").symlink_to(root / "nowhere")  # dangling, as stat counts it: present
    for address, vendor, klass in (
        ("0000:17:00.0", "0x10de", "0x030200"),  # NVIDIA 3D controller (an H100)
        ("0000:03:00.0", "0x10DE", "0x040300"),  # NVIDIA audio function: not a GPU class
        ("0000:0c:00.0", "0x15b3", "0x020700"),  # Mellanox InfiniBand
        ("0000:00:00.0", "0x8086", "0x060000"),  # Intel host bridge
    ):
        device = root / "sys/bus/pci/devices" / address
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(klass + "\n")
    return root


def tools(doubles: Doubles) -> dict[str, str]:
    return {name.replace("-", "_"): doubles.tool(name)
            for name in ("systemctl", "systemd-detect-virt", "dpkg-query", "modprobe")}


def probe(doubles: Doubles, root: Path, **options: Any) -> dict[str, Any]:
    return {**tools(doubles), "root": str(root), **options}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_one_run_answers_every_kind_of_question(run_module_ansible: ModuleRunner, doubles: Doubles,
                                               tmp_path: Path) -> None:
    root = host_tree(tmp_path / "host")
    weed = tmp_path / "weed"
    weed.write_text("#!/bin/sh\necho 'version 30GB 3.39 51d4a4b2 linux amd64'\n")
    weed.chmod(0o755)
    doubles.set_state(host={"container": "podman", "modules": ["lnet"], "systemd_version": 252,
                            "units": {"chrony.service": {"load_state": "loaded", "enabled": "enabled",
                                                         "active": "active"}},
                            "packages": {"fio": [["installed", "3.33-3"]]}})
    args = probe(doubles, root, container=True, paths=[str(tmp_path)], checksums=[str(weed)],
                 units=["chrony.service"], kernel_modules=["lnet", "lustre"], interfaces=["ib0", "ib1"],
                 packages=["fio", "iperf3"], versions=[{"name": "weed", "argv": [str(weed), "version"]}],
                 pci_vendors=["0x15b3"], systemd_version=True, groups=["root"], users=["root"])

    first = run_module_ansible("host_probe", args)
    assert first.get("failed") is not True, first
    assert first["changed"] is False
    assert first["container"] == {"kind": "podman", "in_container": True, "source": "systemd-detect-virt",
                                  "markers": []}
    assert first["paths"][str(tmp_path)]["type"] == "directory"
    assert first["paths"][str(weed)]["sha256"] == sha256(weed)
    assert first["units"]["chrony.service"] == {"load_state": "loaded", "enabled": "enabled", "active": "active",
                                                "unit_file": False}
    assert first["kernel_modules"] == {"lnet": {"loaded": True, "available": True},
                                       "lustre": {"loaded": False, "available": False}}
    assert first["interfaces"] == {"ib0": True, "ib1": False}
    assert first["packages"] == {"fio": "3.33-3"}
    assert first["versions"]["weed"] == {"rc": 0, "stdout": "version 30GB 3.39 51d4a4b2 linux amd64", "stderr": ""}
    assert first["pci"] == [{"address": "0000:0c:00.0", "vendor": "0x15b3", "class": "0x020700"}]
    assert first["systemd_version"] == 252
    assert first["groups"]["root"]["exists"] is True and first["groups"]["root"]["gid"] == 0
    assert first["users"]["root"]["uid"] == 0

    # Read-only: check mode answers the same, and nothing ran that could change the host.
    checked = run_module_ansible("host_probe", args, check=True)
    assert checked == first
    assert {tuple(call[:1]) for call in doubles.calls("systemctl")} == {("show",), ("is-enabled",), ("is-active",),
                                                                        ("--version",)}
    assert doubles.calls("modprobe") == [["--dry-run", "--quiet", "lnet"], ["--dry-run", "--quiet", "lustre"]] * 2


# ------------------------------------------------------------------------------------------------------ paths


def test_paths_stat_follows_links_and_counts_a_dangling_link_as_present(run_module: ModuleRunner,
                                                                       doubles: Doubles, tmp_path: Path) -> None:
    directory = tmp_path / "etc-kiln"
    directory.mkdir(mode=0o750)
    directory.chmod(0o750)
    link = tmp_path / "link"
    link.symlink_to(directory)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    result = run_module("host_probe", probe(doubles, tmp_path, paths=[str(directory), str(link), str(dangling),
                                                                      str(tmp_path / "missing")]))
    answers = result["paths"]
    assert answers[str(directory)]["type"] == "directory" and answers[str(directory)]["mode"] == "0750"
    assert answers[str(directory)]["islnk"] is False
    assert answers[str(link)]["islnk"] is True and answers[str(link)]["type"] == "directory"
    assert answers[str(link)]["inode"] == answers[str(directory)]["inode"]
    assert answers[str(dangling)] == {**answers[str(tmp_path / "missing")], "exists": True, "islnk": True}
    assert answers[str(tmp_path / "missing")]["exists"] is False
    assert answers[str(tmp_path / "missing")]["type"] is None and not answers[str(tmp_path / "missing")]["writable"]
    owner = answers[str(directory)]
    assert (owner["uid"], owner["gid"]) == (os.getuid(), os.getgid())


def test_checksums_only_of_regular_files_that_are_not_links(run_module: ModuleRunner, doubles: Doubles,
                                                            tmp_path: Path) -> None:
    binary = tmp_path / "warp"
    binary.write_bytes(b"\x7fELF not really")
    link = tmp_path / "warp-link"
    link.symlink_to(binary)
    result = run_module("host_probe", probe(doubles, tmp_path, checksums=[str(binary), str(link), str(tmp_path),
                                                                          str(tmp_path / "none")]))
    answers = result["paths"]
    assert answers[str(binary)]["sha256"] == sha256(binary) and answers[str(binary)]["type"] == "file"
    assert answers[str(link)]["sha256"] is None, "a link is not the file it points to (stat without follow)"
    assert answers[str(tmp_path)]["sha256"] is None and answers[str(tmp_path / "none")]["sha256"] is None


def test_read_strips_trailing_newlines_and_list_dirs_lists_what_a_glob_lists(run_module: ModuleRunner,
                                                                            doubles: Doubles,
                                                                            tmp_path: Path) -> None:
    thp = tmp_path / "enabled"
    thp.write_text("always [madvise] never\n\n")
    infiniband = tmp_path / "infiniband"
    infiniband.mkdir()
    (infiniband / "mlx5_1").mkdir()
    (infiniband / "mlx5_0").symlink_to(tmp_path / "gone")
    (infiniband / ".hidden").mkdir()
    result = run_module("host_probe", probe(doubles, tmp_path, read=[str(thp), str(tmp_path / "none")],
                                            list_dirs=[str(infiniband), str(thp)]))
    answers = result["paths"]
    assert answers[str(thp)]["content"] == "always [madvise] never"
    assert answers[str(tmp_path / "none")]["content"] is None
    assert answers[str(infiniband)]["entries"] == ["mlx5_0", "mlx5_1"]
    assert answers[str(thp)]["entries"] is None


# ------------------------------------------------------------------------------------------------- systemd


def test_units_report_what_systemctl_prints(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    unit_dir = tmp_path / "system"
    unit_dir.mkdir()
    (unit_dir / "kiln-lnet.service").write_text("[Unit]\n")
    doubles.set_state(host={"units": {
        "kiln-lnet.service": {"load_state": "loaded", "enabled": "disabled", "active": "inactive"},
        "nvidia-dcgm.service": {"load_state": "not-found", "enabled": "", "active": "inactive"}}})
    result = run_module("host_probe", probe(doubles, tmp_path, unit_dir=str(unit_dir),
                                            units=["kiln-lnet.service", "nvidia-dcgm.service"]))
    assert result["units"] == {
        "kiln-lnet.service": {"load_state": "loaded", "enabled": "disabled", "active": "inactive", "unit_file": True},
        "nvidia-dcgm.service": {"load_state": "not-found", "enabled": "", "active": "inactive", "unit_file": False},
    }
    # is-enabled stops at the first unit it cannot find: each unit is asked on its own.
    assert ["is-enabled", "nvidia-dcgm.service"] in doubles.calls("systemctl")


def test_without_a_running_systemd_the_load_state_is_unknown(run_module: ModuleRunner, doubles: Doubles,
                                                             tmp_path: Path) -> None:
    doubles.set_state(quirks={"systemctl_show_fails": True},
                      host={"units": {"chrony.service": {"enabled": "enabled", "active": "inactive"}}})
    result = run_module("host_probe", probe(doubles, tmp_path, units=["chrony.service"]))
    assert result.get("failed") is not True, result
    assert result["units"]["chrony.service"]["load_state"] == ""
    assert result["units"]["chrony.service"]["enabled"] == "enabled"


def test_systemd_version_is_the_major_number(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    doubles.set_state(host={"systemd_version": 241})
    assert run_module("host_probe", probe(doubles, tmp_path, systemd_version=True))["systemd_version"] == 241
    assert run_module("host_probe", probe(doubles, tmp_path))["systemd_version"] is None


def test_a_missing_systemctl_fails_with_its_path(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    result = run_module("host_probe", {**probe(doubles, tmp_path, units=["chrony.service"]),
                                       "systemctl": str(tmp_path / "no-systemctl")})
    assert result["failed"] is True
    assert result["msg"] == f"systemctl {tmp_path / 'no-systemctl'} is not an executable file"


@pytest.mark.skipif(shutil.which("systemd-escape") is None,
                    reason="not applicable on this host: systemd-escape is not installed")
def test_mount_points_are_named_by_systemd_escape(run_module: ModuleRunner, doubles: Doubles,
                                                  tmp_path: Path) -> None:
    unit_dir = tmp_path / "system"
    unit_dir.mkdir()
    mounted = tmp_path / "lustre"
    mounted.mkdir()
    expected = subprocess.run(["systemd-escape", "--path", "--suffix=mount", str(mounted)], capture_output=True,
                              text=True, check=True).stdout.strip()
    (unit_dir / expected).write_text("[Mount]\n")
    result = run_module("host_probe", probe(doubles, tmp_path, unit_dir=str(unit_dir),
                                            mount_points=[str(mounted), "/lustre/scratch-a b"]))
    assert result["mounts"] == {
        str(mounted): {"unit": expected, "unit_file": True, "exists": True},
        "/lustre/scratch-a b": {"unit": "lustre-scratch\\x2da\\x20b.mount", "unit_file": False, "exists": False},
    }
    assert result["units"] == {}, "mount units are named, not asked about"


@pytest.mark.skipif(shutil.which("systemd-escape") is None,
                    reason="not applicable on this host: systemd-escape is not installed")
def test_a_path_systemd_escape_refuses_fails_the_probe(run_module: ModuleRunner, doubles: Doubles,
                                                       tmp_path: Path) -> None:
    result = run_module("host_probe", probe(doubles, tmp_path, mount_points=["/lustre/../etc"]))
    assert result["failed"] is True
    assert result["msg"].startswith("systemd-escape --path --suffix=mount /lustre/../etc exited 1")


# ------------------------------------------------------------------------------------------ accounts, kernel


def test_users_and_groups_as_the_passwd_and_group_databases_have_them(run_module: ModuleRunner, doubles: Doubles,
                                                                      tmp_path: Path) -> None:
    result = run_module("host_probe", probe(doubles, tmp_path, users=["root", "kiln-no-such-user"],
                                            groups=["root", "kiln-no-such-group"]))
    assert result["users"]["root"]["exists"] is True and result["users"]["root"]["home"] == "/root"
    assert result["users"]["kiln-no-such-user"] == {"exists": False, "uid": None, "gid": None, "comment": None,
                                                    "home": None, "shell": None}
    assert result["groups"]["root"]["gid"] == 0
    assert result["groups"]["kiln-no-such-group"] == {"exists": False, "gid": None, "members": []}


def test_kernel_modules_loaded_or_available(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    root = host_tree(tmp_path / "host")
    doubles.set_state(host={"modules": ["osd_ldiskfs"]})
    result = run_module("host_probe", probe(doubles, root, kernel_modules=["lnet", "osd_ldiskfs", "osd_zfs"]))
    assert result["kernel_modules"] == {"lnet": {"loaded": True, "available": False},
                                        "osd_ldiskfs": {"loaded": False, "available": True},
                                        "osd_zfs": {"loaded": False, "available": False}}
    # Without modprobe nothing is available; what is loaded still shows.
    without = run_module("host_probe", {**probe(doubles, root, kernel_modules=["lnet", "osd_ldiskfs"]),
                                        "modprobe": str(tmp_path / "no-modprobe")})
    assert without["kernel_modules"] == {"lnet": {"loaded": True, "available": False},
                                         "osd_ldiskfs": {"loaded": False, "available": False}}


def test_module_parameters_keep_their_keys_and_say_whether_sysfs_has_them(run_module: ModuleRunner,
                                                                          doubles: Doubles, tmp_path: Path) -> None:
    root = host_tree(tmp_path / "host")
    params = [{"module": "mdt", "name": "max_mod_rpcs_per_client", "value": 50},
              {"module": "ptlrpc", "name": "at_max", "value": 600}]
    result = run_module("host_probe", probe(doubles, root, module_parameters=params))
    assert result["module_parameters"] == [{**params[0], "present": True}, {**params[1], "present": False}]
    bad = run_module("host_probe", probe(doubles, root, module_parameters=[{"module": "mdt"}]))
    assert bad["failed"] is True and "needs a module and a name" in bad["msg"]


def test_pci_functions_by_vendor_and_class(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    root = host_tree(tmp_path / "host")
    gpus = run_module("host_probe", probe(doubles, root, pci_vendors=["0x10de"], pci_classes=["0x0300", "0x0302"]))
    assert gpus["pci"] == [{"address": "0000:17:00.0", "vendor": "0x10de", "class": "0x030200"}]
    nvidia = run_module("host_probe", probe(doubles, root, pci_vendors=["0x10DE", "0x15b3"]))
    assert [f["address"] for f in nvidia["pci"]] == ["0000:03:00.0", "0000:0c:00.0", "0000:17:00.0"]
    assert run_module("host_probe", probe(doubles, tmp_path / "empty", pci_vendors=["0x10de"]))["pci"] == []


# ---------------------------------------------------------------------------------------------- software


def test_tools_are_found_in_tool_dirs_before_path(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    sbin, bin_ = tmp_path / "sbin", tmp_path / "bin"
    for directory in (sbin, bin_):
        directory.mkdir()
        tool = directory / "lctl"
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    (bin_ / "not-executable").write_text("")
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    found = run_module("host_probe", probe(doubles, tmp_path, tools=["lctl", "not-executable", "mount.lustre"]))
    assert found["tools"] == {"lctl": str(bin_ / "lctl"), "not-executable": None, "mount.lustre": None}
    first = run_module("host_probe", probe(doubles, tmp_path, tools=["lctl"], tool_dirs=[str(sbin)]))
    assert first["tools"] == {"lctl": str(sbin / "lctl")}


def test_packages_installed_versions_only(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    doubles.set_state(host={"packages": {
        "fio": [["installed", "3.33-3"]],
        "iperf3": [["config-files", "3.12-1"]],
        "libnccl2": [["not-installed", ""], ["installed", "2.21.5-1+cuda12.4"], ["installed", "2.21.5-1+cuda12.2"]],
    }})
    result = run_module("host_probe", probe(doubles, tmp_path, packages=["fio", "iperf3", "libnccl2", "ior"]))
    assert result.get("failed") is not True, result
    # dpkg-query exits 1 for the package it does not know: an answer, not an error.
    assert result["packages"] == {"fio": "3.33-3", "libnccl2": "2.21.5-1+cuda12.4"}
    doubles.set_state(host={"dpkg_rc": 2})
    broken = run_module("host_probe", probe(doubles, tmp_path, packages=["fio"]))
    assert broken["failed"] is True
    assert broken["msg"] == "dpkg-query -W exited 2: dpkg-query: error: parsing file '/var/lib/dpkg/status'"


def test_versions_run_without_a_shell_and_may_fail_the_probe(run_module: ModuleRunner, doubles: Doubles,
                                                             tmp_path: Path) -> None:
    weed = tmp_path / "weed"
    weed.write_text("#!/bin/sh\necho 'version 30GB 3.39 51d4a4b2 linux amd64'\necho warning >&2\nexit \"$1\"\n")
    weed.chmod(0o755)
    result = run_module("host_probe", probe(doubles, tmp_path, versions=[
        {"name": "ok", "argv": [str(weed), "0"]},
        {"name": "failed", "argv": [str(weed), "3"]},
        {"name": "absent", "argv": [str(tmp_path / "warp"), "--version"]},
    ]))
    assert result["versions"] == {
        "ok": {"rc": 0, "stdout": "version 30GB 3.39 51d4a4b2 linux amd64", "stderr": "warning"},
        "failed": {"rc": 3, "stdout": "version 30GB 3.39 51d4a4b2 linux amd64", "stderr": "warning"},
        "absent": None,
    }
    strict = run_module("host_probe", probe(doubles, tmp_path, versions=[
        {"name": "weed", "argv": [str(weed), "3"], "fail_on_error": True}]))
    assert strict["failed"] is True and strict["msg"] == f"{weed} 3 exited 3: warning"


# --------------------------------------------------------------------------------------------- container


@pytest.mark.parametrize(("state", "expected"), [
    ({"container": "podman"}, {"kind": "podman", "in_container": True}),
    ({"container": "none"}, {"kind": "none", "in_container": False}),
])
def test_systemd_detect_virt_decides(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path,
                                     state: dict[str, Any], expected: dict[str, Any]) -> None:
    (tmp_path / ".dockerenv").write_text("")
    doubles.set_state(host=state)
    result = run_module("host_probe", probe(doubles, tmp_path, container=True))
    assert result["container"] == {**expected, "source": "systemd-detect-virt", "markers": ["/.dockerenv"]}


def test_a_failing_systemd_detect_virt_fails_the_probe(run_module: ModuleRunner, doubles: Doubles,
                                                       tmp_path: Path) -> None:
    doubles.set_state(host={"detect_virt_rc": 2})
    result = run_module("host_probe", probe(doubles, tmp_path, container=True))
    assert result["failed"] is True
    assert result["msg"] == ("systemd-detect-virt --container exited 2: "
                             "systemd-detect-virt: Failed to check for container: Permission denied")


@pytest.mark.parametrize(("files", "expected"), [
    ({"run/.containerenv": "engine=\"podman-4.3.1\"\n"}, ("podman", "/run/.containerenv")),
    ({".dockerenv": ""}, ("docker", "/.dockerenv")),
    ({"proc/1/environ": "PATH=/usr/bin\0container=lxc\0"}, ("lxc", "/proc/1/environ")),
    ({"proc/1/environ": "PATH=/usr/bin\0"}, ("none", "markers")),
])
def test_without_systemd_detect_virt_the_markers_decide(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path,
                                                         files: dict[str, str], expected: tuple[str, str]) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    result = run_module("host_probe", {**probe(doubles, tmp_path, container=True),
                                       "systemd_detect_virt": str(tmp_path / "no-such-tool")})
    kind, source = expected
    assert result["container"]["kind"] == kind and result["container"]["source"] == source
    assert result["container"]["in_container"] is (kind != "none")


def test_nothing_is_asked_that_was_not_asked_for(run_module: ModuleRunner, doubles: Doubles, tmp_path: Path) -> None:
    result = run_module("host_probe", probe(doubles, tmp_path))
    assert result.get("failed") is not True, result
    assert doubles.calls() == []
    assert {k: v for k, v in result.items() if k not in ("changed", "invocation")} == {
        "paths": {}, "units": {}, "mounts": {}, "users": {}, "groups": {}, "kernel_modules": {},
        "module_parameters": [], "interfaces": {}, "tools": {}, "packages": {}, "versions": {}, "container": None,
        "pci": [], "systemd_version": None}


def test_ansible_doc_parses_the_documentation(tmp_path: Path) -> None:
    proc = subprocess.run([str(ANSIBLE_DOC), "-j", "kiln.cluster.host_probe"],
                          capture_output=True, text=True, env=collection_env(tmp_path), check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["kiln.cluster.host_probe"]
    assert doc["doc"]["module"] == "host_probe" and doc["examples"].strip() and doc["return"]
    assert doc["doc"]["author"] == ["kiln maintainers (@kiln)"]
    documented = set(doc["doc"]["options"])
    if str(COLLECTIONS) not in sys.path:
        sys.path.append(str(COLLECTIONS))
    module = importlib.import_module("ansible_collections.kiln.cluster.plugins.modules.host_probe")
    assert documented == set(module.ARGUMENT_SPEC), "every option is documented, and only those"
    assert set(doc["return"]) == {"paths", "units", "mounts", "users", "groups", "kernel_modules", "module_parameters",
                                  "interfaces", "tools", "packages", "versions", "container", "pci",
                                  "systemd_version"}


def test_the_module_keeps_to_python_3_9_and_the_standard_library() -> None:
    """It runs on the managed node: Python 3.9 syntax, and nothing imported beyond the standard library and
    Ansible's module_utils (which AnsiballZ ships); the documentation comes before the imports."""
    source = (MODULES / "host_probe.py").read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 9))
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= set(sys.stdlib_module_names) | {"ansible"}
    assert "ansible_collections" not in source
    first_import = next(n.lineno for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)
                        and not (isinstance(n, ast.ImportFrom) and n.module == "__future__"))
    docs = [n.lineno for n in tree.body if isinstance(n, ast.Assign)
            and getattr(n.targets[0], "id", "") in ("DOCUMENTATION", "EXAMPLES", "RETURN")]
    assert len(docs) == 3 and max(docs) < first_import
