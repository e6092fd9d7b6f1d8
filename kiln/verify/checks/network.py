"""Network: iperf3 between host pairs on the storage network (server on one host, client on the other)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kiln import knowledge
from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks.check import Check, CheckError, Rep, Sample, Subject, register
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Variables, var
from kiln.verify.checks.remote import need_tool, quote, tool_finished
from kiln.verify.parsers import ParseError, parse_iperf3

RUNBOOK = "docs/runbooks/acceptance-network.md"


@dataclass(frozen=True, slots=True)
class Iperf3Variables(Variables):
    scope = "network.iperf3"
    seconds: int = var(10, "duration of each run (-t)")
    streams: int = var(4, "parallel streams (-P)")


def storage_address(ctx: Context, host: str) -> str:
    """The host's first storage-network address: host_vars kiln_storage_interfaces, else the plan."""
    addrs = ctx.inventory.storage_addresses(host)
    if addrs:
        return addrs[0]
    ph = ctx.plan_host(host)
    for n in ph.nics if ph else ():
        if n.carries_storage and n.address:
            return n.address
    raise CheckError(f"{host} has no storage address (host_vars kiln_storage_interfaces is empty)")


@register
class Iperf3(Check):
    id = "network.iperf3"
    runbook = RUNBOOK
    tools = ("iperf3",)
    parallel_hosts = False  # pairs share the switch; one at a time
    variables = (Iperf3Variables,)

    def prepare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:
        for h in subject.hosts:
            need_tool(ctx, h, "iperf3", "install the iperf3 package; roles/bench_tools does")

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        client, server = subject.hosts[0], subject.hosts[1]
        v = ctx.var(Iperf3Variables)
        c_addr, s_addr = storage_address(ctx, client), storage_address(ctx, server)
        pidfile = ctx.workdir("iperf3-server.pid")
        port = knowledge.load().ports.acceptance.iperf3.value  # the port the firewall opens (ports.yaml)
        ctx.must(server, f"mkdir -p {quote(ctx.options.workdir)} && "
                         f"iperf3 -s -1 -D -B {quote(s_addr)} -p {port} -I {quote(pidfile)}",
                 30, what=f"starting the iperf3 server on {s_addr}:{port}")
        try:
            cmd = (f"iperf3 -c {quote(s_addr)} -B {quote(c_addr)} -p {port} -t {v.seconds} "
                   f"-P {v.streams} -J")
            last: ParseError | None = None
            for attempt in range(5):  # the daemonized server may need a moment to listen
                r = ctx.run(client, cmd, v.seconds + 60)
                try:
                    res = parse_iperf3(r.stdout, r.stderr)
                    break
                except ParseError as exc:
                    last = exc
                    if "Connection refused" not in exc.reason or attempt == 4:
                        raise
                    time.sleep(0.5 * (attempt + 1))
            else:  # pragma: no cover - the loop either breaks or raises
                raise last or CheckError("iperf3 did not run")
        finally:
            ctx.run(server, f"test -s {quote(pidfile)} && kill $(cat {quote(pidfile)}) 2>/dev/null; "
                            f"rm -f {quote(pidfile)}", 30)
        tool_finished(client, "iperf3", r)
        return Sample(res.received_bps / 1e9, raw={"iperf3.json": r.stdout},
                      info={"client": f"{client} {c_addr}", "server": f"{server} {s_addr}",
                            "retransmits": res.retransmits, "streams": res.streams, "sent_Gbps": res.sent_bps / 1e9})
