#!/usr/bin/env bash
# gpu-evidence.sh - collect a GPU node's evidence in one bounded run: the raw outputs of the commands kiln
# verify's GPU checks run, with the host facts that say where they were taken.
#
# Usage: scripts/gpu-evidence.sh OUT_DIR
#
# Steps, each under its own timeout (the whole run stays under GPU_EVIDENCE_BUDGET_S, 300 s by default, so a
# lent machine has time for a rerun):
#   nvidia_smi    nvidia-smi --query-gpu=... --format=csv        (conformance.gpus reads these columns)
#   h2d, d2h      nvbandwidth -t host_to_device_memcpy_ce / device_to_host_memcpy_ce, else the CUDA samples'
#                 bandwidthTest --memory=pinned --mode=quick --htod / --dtoh             (gpu.h2d_bw, gpu.d2h_bw)
#   nccl          nccl-tests all_reduce_perf -b 1M -e 1G -f 2 -g <GPUs> on this node (fabric.nccl_allreduce_intra)
#   dcgm_diag     dcgmi diag -r 1                                 (DCGM's quick diagnostics, where DCGM is installed)
#
# For each step OUT_DIR holds STEP.cmd (the command), STEP.txt (stdout), STEP.stderr and STEP.rc, and
# summary.txt one line per step: "measured" (raw output kept; kiln's parsers judge it, this script never does),
# "not applicable on this host: <reason>" (no GPU, no such tool) or "error: <what failed>". facts.txt records the
# date, host, kernel, OS, driver and CUDA: the provenance that a fixture made from these outputs cites in its
# NAME.source (as the fixtures under tests/fixtures/tools/ do; docs/benchmarks.md, "GPU node evidence").
#
# Exit status: 0 when every step was measured, 3 when evidence is missing (kiln verify's INCOMPLETE), 2 on bad
# usage. Nothing here counts as a pass.
#
# Environment: NVIDIA_SMI, NVBANDWIDTH, BANDWIDTH_TEST, ALL_REDUCE_PERF, DCGMI (the tools; default: found on
# PATH), GPU_EVIDENCE_BUDGET_S (default 300).
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
OUT="$1"
mkdir -p "$OUT"
: >"$OUT/summary.txt"
BUDGET="${GPU_EVIDENCE_BUDGET_S:-300}"
NVIDIA_SMI="${NVIDIA_SMI:-nvidia-smi}"
NVBANDWIDTH="${NVBANDWIDTH:-nvbandwidth}"
BANDWIDTH_TEST="${BANDWIDTH_TEST:-bandwidthTest}"
ALL_REDUCE_PERF="${ALL_REDUCE_PERF:-all_reduce_perf}"
DCGMI="${DCGMI:-dcgmi}"
# Per-step limits, a share of the budget: the query is short; the copies, NCCL and DCGM get the rest.
T_QUERY=$(( BUDGET / 10 ))
T_STEP=$(( BUDGET * 9 / 50 ))
MISSING=0

say() {  # say STEP STATUS: one line of summary.txt, echoed
    printf '%-10s %s\n' "$1" "$2" | tee -a "$OUT/summary.txt"
}

na() {  # na STEP REASON
    say "$1" "not applicable on this host: $2"
    MISSING=1
}

have() {
    command -v "$1" >/dev/null 2>&1
}

# run STEP SECONDS CMD...: keep the command, its outputs and exit status; "measured" only on exit 0.
run() {
    local step="$1" limit="$2"; shift 2
    printf '%s\n' "$*" >"$OUT/$step.cmd"
    local rc=0
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$step.txt" 2>"$OUT/$step.stderr" || rc=$?
    echo "$rc" >"$OUT/$step.rc"
    if [[ "$rc" -eq 0 ]]; then
        say "$step" "measured ($1, ${limit} s limit)"
    elif [[ "$rc" -eq 124 || "$rc" -eq 137 ]]; then
        say "$step" "error: $1 ran past its ${limit} s limit"
        MISSING=1
    else
        local why
        why="$(tail -c 300 "$OUT/$step.stderr")"
        [[ -n "$why" ]] || why="$(tail -c 300 "$OUT/$step.txt")"
        say "$step" "error: $1 exited $rc: $(printf '%s' "$why" | tr '\n' ' ')"
        MISSING=1
    fi
    return 0
}

facts() {
    {
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "host: $(hostname)"
        echo "kernel: $(uname -r) $(uname -m)"
        echo "os: $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"')"
        echo "nvidia driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo none)"
        if have "$NVIDIA_SMI"; then
            echo "nvidia-smi: $(timeout 30 "$NVIDIA_SMI" 2>/dev/null | grep -m1 -o 'Driver Version.*' || echo unreadable)"
        fi
        echo "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none)"
        echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') × $(nproc)"
    } >"$OUT/facts.txt"
}

# The copy steps: nvbandwidth where it is installed, else bandwidthTest; neither is not applicable.
copies() {
    if have "$NVBANDWIDTH"; then
        run h2d "$T_STEP" "$NVBANDWIDTH" -t host_to_device_memcpy_ce
        run d2h "$T_STEP" "$NVBANDWIDTH" -t device_to_host_memcpy_ce
    elif have "$BANDWIDTH_TEST"; then
        run h2d "$T_STEP" "$BANDWIDTH_TEST" --memory=pinned --mode=quick --htod
        run d2h "$T_STEP" "$BANDWIDTH_TEST" --memory=pinned --mode=quick --dtoh
    else
        na h2d "neither nvbandwidth nor bandwidthTest is installed (github.com/NVIDIA/nvbandwidth)"
        na d2h "neither nvbandwidth nor bandwidthTest is installed (github.com/NVIDIA/nvbandwidth)"
    fi
}

facts
if ! have "$NVIDIA_SMI"; then
    for step in nvidia_smi h2d d2h nccl dcgm_diag; do
        na "$step" "no nvidia-smi: no NVIDIA driver on this host"
    done
    exit 3
fi
run nvidia_smi "$T_QUERY" "$NVIDIA_SMI" \
    --query-gpu=index,name,persistence_mode,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
    --format=csv
GPUS=$(( $(grep -c . "$OUT/nvidia_smi.txt" || true) - 1 ))
if [[ "$(cat "$OUT/nvidia_smi.rc")" -ne 0 || "$GPUS" -lt 1 ]]; then
    for step in h2d d2h nccl dcgm_diag; do
        na "$step" "nvidia-smi lists no GPU (summary line nvidia_smi)"
    done
    exit 3
fi
copies
if have "$ALL_REDUCE_PERF"; then
    run nccl "$T_STEP" "$ALL_REDUCE_PERF" -b 1M -e 1G -f 2 -g "$GPUS"
else
    na nccl "nccl-tests' all_reduce_perf is not installed (github.com/NVIDIA/nccl-tests)"
fi
if have "$DCGMI"; then
    run dcgm_diag "$T_STEP" "$DCGMI" diag -r 1
else
    na dcgm_diag "dcgmi is not installed (DCGM: datacenter-gpu-manager)"
fi
exit $(( MISSING * 3 ))
