"""scripts/gpu-evidence.sh, the GPU node evidence run: without a GPU or a tool every step says "not applicable on
this host: <reason>" and the run exits 3 (evidence missing), never 0; what it keeps is what kiln's parsers read.
The GPU tools here are TEST DOUBLE scripts written into tmp_path, which print published outputs (fixtures)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kiln.verify.parsers import parse_nvbandwidth, parse_nvidia_smi_csv

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "gpu-evidence.sh"
FIXTURES = ROOT / "tests" / "fixtures" / "tools"
STEPS = ["nvidia_smi", "h2d", "d2h", "nccl", "dcgm_diag"]
NVIDIA_SMI_CSV = ("index, name, persistence_mode, driver_version, memory.total [MiB], pcie.link.gen.current, "
                  "pcie.link.width.current\n0, NVIDIA H100 80GB HBM3, Enabled, 590.48.01, 81559 MiB, 5, 16\n")


def double(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!/usr/bin/env bash\n# TEST DOUBLE of {name}\n{body}\n")
    path.chmod(0o755)
    return str(path)


def evidence(tmp_path: Path, **tools: str) -> tuple[int, dict[str, str], Path]:
    """Run the script with the given tools (the others point at paths that do not exist)."""
    missing = str(tmp_path / "absent")
    env = {**os.environ, "GPU_EVIDENCE_BUDGET_S": "20",
           **{k: missing for k in ("NVIDIA_SMI", "NVBANDWIDTH", "BANDWIDTH_TEST", "ALL_REDUCE_PERF", "DCGMI")},
           **tools}
    out = tmp_path / "out"
    rc = subprocess.run(["bash", str(SCRIPT), str(out)], env=env, capture_output=True, text=True, timeout=60,
                        check=False).returncode
    lines = (out / "summary.txt").read_text().splitlines()
    summary = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in lines}
    return rc, summary, out


def test_without_a_gpu_every_step_is_not_applicable_with_its_reason(tmp_path: Path) -> None:
    rc, summary, out = evidence(tmp_path)
    assert rc == 3
    assert list(summary) == STEPS
    assert all(s == "not applicable on this host: no nvidia-smi: no NVIDIA driver on this host"
               for s in summary.values()), summary
    facts = (out / "facts.txt").read_text()
    assert "kernel: " in facts and "nvidia driver: none" in facts


def test_a_driver_that_does_not_answer_is_an_error_and_the_rest_not_applicable(tmp_path: Path) -> None:
    smi = double(tmp_path, "nvidia-smi", "echo \"NVIDIA-SMI has failed because it couldn't communicate with the "
                                         "NVIDIA driver.\"; exit 9")
    rc, summary, _ = evidence(tmp_path, NVIDIA_SMI=smi)
    assert rc == 3
    assert summary["nvidia_smi"].startswith(f"error: {smi} exited 9: NVIDIA-SMI has failed")
    assert all(summary[s] == "not applicable on this host: nvidia-smi lists no GPU (summary line nvidia_smi)"
               for s in STEPS[1:])


def test_what_it_measures_is_what_kilns_parsers_read_and_missing_tools_are_named(tmp_path: Path) -> None:
    smi = double(tmp_path, "nvidia-smi", f"cat <<'EOF'\n{NVIDIA_SMI_CSV}EOF")
    fixture = FIXTURES / "cuda" / "nvbandwidth_v0.2_8gpu.txt"
    nvb = double(tmp_path, "nvbandwidth", f'echo "$@" >>"{tmp_path}/nvbandwidth.args"; cat {fixture}')
    rc, summary, out = evidence(tmp_path, NVIDIA_SMI=smi, NVBANDWIDTH=nvb)
    assert rc == 3  # nccl-tests and DCGM are missing: the evidence is not complete
    assert summary["h2d"].startswith(f"measured ({nvb}") and summary["d2h"].startswith("measured")
    assert summary["nccl"] == ("not applicable on this host: nccl-tests' all_reduce_perf is not installed "
                               "(github.com/NVIDIA/nccl-tests)")
    assert summary["dcgm_diag"].startswith("not applicable on this host: dcgmi is not installed")
    assert (tmp_path / "nvbandwidth.args").read_text().split() == [
        "-t", "host_to_device_memcpy_ce", "-t", "device_to_host_memcpy_ce"]
    assert [g.name for g in parse_nvidia_smi_csv((out / "nvidia_smi.txt").read_text())] == ["NVIDIA H100 80GB HBM3"]
    assert parse_nvbandwidth((out / "h2d.txt").read_text()).h2d_Bps
    assert (out / "h2d.rc").read_text().strip() == "0" and "nvbandwidth -t host_to_device_memcpy_ce" in (
        out / "h2d.cmd").read_text()


@pytest.mark.parametrize("hang", [False, True])
def test_every_step_present_is_measured_or_bounded_by_its_limit(tmp_path: Path, hang: bool) -> None:
    smi = double(tmp_path, "nvidia-smi", f"cat <<'EOF'\n{NVIDIA_SMI_CSV}EOF")
    nvb = double(tmp_path, "nvbandwidth", f"cat {FIXTURES / 'cuda' / 'nvbandwidth_v0.2_8gpu.txt'}")
    nccl = double(tmp_path, "all_reduce_perf", "sleep 30" if hang else f'[ "$*" = "-b 1M -e 1G -f 2 -g 1" ] && '
                  f"cat {FIXTURES / 'nccl' / 'all_reduce_intra_8gpu.txt'}")
    dcgmi = double(tmp_path, "dcgmi", 'echo "Diagnostic | Result"; echo "Deployment | Pass"')
    rc, summary, _ = evidence(tmp_path, NVIDIA_SMI=smi, NVBANDWIDTH=nvb, ALL_REDUCE_PERF=nccl, DCGMI=dcgmi)
    if hang:
        assert rc == 3 and summary["nccl"] == f"error: {nccl} ran past its 3 s limit"
    else:
        assert rc == 0 and all(s.startswith("measured") for s in summary.values()), summary
