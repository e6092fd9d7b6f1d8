"""GPU: host↔device copy bandwidth with nvbandwidth (preferred) or the CUDA samples' bandwidthTest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks.check import Check, CheckError, Rep, Sample, Subject, register
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Variables, var
from kiln.verify.checks.remote import quote, run_tool
from kiln.verify.parsers import GpuCopyResult, parse_bandwidth_test, parse_nvbandwidth

RUNBOOK = "docs/runbooks/acceptance-gpu.md"


@dataclass(frozen=True, slots=True)
class GpuCopyVariables(Variables):
    scope = "gpu"
    tool: Literal["auto", "nvbandwidth", "bandwidthTest"] = var("auto", "which tool measures: auto prefers "
                                                                "nvbandwidth, then bandwidthTest")
    nvbandwidth_path: str = var("nvbandwidth", "the nvbandwidth binary")
    bandwidth_test_path: str = var("bandwidthTest", "the CUDA samples' bandwidthTest binary")


class CopyBw(Check):
    direction = "h2d"
    runbook = RUNBOOK
    tools = ("nvbandwidth", "bandwidthTest")
    parallel_hosts = True
    variables = (GpuCopyVariables,)

    def _tool(self, ctx: Context, host: str) -> str:
        v = ctx.var(GpuCopyVariables)
        order = {"auto": ("nvbandwidth", "bandwidthTest"), "nvbandwidth": ("nvbandwidth",),
                 "bandwidthTest": ("bandwidthTest",)}[v.tool]
        for name in order:
            path = v.nvbandwidth_path if name == "nvbandwidth" else v.bandwidth_test_path
            if ctx.run(host, f"command -v {quote(path)}", 30).ok:
                return name
        raise CheckError(f"{host}: neither nvbandwidth nor bandwidthTest is installed "
                         "(build github.com/NVIDIA/nvbandwidth or the CUDA samples; "
                         "--option gpu.nvbandwidth_path=PATH)")

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        v, timeout = ctx.var(GpuCopyVariables), ctx.options.command_timeout_s
        host = subject.hosts[0]
        tool = self._tool(ctx, host)
        res: GpuCopyResult
        if tool == "nvbandwidth":
            case = "host_to_device_memcpy_ce" if self.direction == "h2d" else "device_to_host_memcpy_ce"
            res, r = run_tool(
                ctx, host, tool=tool, command=f"{quote(v.nvbandwidth_path)} -t {case}", timeout=timeout,
                parse=parse_nvbandwidth,
            )
        else:
            flag = "--htod" if self.direction == "h2d" else "--dtoh"
            cmd = f"{quote(v.bandwidth_test_path)} --memory=pinned --mode=quick {flag}"
            res, r = run_tool(
                ctx, host, tool=tool, command=cmd, timeout=timeout,
                parse=parse_bandwidth_test,
            )
        value = res.h2d_Bps if self.direction == "h2d" else res.d2h_Bps
        if value is None:
            raise CheckError(f"{tool} printed no {self.direction} figure")
        ph = ctx.plan_host(host)
        # nvbandwidth sums over all GPUs; the target is per GPU (one PCIe x16 link)
        gpus = ph.gpus if ph and ph.gpus and tool == "nvbandwidth" else 1
        return Sample(value / gpus / 1e9, raw={f"{tool}.txt": r.stdout}, info={"tool": tool, "gpus_summed": gpus})


@register
class H2d(CopyBw):
    id = "gpu.h2d_bw"
    direction = "h2d"


@register
class D2h(CopyBw):
    id = "gpu.d2h_bw"
    direction = "d2h"
