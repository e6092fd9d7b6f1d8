"""The compatibility matrix (kiln/knowledge/compat.yaml): the shipped pins pass, a known-bad pair is refused."""

from __future__ import annotations

from typing import Any, get_args

import pytest
import yaml

from kiln.knowledge import compat
from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import SpecError
from kiln.spec.loader import validate
from kiln.spec.models import Lustre
from kiln.yamlio import load_inventory
from tests.conftest import ROOT, STACKS, stack_data


def _issues(stack: str, rdma_stack: str = "inbox", **versions: Any) -> list[tuple[str, str]]:
    data = stack_data(stack)
    data["fabric"]["rdma_stack"] = rdma_stack
    lustre = versions.pop("lustre", None)
    if lustre:
        data["lustre"]["version"] = lustre
    data["versions"] = versions
    try:
        build_plan(validate(data))
    except SpecError as exc:
        return [(i.path, i.problem) for i in exc.issues]
    return []


@pytest.mark.parametrize("stack", STACKS)
def test_the_shipped_stacks_pin_a_supported_combination(stack: str) -> None:
    v = build_plan(validate(stack_data(stack))).versions
    assert (v.gpu_driver, v.cuda, v.nccl, v.doca, v.kernel) == (550, "12.4", "2.21.5", "2.9", "6.1")
    assert v.lustre_client == v.lustre_server


def test_a_driver_older_than_the_cuda_toolkit_needs_is_refused() -> None:
    issues = _issues("lab", gpu_driver=535, cuda="12.4")
    assert [p for p, _ in issues] == ["versions.gpu_driver"]
    assert "CUDA 12.4" in issues[0][1] and "550.54.14" in issues[0][1] and "Table 3" in issues[0][1]


def test_a_kernel_doca_has_no_driver_for_is_refused() -> None:
    issues = _issues("prod-h100", rdma_stack="doca", kernel="6.12")
    assert [p for p, _ in issues] == ["versions.kernel"] and "DOCA-Host 2.9" in issues[0][1]
    assert _issues("prod-h100", kernel="6.12") == []  # the distribution's own RDMA stack: no DOCA-Host to match


def test_doca_reaches_the_rdma_role_as_its_line_s_point_release() -> None:
    """fabric.rdma_stack: doca turns the rdma role's DOCA-Host repository on, at the release compat.yaml pins for
    versions.doca; the default (inbox) leaves it off and records no DOCA version to diff."""
    data = stack_data("prod-h100")
    data["fabric"]["rdma_stack"] = "doca"
    doca = build_plan(validate(data))
    inbox = build_plan(validate(stack_data("prod-h100")))
    assert doca.versions.doca_release == compat.load().doca_kernel["2.9"].release == "2.9.1"
    for plan, on in ((doca, True), (inbox, False)):
        files = render_inventory(plan)
        group = load_inventory(files["group_vars/all/kiln.yml"])
        assert group["rdma_doca_repo"] is on and group["rdma_doca_release"] == "2.9.1"


def test_the_driver_branch_and_its_module_flavor_reach_the_gpu_role() -> None:
    data = stack_data("prod-h100")
    data["versions"] = {"gpu_driver": 570, "cuda": "12.4", "gpu_kernel_modules": "proprietary"}
    files = render_inventory(build_plan(validate(data)))
    pool = load_inventory(files["group_vars/kiln_pool_h100.yml"])
    assert (pool["gpu_driver_branch"], pool["gpu_kernel_modules"]) == (570, "proprietary")


def test_open_modules_need_a_branch_that_has_them() -> None:
    issues = _issues("prod-h100", gpu_driver=470, cuda="11.4") + _issues("prod-h100", gpu_driver=470)
    assert ("versions.gpu_kernel_modules", "driver branch 470 has no open kernel modules (the first is 515)") in issues
    assert not [p for p, _ in _issues("prod-h100", gpu_driver=550) if p == "versions.gpu_kernel_modules"]


def test_blackwell_refuses_the_proprietary_modules() -> None:
    data = stack_data("prod-h100")
    data["compute"]["pools"][0]["gpu"]["model"] = "b200-sxm"
    data["versions"] = {"gpu_kernel_modules": "proprietary"}
    with pytest.raises(SpecError) as exc:
        build_plan(validate(data))
    issue = next(i for i in exc.value.issues if i.path == "versions.gpu_kernel_modules")
    assert "b200-sxm" in issue.problem and issue.fix == "set versions.gpu_kernel_modules: open"
    data["versions"] = {"gpu_kernel_modules": "open"}
    assert not [i for i in _plan_issues(data) if i.path == "versions.gpu_kernel_modules"]


def _plan_issues(data: dict[str, Any]) -> list[Any]:
    try:
        build_plan(validate(data))
    except SpecError as exc:
        return list(exc.issues)
    return []


def test_doca_on_a_tcp_fabric_is_refused_with_the_field_and_the_fix() -> None:
    data = stack_data("lab")
    assert data["fabric"]["kind"] == "tcp"
    data["fabric"]["rdma_stack"] = "doca"
    with pytest.raises(SpecError) as exc:
        build_plan(validate(data))
    issue = next(i for i in exc.value.issues if i.path == "fabric.rdma_stack")
    assert issue.value == "doca" and "inbox" in issue.fix


def test_nccl_without_a_build_for_the_cuda_version_is_refused() -> None:
    issues = _issues("lab", cuda="12.1", gpu_driver=550)
    assert [p for p, _ in issues] == ["versions.nccl"] and "no build for CUDA 12.1" in issues[0][1]


def test_lustre_clients_and_servers_across_2_15_and_2_16_interoperate() -> None:
    assert _issues("lab", lustre="2.16", lustre_client="2.15") == []
    assert _issues("lab", lustre="2.15", lustre_client="2.16") == []


def test_an_unknown_cuda_version_names_the_known_ones() -> None:
    issues = _issues("lab", cuda="13.9")
    assert issues[0][0] == "versions.cuda" and "is not in the compatibility matrix" in issues[0][1]


def test_a_seaweedfs_release_kiln_has_no_build_of_is_refused_and_the_pin_reaches_the_role() -> None:
    issues = _issues("lab", seaweedfs="4.05")
    assert [p for p, _ in issues] == ["versions.seaweedfs"] and "3.39, 4.34, 4.35" in str(
        validate_error("lab", seaweedfs="4.05"))
    assert _issues("lab", seaweedfs="4.35") == []
    data = stack_data("lab")
    data["versions"] = {"seaweedfs": "4.35"}
    plan = build_plan(validate(data))
    assert plan.versions.seaweedfs == plan.objectstore.version == "4.35"
    files = render_inventory(plan)
    assert any(load_inventory(text).get("objectstore_seaweedfs_version") == "4.35"
               for name, text in files.items() if name.startswith("group_vars/"))


def test_a_seaweedfs_release_with_a_known_read_after_write_defect_is_refused_with_it() -> None:
    for release in ("4.30", "4.31"):
        [(path, message)] = _issues("lab", seaweedfs=release)
        assert path == "versions.seaweedfs" and "NoSuchKey" in message and "owner filer" in message
        assert "pin one of 3.39, 4.34, 4.35" in str(validate_error("lab", seaweedfs=release))


def validate_error(stack: str, **versions: Any) -> SpecError:
    data = stack_data(stack)
    data["versions"] = versions
    with pytest.raises(SpecError) as info:
        build_plan(validate(data))
    return info.value


def test_every_matrix_entry_has_a_reason_and_a_source() -> None:
    m = compat.load()
    for table in (m.lustre_interop, m.cuda_driver, m.nccl_cuda, m.doca_kernel, m.seaweedfs_releases):
        for entry in table.values():
            assert entry.reason.strip() and entry.source.strip()


def _release_vars(lustre: str, lustre_client: str | None = None) -> dict[str, Any]:
    """The Whamcloud release variables the inventory of the dev stack pinned to these lines gives the roles."""
    data = stack_data("dev")
    data["lustre"]["version"] = lustre
    data["versions"] = {"lustre_client": lustre_client} if lustre_client else {}
    files = render_inventory(build_plan(validate(data)))
    out: dict[str, Any] = {}
    for name in ("group_vars/all/kiln.yml", "group_vars/kiln_lustre_servers.yml"):
        out.update({k: v for k, v in load_inventory(files[name]).items() if "_whamcloud_" in k})
    return out


@pytest.mark.parametrize(("line", "release"), [("2.15", "2.15.7"), ("2.16", "2.16.1")])
def test_the_lustre_line_reaches_the_roles_whamcloud_release(line: str, release: str) -> None:
    entry = compat.load().lustre_releases[line]
    assert entry.release == release
    assert _release_vars(line) == {
        "lustre_server_whamcloud_release": release, "lustre_server_whamcloud_el": entry.server_el,
        "lustre_client_whamcloud_release": release, "lustre_client_whamcloud_el": entry.client_el,
        "lustre_client_whamcloud_ubuntu": entry.client_ubuntu,
    }
    # The ChangeLogs' client primary kernels: 2.15.7 built Ubuntu 22.04's modules for 5.15.0-88, 2.16.1 none
    # for an Ubuntu release kiln supports.
    assert entry.client_ubuntu == ({"22.04": "5.15.0-88"} if line == "2.15" else {})


def test_clients_pinned_to_another_line_install_that_lines_release() -> None:
    got = _release_vars("2.16", lustre_client="2.15")
    assert (got["lustre_server_whamcloud_release"], got["lustre_client_whamcloud_release"]) == ("2.16.1", "2.15.7")
    assert got["lustre_server_whamcloud_el"] == {"8": "8.10", "9": "9.4"}
    assert got["lustre_client_whamcloud_el"] == {"8": "8.10", "9": "9.6"}


def test_whamcloud_builds_2_15_servers_for_el8_only() -> None:
    assert compat.load().lustre_releases["2.15"].server_el == {"8": "8.10"}


def test_every_lustre_line_of_the_spec_has_a_whamcloud_release() -> None:
    lines = set(get_args(Lustre.model_fields["version"].annotation))
    assert lines and lines <= set(compat.load().lustre_releases)


def test_a_lustre_line_without_a_release_is_refused_by_the_matrix() -> None:
    data = compat.load().model_dump(by_alias=True)
    del data["lustre_releases"]["2.16"]
    with pytest.raises(ValueError, match="no entry for the Lustre line"):
        compat.CompatFile.model_validate(data)


@pytest.mark.parametrize(("role", "el"), [("lustre_server", "server_el"), ("lustre_client", "client_el")])
def test_the_roles_defaults_are_the_default_lines_release(role: str, el: str) -> None:
    """A role run without kiln's inventory installs what a stack of the default lustre.version would."""
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text(encoding="utf-8"))
    entry = compat.load().lustre_releases[Lustre.model_fields["version"].default]
    assert defaults[f"{role}_whamcloud_release"] == entry.release
    assert defaults[f"{role}_whamcloud_el"] == getattr(entry, el)
