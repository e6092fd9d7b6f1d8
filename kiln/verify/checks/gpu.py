"""GPU: host↔device copy bandwidth with nvbandwidth (preferred) or the CUDA samples' bandwidthTest."""

from __future__ import annotations

from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks.base import Check, CheckError, Context, Rep, Sample, Subject, quote, register, tool_finished
from kiln.verify.parsers import GpuCopyResult, parse_bandwidth_test, parse_nvbandwidth

RUNBOOK = "docs/runbooks/acceptance-gpu.md"


class CopyBw(Check):
    direction = "h2d"
    runbook = RUNBOOK
    tools = ("nvbandwidth", "bandwidthTest")
    parallel_hosts = True

    def _tool(self, ctx: Context, host: str) -> str:
        o = ctx.options
        order = {"auto": ("nvbandwidth", "bandwidthTest"), "nvbandwidth": ("nvbandwidth",),
                 "bandwidthTest": ("bandwidthTest",)}[o.gpu_tool]
        for name in order:
            path = o.nvbandwidth_path if name == "nvbandwidth" else o.bandwidth_test_path
            if ctx.run(host, f"command -v {quote(path)}", 30).ok:
                return name
        raise CheckError(f"{host}: neither nvbandwidth nor bandwidthTest is installed "
                         "(build github.com/NVIDIA/nvbandwidth or the CUDA samples; --option nvbandwidth_path=PATH)")

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        o = ctx.options
        host = subject.hosts[0]
        tool = self._tool(ctx, host)
        res: GpuCopyResult
        if tool == "nvbandwidth":
            case = "host_to_device_memcpy_ce" if self.direction == "h2d" else "device_to_host_memcpy_ce"
            r = ctx.run(host, f"{quote(o.nvbandwidth_path)} -t {case}", o.command_timeout_s)
            res = parse_nvbandwidth(r.stdout, r.stderr)
        else:
            flag = "--htod" if self.direction == "h2d" else "--dtoh"
            cmd = f"{quote(o.bandwidth_test_path)} --memory=pinned --mode=quick {flag}"
            r = ctx.run(host, cmd, o.command_timeout_s)
            res = parse_bandwidth_test(r.stdout, r.stderr)
        tool_finished(host, tool, r)
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
