"""The compatibility matrix (kiln/knowledge/compat.yaml): the shipped pins pass, a known-bad pair is refused."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.knowledge import compat
from kiln.plan import build_plan
from kiln.spec import SpecError
from kiln.spec.loader import validate
from tests.conftest import STACKS, stack_data


def _issues(stack: str, **versions: Any) -> list[tuple[str, str]]:
    data = stack_data(stack)
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
    issues = _issues("lab", kernel="6.12")
    assert [p for p, _ in issues] == ["versions.kernel"] and "DOCA-Host 2.9" in issues[0][1]


def test_nccl_without_a_build_for_the_cuda_version_is_refused() -> None:
    issues = _issues("lab", cuda="12.1", gpu_driver=550)
    assert [p for p, _ in issues] == ["versions.nccl"] and "no build for CUDA 12.1" in issues[0][1]


def test_lustre_clients_and_servers_across_2_15_and_2_16_interoperate() -> None:
    assert _issues("lab", lustre="2.16", lustre_client="2.15") == []
    assert _issues("lab", lustre="2.15", lustre_client="2.16") == []


def test_an_unknown_cuda_version_names_the_known_ones() -> None:
    issues = _issues("lab", cuda="13.9")
    assert issues[0][0] == "versions.cuda" and "is not in the compatibility matrix" in issues[0][1]


def test_every_matrix_entry_has_a_reason_and_a_source() -> None:
    m = compat.load()
    for table in (m.lustre_interop, m.cuda_driver, m.nccl_cuda, m.doca_kernel):
        for entry in table.values():
            assert entry.reason.strip() and entry.source.strip()
