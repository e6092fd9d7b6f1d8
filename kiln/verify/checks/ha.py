"""Failover drills on a Lustre server pair under Pacemaker (ha.*): fencing power-cycles a node, a server lost
abruptly hands every target to its partner within the plan's bound while the partner's own targets keep running,
and a server whose storage interface loses carrier hands its targets over (healthLNET) with no flapping after.

They are destructive (a maintenance window): they run only with `--option ha.drill=true`, and ha.partner_loss
also needs `ha.crash_command`, the command that powers a server off abruptly from the machine running kiln verify
(the lab kills the server's container). Every drill starts from, and returns the pair to, each target on its
preferred server. Pacemaker's view is read on the surviving node with `crm_mon --output-as=xml`.
"""

from __future__ import annotations

import shlex
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass

from kiln.plan.model import AcceptanceTarget, HaNode, HaPair
from kiln.verify.checks.check import Check, CheckError, NotApplicable, Rep, Sample, Subject, register
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Variables, var

RUNBOOK = "docs/runbooks/lustre-failover-test.md"
Placement = dict[str, str]  # resource id -> the node it runs on


@dataclass(frozen=True, slots=True)
class HaVariables(Variables):
    scope = "ha"
    drill: bool = var(False, "run the destructive failover drills (fence, crash, LNet loss) on the first pair; "
                             "only in a maintenance window")
    crash_command: str = var("", "ha.partner_loss: command run on the machine running kiln verify that powers a server "
                                 "off abruptly; {host} is the plan host (the lab: podman kill --signal KILL "
                                 "kiln-lab-{host})")
    settle_s: int = var(240, "seconds a node may take to come back and rejoin, and targets to return")


def pair_for(ctx: Context) -> HaPair:
    """The first failover pair whose two nodes are selected; NotApplicable without one or without --option."""
    if not ctx.plan.ha.pairs:
        raise NotApplicable("no failover pairs in the plan (lustre.failover is none)")
    pair = next((p for p in ctx.plan.ha.pairs if all(n.name in ctx.remotes for n in p.nodes)), None)
    if pair is None:
        raise NotApplicable("no failover pair has both servers among the selected hosts")
    if not ctx.var(HaVariables).drill:
        raise NotApplicable("a destructive drill: pass --option ha.drill=true in a maintenance window")
    return pair


def placement(ctx: Context, host: str, pair: HaPair) -> tuple[Placement, set[str]]:
    """Where the pair's targets run, and the nodes online, as Pacemaker on `host` sees them."""
    r = ctx.run(host, "crm_mon -1 --output-as=xml", 30)
    if not r.ok:
        raise CheckError(f"{host}: crm_mon failed (rc {r.rc}): {(r.stderr or r.stdout).strip()[-300:]}")
    return parse_crm_mon(r.stdout, {res.name for res in pair.resources})


def parse_crm_mon(xml: str, wanted: set[str]) -> tuple[Placement, set[str]]:
    """crm_mon --output-as=xml: each wanted resource that is active and Started -> its node; the online nodes."""
    root = ET.fromstring(xml)
    online = {n.get("name", "") for n in root.iter("node") if n.get("online") == "true" and n.get("id")}
    where: Placement = {}
    for res in root.iter("resource"):
        rid = res.get("id", "")
        node = res.find("node")
        if rid in wanted and res.get("active") == "true" and res.get("role") == "Started" and node is not None:
            where[rid] = node.get("name", "")
    return where, online


def wait_for(ctx: Context, host: str, pair: HaPair, done: Callable[[Placement, set[str]], bool], timeout: float,
             watch: Callable[[float, Placement], None] | None = None) -> float:
    """Seconds until `done` holds on `host`'s view (polling every 0.5 s); `watch` sees every poll. A poll is timed
    when its answer arrives: a slow one (SSH to a host that has just rebooted, crm_mon on a node still joining)
    never reports a change as seen before it was read."""
    start = time.monotonic()
    while True:
        try:
            where, online = placement(ctx, host, pair)
        except (CheckError, ET.ParseError):
            where, online = {}, set()
        now = time.monotonic() - start
        if watch is not None:
            watch(now, where)
        if done(where, online):
            return now
        if now > timeout:
            raise CheckError(f"{host}: not reached within {timeout:.0f} s; last placement {where}, online {online}")
        time.sleep(0.5)


def home(pair: HaPair) -> Placement:
    return {r.name: r.node for r in pair.resources}


def settle(ctx: Context, via: str, timeout: float) -> None:
    """Wait until Pacemaker has no pending action (crm_resource --wait, Pacemaker 2.1 tools/crm_resource.c:
    wait_till_stable), so a resource being moved or recovered is not mistaken for one that stays put."""
    ctx.must(via, f"crm_resource --wait --timeout={int(timeout)}s", timeout + 30,
             what="waiting for the cluster to settle")


def all_started(ctx: Context, pair: HaPair, via: str, timeout: float) -> list[str]:
    """Every target of the pair Started on some node; a target Pacemaker left stopped (a failed probe or start
    after a fence) is cleaned up once (pcs resource cleanup) so it is recovered, as the runbook does."""
    settle(ctx, via, timeout)
    where, _ = placement(ctx, via, pair)
    stopped = sorted(set(home(pair)) - set(where))
    for rid in stopped:
        ctx.must(via, f"pcs resource cleanup {shlex.quote(rid)}", 120, what=f"cleaning up {rid}")
    if stopped:
        settle(ctx, via, timeout)
        wait_for(ctx, via, pair, lambda w, _o: set(w) == set(home(pair)), timeout)
    return [f"{rid} was stopped: cleaned up and started again" for rid in stopped]


def restore(ctx: Context, pair: HaPair, via: str, timeout: float) -> list[str]:
    """Both nodes online, the cluster settled with every target running, then every target back on its
    preferred server (pcs resource move: pcs 0.11 removes the constraint it creates once the resource runs
    there; it refuses a resource that is not running, hence the settling first)."""
    wait_for(ctx, via, pair, lambda _w, online: {n.name for n in pair.nodes} <= online, timeout)
    notes = all_started(ctx, pair, via, timeout)
    where, _ = placement(ctx, via, pair)
    for rid, node in home(pair).items():
        if where.get(rid) != node:
            ctx.must(via, f"pcs resource move {shlex.quote(rid)} {shlex.quote(node)} --wait=120", 180,
                     what=f"moving {rid} back to {node}")
            notes.append(f"{rid} moved back to {node}")
    wait_for(ctx, via, pair, lambda w, _o: w == home(pair), timeout)
    return notes


def settled(ctx: Context, pair: HaPair) -> None:
    """The drill's starting point: both nodes online and every target on its preferred server."""
    restore(ctx, pair, pair.nodes[0].name, ctx.var(HaVariables).settle_s)


def pid1_age(ctx: Context, host: str, timeout: float = 90) -> float:
    """Seconds since the host's PID 1 started (a power-cycled host has a young one); waits for SSH to answer."""
    deadline = time.monotonic() + timeout
    while True:
        r = ctx.run(host, "ps -o etimes= -p 1", 30)
        if r.ok and r.stdout.strip().isdigit():
            return float(r.stdout.strip())
        if time.monotonic() > deadline:
            raise CheckError(f"{host}: cannot read the age of PID 1 (rc {r.rc}): {r.stderr.strip()[-200:]}")
        time.sleep(2)


class _Drill(Check):
    kind = "benchmark"
    single_run = True
    runbook = RUNBOOK
    tools = ("pcs", "crm_mon", "crm_resource", "stonith_admin")
    variables = (HaVariables,)

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        pair = next(iter(ctx.plan.ha.pairs), None)
        if pair is None:
            return [Subject("no failover pair", ())]
        return [Subject(f"pair {pair.nodes[0].name}/{pair.nodes[1].name}", tuple(n.name for n in pair.nodes))]

    def not_applicable(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> str | None:
        try:
            pair_for(ctx)
        except NotApplicable as exc:
            return str(exc)
        return None


@register
class Fencing(_Drill):
    """The survivor fences its partner (reboot): the fence action succeeds and the partner's PID 1 restarts."""

    id = "ha.fencing"

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        pair = pair_for(ctx)
        settled(ctx, pair)
        survivor, victim = (n.name for n in pair.nodes)
        age = pid1_age(ctx, victim)
        start = time.monotonic()
        r = ctx.run(survivor, f"stonith_admin --reboot {shlex.quote(victim)} --timeout 120", 180)
        fenced_s = time.monotonic() - start
        faults, details = [], [f"{survivor}: stonith_admin --reboot {victim} returned {r.rc} after {fenced_s:.1f} s"]
        if not r.ok:
            faults.append(f"the fence action failed: {(r.stderr or r.stdout).strip()[-200:]}")
        settle = ctx.var(HaVariables).settle_s
        wait_for(ctx, survivor, pair, lambda _w, online: victim in online, settle)
        after = pid1_age(ctx, victim)
        since = time.monotonic() - start
        details.append(f"{victim}: PID 1 was {age:.0f} s old before, {after:.0f} s after "
                       f"({since:.0f} s since the fence)")
        if after > since:
            faults.append(f"{victim} was not power-cycled (PID 1 is {after:.0f} s old, the fence was "
                          f"{since:.0f} s ago)")
        history = ctx.run(survivor, f"stonith_admin --history {shlex.quote(victim)}", 30)
        details.append(f"history: {history.stdout.strip()[-200:]}")
        details += restore(ctx, pair, survivor, settle)
        return Sample(float(len(faults)), details=faults + details, info={"fence_s": round(fenced_s, 1)})


@register
class PartnerLoss(_Drill):
    """A server powered off abruptly: the survivor fences it and runs every target of the pair; its own never stop."""

    id = "ha.partner_loss"

    def not_applicable(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> str | None:
        reason = super().not_applicable(ctx, target, subject)
        if reason is None and not ctx.var(HaVariables).crash_command:
            return "needs --option ha.crash_command=... (how to power a server off abruptly from here)"
        return reason

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        pair = pair_for(ctx)
        settled(ctx, pair)
        v = ctx.var(HaVariables)
        survivor, victim = pair.nodes
        own = {r.name for r in pair.resources if r.node == survivor.name}
        stopped: list[str] = []

        def watch(t: float, where: Placement) -> None:
            stopped.extend(f"{rid} not running on {survivor.name} at {t:.1f} s" for rid in own
                           if where and where.get(rid) != survivor.name)

        crash = v.crash_command.replace("{host}", victim.name)
        proc = subprocess.run(shlex.split(crash), capture_output=True, text=True, check=False, timeout=120)
        if proc.returncode:
            raise CheckError(f"`{crash}` failed (rc {proc.returncode}): {proc.stderr.strip()[-300:]}")
        takeover = wait_for(ctx, survivor.name, pair, lambda w, _o: set(w.values()) == {survivor.name}
                            and set(w) == set(home(pair)), timeout=target.fail * 3, watch=watch)
        if stopped:
            raise CheckError(f"the survivor stopped its own target: {stopped[0]} ({len(stopped)} polls)")
        details = [f"`{crash}`: {victim.name} off; every target on {survivor.name} after {takeover:.1f} s",
                   f"{survivor.name}'s own targets ({', '.join(sorted(own))}) ran throughout",
                   f"fence delay on the device that fences {victim.name}: {victim.fence_delay_s} s "
                   f"(the bound allows {ctx.plan.ha.timing.fence_delay_s} s for the first node)"]
        details += restore(ctx, pair, survivor.name, v.settle_s)
        return Sample(round(takeover, 1), details=details)


def _links(ctx: Context, node: HaNode, state: str) -> None:
    assert node.lnet is not None
    cmd = " && ".join(f"ip link set dev {shlex.quote(d)} {state}" for d in node.lnet.devices)
    ctx.must(node.name, cmd, 30, what=f"ip link set {state} on {node.name}")


@register
class LnetLoss(_Drill):
    """A server's storage interfaces lose carrier: its targets move to the partner; with the link back, nothing
    moves again (no flapping)."""

    id = "ha.lnet_loss"

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        pair = pair_for(ctx)
        victim, partner = pair.nodes
        if victim.lnet is None:
            raise NotApplicable(f"{victim.name} has no LNet check (no NID outside its pair to ping)")
        settled(ctx, pair)
        mine = {r.name for r in pair.resources if r.node == victim.name}
        placement(ctx, partner.name, pair)  # the partner, whose view is timed, answers before the clock starts
        _links(ctx, victim, "down")
        try:
            moved = wait_for(ctx, partner.name, pair,
                             lambda w, _o: all(w.get(r) == partner.name for r in mine), target.fail * 3)
        finally:
            _links(ctx, victim, "up")
        timing = ctx.plan.ha.timing
        window = 2 * (timing.lnet_monitor_s + timing.lnet_dampen_s)
        seen: list[Placement] = []
        end = time.monotonic() + window
        while time.monotonic() < end:
            seen.append(placement(ctx, partner.name, pair)[0])
            time.sleep(1)
        flaps = [w for w in seen if w and any(w.get(r) != partner.name for r in mine)]
        if flaps:
            raise CheckError(f"targets moved again after the link came back (flapping): {flaps[0]}")
        details = [f"ip link set {' '.join(victim.lnet.devices)} down on {victim.name}: "
                   f"{', '.join(sorted(mine))} on {partner.name} after {moved:.1f} s",
                   f"link up again: no target moved during {window} s ({len(seen)} polls)"]
        details += restore(ctx, pair, partner.name, ctx.var(HaVariables).settle_s)
        return Sample(round(moved, 1), details=details)
