"""Monitoring: the live Prometheus against the plan (targets up, dashboard panels with data), injected faults
that must fire their alert and clear after repair, and the node health check (kiln-health) on compute hosts.

Prometheus is asked on the monitoring host itself (its HTTP API on 127.0.0.1:9090, through the same remote
the other checks use), so no port has to be open to the machine running `kiln verify`.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from kiln import knowledge
from kiln.plan.dashboards import dashboards
from kiln.plan.groups import COMPUTE
from kiln.plan.model import AcceptanceTarget
from kiln.plan.monitoring import FAULTS, HEALTH_CHECKS, STREAM_JOB, Fault, FilesystemFill, fire_bound_s
from kiln.verify.checks.check import (
    Check,
    CheckError,
    Conformance,
    Findings,
    NotApplicable,
    NothingPlanned,
    Rep,
    Sample,
    Subject,
    register,
)
from kiln.verify.checks.context import Context
from kiln.verify.checks.remote import quote

RUNBOOK = "docs/runbooks/monitoring.md"
FAULT_FS_MAX_BYTES = 1 << 30  # the disk-fill fault refuses a filesystem larger than this (spec: at most 1 GiB)
FILL_FILE = "kiln-verify-fault-fill"

_GET = ("python3 -c 'import sys, urllib.request; "
        "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=15).read().decode())' ")


def monitor_host(ctx: Context) -> str:
    """The first Prometheus host of the plan, which must be among the selected hosts."""
    for h in ctx.plan.monitoring.hosts:
        if h in ctx.remotes:
            return h
    raise NotApplicable(f"no Prometheus host of the plan ({', '.join(ctx.plan.monitoring.hosts)}) is selected")


def prom_api(ctx: Context, path: str, params: dict[str, str] | None = None) -> Any:
    """GET Prometheus's HTTP API on the monitoring host; the `data` of a successful answer."""
    host = monitor_host(ctx)
    url = f"http://127.0.0.1:{knowledge.load().ports.metrics.prometheus.value}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    r = ctx.run(host, _GET + quote(url), 30)
    if not r.ok:
        raise CheckError(f"{host}: Prometheus API {path} did not answer (rc {r.rc}): "
                         f"{(r.stderr.strip() or r.stdout.strip())[-300:]}")
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        raise CheckError(f"{host}: Prometheus API {path} answered no JSON: {r.stdout[:200]!r}") from None
    if doc.get("status") != "success":
        raise CheckError(f"{host}: Prometheus API {path}: {doc.get('errorType')}: {doc.get('error')}")
    return doc["data"]


def prom_query(ctx: Context, expr: str) -> list[dict[str, Any]]:
    data = prom_api(ctx, "/api/v1/query", {"query": expr})
    result = data.get("result") if isinstance(data, dict) else None
    return result if isinstance(result, list) else []


def wait_first_scrapes(ctx: Context) -> None:
    """Wait (bounded) until Prometheus has scraped every active target at least once (then, if it had to wait, two
    more scrape intervals), so that `health` is no longer "unknown" and rate() has two samples: right after
    the monitoring host (re)starts, a check must not judge targets Prometheus has not tried yet."""
    interval = ctx.plan.monitoring.scrape_interval_s
    deadline = time.monotonic() + max(60, 6 * interval)
    waited = False
    while time.monotonic() < deadline:
        data = prom_api(ctx, "/api/v1/targets", {"state": "active"})
        if all(t.get("health") != "unknown" for t in data.get("activeTargets", [])):
            if waited:  # scraped just now: give rate() its second sample
                time.sleep(min(2 * interval, max(0.0, deadline - time.monotonic())))
            return
        waited = True
        time.sleep(min(interval, 2))


class _PromCheck(Conformance):
    runbook = RUNBOOK
    tools = ("Prometheus HTTP API",)

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        hosts = [h for h in ctx.plan.monitoring.hosts if h in ctx.remotes]
        return [Subject(f"Prometheus on {hosts[0]}", (hosts[0],))] if hosts else []


def _hardware_reason(ctx: Context, job: str, hosts: list[str]) -> str | None:
    """Why an exporter of `job` has nothing to serve on these hosts (None: it should)."""
    if job == STREAM_JOB:  # a training rank serves it while it trains, not a daemon
        return "no training rank consuming the token stream there now (a rank serves its gauges while it trains)"
    need = {"dcgm": "gpu"}.get(job)
    if need is None:
        return None
    reasons = [ctx.probe(h, need) for h in hosts if h in ctx.remotes]
    if reasons and all(reasons):
        return f"{hosts[0]}: {reasons[0]}" if len(hosts) == 1 else f"{len(hosts)} hosts: {reasons[0]}"
    return None


@register
class TargetsUp(_PromCheck):
    id = "monitoring.targets_up"

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        wait_first_scrapes(ctx)
        data = prom_api(ctx, "/api/v1/targets", {"state": "active"})
        active = {(t["labels"].get("job"), t["labels"].get("instance")): t for t in data.get("activeTargets", [])}
        out = Findings(raw={"targets.json": json.dumps(data, indent=1)})
        up = 0
        for t in ctx.plan.monitoring.scrape_targets:
            seen = active.get((t.job, t.address))
            if seen is None:
                out.mismatch(f"{t.job} {t.address} ({t.host}): planned, not in Prometheus's active targets")
            elif seen.get("health") == "up":
                up += 1
            else:
                why = _hardware_reason(ctx, t.job, [t.host])
                err = seen.get("lastError") or seen.get("health")
                if why:
                    out.note(f"{t.job} {t.address} down, not applicable on this host: {why}")
                else:
                    out.mismatch(f"{t.job} {t.address} ({t.host}): {seen.get('health')} ({err})")
        out.info["checked"] = len(ctx.plan.monitoring.scrape_targets)
        out.info["up"] = up
        return out


# metric-name prefixes → the scrape job that exports them
# (bare metal: the data mover's kiln_dataflow_* come through node_exporter's textfile collector on the mover hosts)
_SOURCES = (("DCGM_", "dcgm"), ("lustre_", "lustre"), ("node_", "node"), ("kiln_dataflow_", "node"))
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def panel_queries(ctx: Context) -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, PromQL) of every dashboard kiln renders for this plan (kiln/plan/dashboards.py)."""
    return [(d.file, panel.title, expr) for d in sorted(dashboards(ctx.plan), key=lambda d: d.file)
            for panel in d.panels for expr, _ in panel.queries]


@register
class PanelsWithData(_PromCheck):
    id = "monitoring.panels_with_data"

    def _no_data_reason(self, ctx: Context, expr: str) -> str | None:
        """Why a query may rightly return nothing here: its exporter is not planned, or the hardware it reads
        is absent on every host that runs it (None: it should have returned data)."""
        if expr.lstrip().startswith("count by (severity) (ALERTS"):
            return "no alert is firing"
        names = _NAME.findall(re.sub(r"\{[^}]*\}", "", expr))  # metric names and functions; no label values
        m = ctx.plan.monitoring
        for name in names:
            job = next((j for prefix, j in _SOURCES if name.startswith(prefix)), None)
            if job is None:
                continue
            hosts = sorted({t.host for t in m.scrape_targets if t.job == job})
            if not hosts:
                return f"the plan scrapes no {job} exporter (nothing exports {name})"
            if job == "dcgm":
                why = _hardware_reason(ctx, "dcgm", hosts)
                if why:
                    return f"no DCGM exporter data: {why}"
            if job == "lustre":
                reasons = [ctx.probe(h, "lustre") for h in hosts if h in ctx.remotes]
                if reasons and all(reasons):
                    return f"no Lustre on any of the {len(hosts)} exporter hosts ({reasons[0]})"
            if name.startswith("kiln_dataflow_"):
                movers = ", ".join(ctx.plan.dataflow.mover_hosts) if ctx.plan.dataflow else "none planned"
                return (f"no data mover pass has reported {name} for this selector yet (a mover writes it at each "
                        f"pass of that direction; mover hosts: {movers})")
            if name.startswith("node_infiniband_"):
                reasons = [ctx.probe(h, "rdma") for h in hosts if h in ctx.remotes]
                if reasons and all(reasons):
                    return f"no RDMA device on any host ({reasons[0]})"
        return None

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        wait_first_scrapes(ctx)
        out = Findings()
        queries = panel_queries(ctx)
        rows = []
        for board, title, expr in queries:
            if re.fullmatch(r"vector\([^)]*\)", expr.strip()):
                rows.append(f"{board}\t{title}\tconstant\t{expr}")
                continue  # a planned line drawn as a constant: always has data
            n = len(prom_query(ctx, expr))
            rows.append(f"{board}\t{title}\t{n}\t{expr}")
            if n:
                continue
            why = self._no_data_reason(ctx, expr)
            if why:
                out.note(f"{board} '{title}' no data, not applicable here: {why}")
            else:
                out.mismatch(f"{board} '{title}': no data for {expr}")
        out.raw["panels.tsv"] = "\n".join(rows) + "\n"
        out.info["checked"] = len(queries)
        return out


# ------------------------------------------------------------------------------------------------- faults


@dataclass
class Injection:
    """One fault as this run injects it: a rule's fault (kiln.plan.monitoring.Fault) on a host, the commands that
    make and repair it, the alert series that must fire, and what happened."""

    name: str
    alert: str
    host: str
    labels: dict[str, str]
    inject: str
    repair: str
    bound_s: int
    notes: list[str] = field(default_factory=list)
    fired_s: float | None = None
    cleared_s: float | None = None
    error: str | None = None

    @property
    def selector(self) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in {"alertname": self.alert, "alertstate": "firing",
                                                     **self.labels}.items())
        return f"ALERTS{{{inner}}}"


def _victims(ctx: Context) -> list[str]:
    """Compute hosts first (a fault there disturbs no service), then the others; never the Prometheus host."""
    mon = set(ctx.plan.monitoring.hosts)
    hosts = ctx.group_hosts(COMPUTE) + [h for h in ctx.group_hosts("all") if h not in ctx.group_hosts(
        COMPUTE)]
    return [h for h in hosts if h not in mon]


def _fault_host(ctx: Context, fault: Fault) -> str:
    """The selected host the fault goes to (Fault.on)."""
    if fault.on == "objectstore":
        stores = [h for h in ctx.plan.objectstore.hosts if h in ctx.remotes]
        if not stores:
            raise NotApplicable("no object-store host is selected")
        return stores[0]
    if fault.on == "mover":
        movers = [h for h in (ctx.plan.dataflow.mover_hosts if ctx.plan.dataflow else ()) if h in ctx.remotes]
        if not movers:
            raise NotApplicable("no data mover host of the plan is selected")
        return movers[0]
    victims = _victims(ctx)
    if not victims:
        raise NotApplicable("no selected host besides the Prometheus host to inject a fault on")
    return victims[-1] if fault.on == "last" else victims[0]


def _fill_commands(ctx: Context, host: str, fill: FilesystemFill) -> tuple[str, str, list[str]]:
    """(inject, repair, notes) of a filesystem fill on this host, sized from the filesystem's size and use."""
    path = fill.mountpoint
    r = ctx.run(host, f"mountpoint -q {quote(path)} && df -B1 --output=size,used {quote(path)} | tail -1", 30)
    parts = r.stdout.split()
    if not r.ok or len(parts) != 2:
        raise CheckError(f"{host}: {path} is not a mount point (monitoring.fault_filesystem: `kiln lab` mounts a "
                         "tmpfs there; on a cluster mount a small tmpfs or loop filesystem there first)")
    size, used = int(parts[0]), int(parts[1])
    if size > FAULT_FS_MAX_BYTES:
        raise CheckError(f"{host}: {path} holds {size} bytes, more than the {FAULT_FS_MAX_BYTES} a fault may fill; "
                         "refusing (monitoring.fault_filesystem must be a small scratch filesystem)")
    need = max(0, int(size * fill.fraction) - used)
    file = f"{path.rstrip('/')}/{FILL_FILE}"
    return (f"head -c {need} /dev/zero > {quote(file)} && sync", f"rm -f {quote(file)}",
            [f"{path}: {size} bytes, {used} used; wrote {need} bytes to reach {fill.fraction:.0%}"])


def build_injection(ctx: Context, name: str) -> Injection:
    """The fault `name` of the first rule that carries it, placed on a selected host."""
    m = ctx.plan.monitoring
    rule = next((r for r in m.rules if r.fault is not None and r.fault.name == name), None)
    if rule is None or rule.fault is None:
        raise NothingPlanned(f"no alert rule of the plan carries the {name} fault ({FAULTS[name][1]})")
    fault = rule.fault
    host = _fault_host(ctx, fault)
    if isinstance(fault.how, FilesystemFill):
        inject, repair, notes = _fill_commands(ctx, host, fault.how)
    else:
        inject, repair, notes = fault.how.inject, fault.how.repair, [fault.how.note] if fault.how.note else []
    return Injection(name=name, alert=rule.alert, host=host, labels={"host": host, **fault.labels}, inject=inject,
                     repair=repair, bound_s=fire_bound_s(m, rule), notes=notes)


class FaultSession:
    """Every selected fault injected at once, each alert awaited, every fault repaired, each alert awaited
    to clear. The fault checks share one session per run, so the block takes as long as its slowest fault."""

    _lock = threading.Lock()

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.results: dict[str, Injection | Exception] = {}
        self.log: list[str] = []

    @classmethod
    def of(cls, ctx: Context) -> FaultSession:
        with cls._lock:
            run: FaultSession | None = ctx.recall(("monitoring.faults",))
            if run is None:
                run = cls(ctx)
                run.run()
                ctx.keep(("monitoring.faults",), run)
            return run

    def selected(self) -> list[str]:
        from kiln.verify.runner import select_targets

        try:
            checks = {t.check for t in select_targets(self.ctx.plan, self.ctx.options.only)}
        except ValueError:
            checks = set()
        return [n for n in FAULTS if f"monitoring.fault_{n}" in checks]

    def _firing(self, faults: list[Injection]) -> set[str]:
        got = prom_query(self.ctx, 'ALERTS{alertstate="firing"}')
        out = set()
        for f in faults:
            if any(all(r.get("metric", {}).get(k) == v for k, v in {"alertname": f.alert, **f.labels}.items())
                   for r in got):
                out.add(f.name)
        return out

    def _first_firing(self, f: Injection, since: float) -> float | None:
        """When Prometheus first evaluated f's alert as firing (epoch seconds, from the timestamps of its ALERTS
        samples), so that the time to fire excludes this check's polling and SSH round trips; None when
        Prometheus has no such sample at or after `since` (then the poll's time stands)."""
        window = int(time.time() - since) + 2 * self.ctx.plan.monitoring.scrape_interval_s + 1
        got = prom_query(self.ctx, f"{f.selector}[{window}s]")
        stamps = [float(v[0]) for r in got for v in r.get("values", []) if isinstance(v, list) and v]
        first = min(stamps, default=None)
        return first if first is not None and first >= since else None

    def _say(self, text: str) -> None:
        self.log.append(text)
        self.ctx.progress(f"monitoring faults: {text}")

    def run(self) -> None:
        faults: list[Injection] = []
        for name in self.selected():
            try:
                faults.append(build_injection(self.ctx, name))
            except (NotApplicable, CheckError) as exc:
                self.results[name] = exc
        if not faults:
            return
        interval = self.ctx.plan.monitoring.scrape_interval_s
        already = self._firing(faults)
        for f in faults:
            if f.name in already:
                f.error = f"{f.alert} for {f.labels} was already firing before the fault: nothing to prove"
        live = [f for f in faults if f.error is None]
        started: dict[str, float] = {}
        started_at: dict[str, float] = {}  # wall clock, to compare with Prometheus's sample timestamps
        try:
            for f in live:
                r = self.ctx.run(f.host, f.inject, 60)
                if not r.ok:
                    f.error = f"{f.host}: injecting ({f.inject}) failed with rc {r.rc}: {r.stderr.strip()[-200:]}"
                    continue
                started[f.name] = time.monotonic()
                started_at[f.name] = time.time()
                self._say(f"{f.name}: injected on {f.host} ({f.inject})")
            waiting = [f for f in live if f.name in started]
            deadline = time.monotonic() + 2 * max((f.bound_s for f in waiting), default=0) + interval
            while waiting and time.monotonic() < deadline:
                time.sleep(1)
                fired = self._firing(waiting)
                now = time.monotonic()
                for f in [f for f in waiting if f.name in fired]:
                    seen = now - started[f.name]
                    at = self._first_firing(f, started_at[f.name])
                    f.fired_s = round(seen if at is None else at - started_at[f.name], 1)
                    f.notes.append(f"the poll saw it firing after {seen:.0f} s" + (
                        "" if at is None else "; the time to fire is Prometheus's first firing evaluation"))
                    self._say(f"{f.name}: {f.alert} firing after {f.fired_s:.0f} s")
                waiting = [f for f in waiting if f.name not in fired]
            for f in waiting:
                f.error = (f"{f.alert} did not fire within {2 * f.bound_s + interval} s of the fault "
                           f"(bound {f.bound_s} s); query {f.selector}")
        finally:
            repaired: dict[str, float] = {}
            for f in faults:
                if f.name not in started:
                    continue
                r = self.ctx.run(f.host, f.repair, 120)
                repaired[f.name] = time.monotonic()
                if not r.ok:
                    f.error = f"{f.host}: REPAIR FAILED ({f.repair}, rc {r.rc}): {r.stderr.strip()[-200:]}"
                self._say(f"{f.name}: repaired ({f.repair})")
        clearing = [f for f in faults if f.fired_s is not None and f.error is None]
        deadline = time.monotonic() + max((f.bound_s for f in clearing), default=0) + 3 * interval
        while clearing and time.monotonic() < deadline:
            time.sleep(1)
            still = self._firing(clearing)
            now = time.monotonic()
            for f in [f for f in clearing if f.name not in still]:
                f.cleared_s = round(now - repaired[f.name], 1)
                self._say(f"{f.name}: {f.alert} cleared {f.cleared_s:.0f} s after repair")
            clearing = [f for f in clearing if f.name in still]
        for f in clearing:
            f.error = f"{f.alert} fired after {f.fired_s:.0f} s but still fires after repair ({f.selector})"
        for f in faults:
            self.results[f.name] = f


class FaultCheck(Check):
    kind = "benchmark"
    single_run = True
    runbook = RUNBOOK
    tools = ("systemctl / sysctl / head / nft (fault)", "Prometheus HTTP API (ALERTS)")
    fault = ""

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        hosts = [h for h in ctx.plan.monitoring.hosts if h in ctx.remotes]
        return [Subject(f"{FAULTS[self.fault][1]}, Prometheus on {hosts[0]}", (hosts[0],))] if hosts else []

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        res = FaultSession.of(ctx).results.get(self.fault)
        if res is None:
            raise CheckError(f"fault {self.fault} was not run (not selected in this run's --only)")
        if isinstance(res, Exception):
            raise res
        if res.error or res.fired_s is None:
            raise CheckError(res.error or f"{res.alert} did not fire")
        s = Sample(res.fired_s)
        s.details = [
            f"on {res.host}: {res.inject}",
            f"{res.alert} fired after {res.fired_s:.0f} s (bound {res.bound_s} s: 2 scrape intervals + for:)",
            f"repaired ({res.repair}); cleared after {res.cleared_s:.0f} s",
            *res.notes,
        ]
        s.info.update({"alert": res.alert, "host": res.host, "cleared_s": res.cleared_s})
        return s


for _name in FAULTS:
    register(type(f"Fault_{_name}", (FaultCheck,), {"id": f"monitoring.fault_{_name}", "fault": _name}))


# ------------------------------------------------------------------------------------------- node health


class HealthCheck(Conformance):
    """One kiln-health sub-check on a compute host: ok → PASS, fault → FAIL with its code, not applicable →
    NOT APPLICABLE with kiln-health's reason. kiln-health runs once per host and run."""

    runbook = RUNBOOK
    tools = ("kiln-health",)
    def results(self, ctx: Context, host: str) -> list[dict[str, Any]]:
        key = ("monitoring.kiln_health", host)
        kept: list[dict[str, Any]] | None = ctx.recall(key)
        if kept is not None:
            return list(kept)
        r = ctx.run(host, "command -v kiln-health >/dev/null || exit 127; kiln-health --json", 120)
        if r.rc == 127:
            raise CheckError(f"{host}: kiln-health is not installed (roles/monitoring installs it on compute hosts)")
        try:
            rows = json.loads(r.stdout)
        except ValueError:
            raise CheckError(f"{host}: kiln-health printed no JSON (rc {r.rc}): "
                             f"{(r.stderr.strip() or r.stdout.strip())[-300:]}") from None
        ctx.keep(key, rows)
        return list(rows)

    def not_applicable(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> str | None:
        """kiln-health says itself what the host lacks; only what the plan gives the host none of is decided here."""
        self.planned_for(ctx, target, subject)
        return None

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        row = next((x for x in self.results(ctx, host) if x.get("check") == target.check), None)
        if row is None:
            raise CheckError(f"{host}: kiln-health reported no {target.check}")
        status, detail = row.get("status"), str(row.get("detail"))
        if status == "not_applicable":
            raise NotApplicable(detail)
        out = Findings(raw={"kiln-health.json": json.dumps(self.results(ctx, host), indent=1)})
        if status == "ok":
            out.note(detail)
        else:
            out.mismatch(f"fault code {row.get('code')}: {detail}")
        return out


for _check in HEALTH_CHECKS:
    register(type(f"Health_{_check.split('.')[1]}", (HealthCheck,), {"id": _check}))
