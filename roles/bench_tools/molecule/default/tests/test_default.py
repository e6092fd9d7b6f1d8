"""Testinfra checks for role bench_tools: real tools installed, versions recorded truthfully."""

import json
import pathlib

import pytest

WARP_SRC = pathlib.Path(__file__).resolve().parents[5] / ".tools" / "bin" / "warp"


@pytest.fixture(scope="module")
def state(host):
    f = host.file("/etc/kiln/bench-tools.json")
    assert f.is_file and f.mode == 0o644
    return json.loads(f.content_string)


@pytest.mark.parametrize(
    ("tool", "cmd", "expect"),
    [
        ("fio", "fio --version", "fio-"),
        ("iperf3", "iperf3 --version", "iperf 3"),
        ("perftest", "ib_write_bw --help", "ib_write_bw"),
        ("jq", "jq --version", "jq-"),
        ("zstd", "zstd --version", "Zstandard"),
    ],
)
def test_debian_tools_run_and_are_recorded(host, state, tool, cmd, expect):
    out = host.run(cmd)
    assert expect in out.stdout + out.stderr
    rec = state["tools"][tool]
    assert rec["installed"] is True and rec["reason"] == ""
    assert rec["version"] == host.package(tool).version
    assert host.file(rec["path"]).is_file


def test_ior_not_built_by_default(host, state):
    for tool in ("ior", "mdtest"):
        rec = state["tools"][tool]
        assert rec["installed"] is False and rec["path"] is None
        assert rec["reason"] == "skipped: bench_tools_build_ior is false"
        assert not host.exists(tool)
    assert "cb17f6b0d17fb98dae28abaa116fd3adde411f52d45ff9efb125efc791b97463" in state["tools"]["ior"]["source"]


def test_nccl_tests_not_applicable_without_cuda(host, state):
    rec = state["tools"]["nccl-tests"]
    assert not host.file("/usr/local/cuda/bin/nvcc").exists
    assert rec["installed"] is False
    assert rec["reason"].startswith("not applicable on this host: no CUDA toolkit")


def test_warp(host, state):
    rec = state["tools"]["warp"]
    if not WARP_SRC.is_file():
        assert rec["installed"] is False and rec["reason"] == "skipped: bench_tools_warp_src is empty"
        assert not host.file("/usr/local/bin/warp").exists
        return
    f = host.file("/usr/local/bin/warp")
    assert f.is_file and f.mode == 0o755
    out = host.check_output("/usr/local/bin/warp --version")
    assert rec["installed"] is True and rec["version"] and rec["version"] in out
    assert f.sha256sum == rec["sha256"]
