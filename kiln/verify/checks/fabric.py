"""Compute fabric: perftest ib_write_bw/ib_read_bw per rail between host pairs, nccl-tests all_reduce_perf
within a node and across the nodes of a pool (launched with mpirun or srun)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kiln import knowledge
from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks.check import Check, CheckError, Rep, Sample, Subject, register, ring_pairs
from kiln.verify.checks.context import Context
from kiln.verify.checks.launch import launch_command
from kiln.verify.checks.options import Variables, var
from kiln.verify.checks.remote import need_tool, quote, run_tool, tool_finished
from kiln.verify.parsers import ParseError, parse_nccl_tests, parse_perftest

RUNBOOK = "docs/runbooks/acceptance-fabric.md"


@dataclass(frozen=True, slots=True)
class PerftestVariables(Variables):
    scope = "fabric.perftest"
    seconds: int = var(5, "duration of each run (-D)")
    size: int = var(1 << 20, "message size in bytes (-s)")
    qps: int = var(4, "queue pairs (-q)")


@dataclass(frozen=True, slots=True)
class NcclVariables(Variables):
    scope = "fabric.nccl"
    all_reduce_perf: str = var("all_reduce_perf", "the nccl-tests all_reduce_perf binary (built with MPI=1 for "
                               "fabric.nccl_allreduce_inter)")
    max_bytes: str = var("8G", "the largest message size (-e); its row is the figure")


def rails(ctx: Context, host: str) -> list[str]:
    """The host's compute-rail RDMA devices: host_vars rdma_expected_devices (role compute or
    shared), else the plan."""
    expected = ctx.hostvars(host).get("rdma_expected_devices") or []
    devs = [d["device"] for d in expected if d.get("role") in ("compute", "shared")]
    if devs:
        return devs
    ph = ctx.plan_host(host)
    return [n.device for n in (ph.nics if ph else ()) if n.is_rail and n.device]


def management_address(ctx: Context, host: str) -> str:
    addr = ctx.hostvars(host).get("kiln_management_address")
    if addr:
        return str(addr)
    ph = ctx.plan_host(host)
    if ph is None:
        raise CheckError(f"{host}: no management address")
    return ph.management_address


def _pool_env(ctx: Context, host: str) -> dict[str, str]:
    ph = ctx.plan_host(host)
    return next((dict(n.env) for n in ctx.plan.nccl if ph and n.pool == ph.pool), {})


class Perftest(Check):
    verb = "write"
    runbook = RUNBOOK
    tools = ("perftest",)
    variables = (PerftestVariables,)

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        out = []
        for pair in ring_pairs(ctx.group_hosts(target.group)):
            for i, dev in enumerate(rails(ctx, pair.hosts[0])):
                peer = rails(ctx, pair.hosts[1])
                pdev = peer[i] if i < len(peer) else dev
                out.append(Subject(f"{pair.label} {dev}", pair.hosts, (("device", dev), ("peer_device", pdev))))
        return out

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        o, v = ctx.options, ctx.var(PerftestVariables)
        client, server = subject.hosts
        tool = f"ib_{self.verb}_bw"
        for h in (client, server):
            need_tool(ctx, h, tool, "install perftest (linux-rdma/perftest); roles/bench_tools does")
        gid = _pool_env(ctx, client).get("NCCL_IB_GID_INDEX")
        common = (f"-F --report_gbits -q {v.qps} -s {v.size} -D {v.seconds} "
                  f"-p {knowledge.load().ports.acceptance.perftest.value}" + (f" -x {gid}" if gid else ""))
        log = ctx.workdir(f"{tool}-server.log")
        pidfile = ctx.workdir(f"{tool}-server.pid")
        ctx.must(server, f"mkdir -p {quote(o.workdir)} && (nohup {tool} -d {quote(subject.get('peer_device'))} "
                         f"{common} > {quote(log)} 2>&1 & echo $! > {quote(pidfile)})", 30,
                 what=f"starting the {tool} server")
        try:
            time.sleep(1.0)
            cmd = f"{tool} -d {quote(subject.get('device'))} {common} {quote(management_address(ctx, server))}"
            r = ctx.run(client, cmd, v.seconds + 120)
            try:
                res = parse_perftest(r.stdout, r.stderr)
            except ParseError as exc:
                srv = ctx.run(server, f"cat {quote(log)}", 30)
                tail = (r.stdout + r.stderr).strip()[-300:]
                raise CheckError(f"{tool} {client}→{server}: no result ({exc.reason}); client: {tail}; "
                                 f"server: {srv.stdout.strip()[-300:]}") from None
            tool_finished(client, tool, r)
        finally:
            ctx.run(server, f"test -s {quote(pidfile)} && kill $(cat {quote(pidfile)}) 2>/dev/null; "
                            f"rm -f {quote(pidfile)}", 30)
        return Sample(res.bw_avg_Bps / 1e9, raw={f"{tool}.txt": r.stdout},
                      info={"device": res.device, "unit_printed": res.unit, "size": res.rows[-1].size_bytes})


@register
class IbWriteBw(Perftest):
    id = "fabric.ib_write_bw"
    verb = "write"


@register
class IbReadBw(Perftest):
    id = "fabric.ib_read_bw"
    verb = "read"


@register
class NcclIntra(Check):
    id = "fabric.nccl_allreduce_intra"
    runbook = RUNBOOK
    tools = ("nccl-tests all_reduce_perf",)
    parallel_hosts = True  # NVLink/NVSwitch inside each node
    variables = (NcclVariables,)

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        v = ctx.var(NcclVariables)
        host = subject.hosts[0]
        ph = ctx.plan_host(host)
        gpus = ph.gpus if ph and ph.gpus else 1
        need_tool(ctx, host, v.all_reduce_perf, "build nccl-tests (github.com/NVIDIA/nccl-tests)")
        env = "".join(f"{k}={quote(value)} " for k, value in target.env)
        cmd = f"{env}{quote(v.all_reduce_perf)} -b 1M -e {v.max_bytes} -f 2 -g {gpus}"
        res, r = run_tool(
            ctx, host, tool="all_reduce_perf", command=cmd, timeout=ctx.options.command_timeout_s,
            parse=parse_nccl_tests,
        )
        return Sample(res.busbw_GBps, raw={"all_reduce_perf.txt": r.stdout},
                      info={"avg_busbw_GBps": res.avg_busbw_GBps, "gpus": gpus,
                            "largest_size": max(x.size_bytes for x in res.rows)})


@register
class NcclInter(Check):
    id = "fabric.nccl_allreduce_inter"
    runbook = RUNBOOK
    tools = ("nccl-tests all_reduce_perf", "mpirun/srun")
    variables = (NcclVariables,)

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        v = ctx.var(NcclVariables)
        launcher = subject.hosts[0]
        if len(subject.hosts) < 2:
            raise CheckError("NCCL across nodes needs at least two selected hosts in the pool")
        ph = ctx.plan_host(launcher)
        gpus = ph.gpus if ph and ph.gpus else 1
        need_tool(ctx, launcher, v.all_reduce_perf, "build nccl-tests with MPI=1 (github.com/NVIDIA/nccl-tests)")
        cmd = launch_command(ctx, subject.hosts, gpus, f"{quote(v.all_reduce_perf)} -b 1M -e {v.max_bytes} "
                             "-f 2 -g 1", env={**_pool_env(ctx, launcher), **dict(target.env)},
                             gpus_per_node=gpus)
        res, r = run_tool(
            ctx, launcher, tool="all_reduce_perf", command=cmd, timeout=ctx.options.command_timeout_s,
            parse=parse_nccl_tests,
        )
        return Sample(res.busbw_GBps, raw={"all_reduce_perf.txt": r.stdout, "command.txt": cmd},
                      info={"avg_busbw_GBps": res.avg_busbw_GBps, "ranks": res.ranks or len(subject.hosts) * gpus})
