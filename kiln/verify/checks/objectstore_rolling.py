"""objectstore.rolling_restart: every SeaweedFS volume server restarted in turn while a client keeps reading and
writing through the S3 gateway (MinIO warp `mixed`); the next server only after the master lists the restarted one
again with all its volumes and every volume has its copies. The figure is the client requests that failed (target
0); the seconds each server took to rejoin are beside it.

This is how an upgrade of the object store rolls (docs/runbooks/rolling-upgrade.md, "Object store"): one volume
server at a time, replication checked in between. With objectstore.rolling.upgrade_binary the roll is an upgrade:
each volume server is switched to that binary as it restarts, and once the load has ended the masters, filers and
S3 gateways restart on it one host at a time. Only the volume servers restart under the load: the masters and the
filer and S3 gateway on each node are the clients' entry points, which a load balancer in front of the gateways
covers, not the replication this check proves.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from kiln import knowledge
from kiln.plan.model import AcceptanceTarget
from kiln.plan.sizing import replica_count
from kiln.verify.checks.check import Check, CheckError, Rep, Sample, Subject, register
from kiln.verify.checks.conformance import s3_credentials, s3_endpoints, s3_tls
from kiln.verify.checks.context import Context
from kiln.verify.checks.objectstore import (
    drop_benchmark_bucket,
    launcher_subject,
    master_address,
    warp_on,
    warp_version,
)
from kiln.verify.checks.options import Variables, var
from kiln.verify.checks.remote import drop_env_file, push_env_file, quote, tool_finished, with_env_file
from kiln.verify.parsers import WarpTotal, parse_warp_record

RUNBOOK = "docs/runbooks/acceptance-objectstore.md"
_VOLUME = re.compile(r"volume id:(\d+)\b(.*)$")
_NODE = re.compile(r"^\s*DataNode (\S+)")


@dataclass(frozen=True, slots=True)
class RollingVariables(Variables):
    scope = "objectstore.rolling"
    restart: bool = var(False, "restart every volume server in turn under S3 load (a maintenance action: the load "
                               "writes and deletes objects in its own bucket)")
    lead_s: int = var(10, "seconds of load before the first restart")
    per_server_s: int = var(60, "seconds one server may take to restart (under load about 40 s: preStopSeconds "
                                "10 s, then its HTTP server drains) and rejoin with every volume's copies; the load "
                                "lasts lead_s + servers × per_server_s + 10 s")
    obj_size: str = var("64KiB", "object size of the load (--obj.size)")
    concurrent: int = var(8, "parallel requests of the load (--concurrent)")
    objects: int = var(200, "objects warp uploads before the mixed load reads them (--objects)")
    bucket: str = var("kiln-verify-rolling", "the bucket the load creates and empties (dropped afterwards)")
    upgrade_binary: str = var("", "a weed binary on every object-store host to upgrade to (e.g. the objectstore "
                                  "role's staged /usr/local/lib/kiln-objectstore/weed): each volume server is "
                                  "switched to it as it restarts; the masters, filers and S3 gateways follow, one "
                                  "host at a time, after the load; empty: restart only")


INSTALLED = "/usr/local/bin/weed"  # roles/objectstore objectstore_weed_path: what the units run
_UPGRADE_KEY = ("objectstore.rolling", "releases")  # (installed, upgraded to), read once in prepare
_SERVICES = ("seaweedfs-master", "seaweedfs-volume", "seaweedfs-filer", "seaweedfs-s3")
_RELEASE = re.compile(r"version\s+(\d+GB)\s+(\S+)")


def weed_release(version_output: str) -> tuple[str, str]:
    """(offset kind, release) from `weed version` ("version 30GB 3.39 51d4a4b2 linux amd64": ("30GB", "3.39")).
    The first word is the build's volume size limit: "30GB" for 4-byte offsets, "8000GB" for the 5BytesOffset
    build (weed/util/constants_4bytes.go, constants_5bytes.go)."""
    m = _RELEASE.search(version_output)
    if not m:
        raise CheckError(f"`weed version` printed no release: {version_output.strip()[-200:]}")
    return m.group(1), m.group(2)


@dataclass(frozen=True, slots=True)
class Topology:
    """What the master lists: the volume servers (address:port) and, per volume id, its copies and how many
    the volume's replica placement asks for."""

    nodes: dict[str, int]  # volume server → volumes on it
    copies: dict[int, tuple[int, int]]  # volume id → (copies listed, copies wanted)

    def short(self) -> list[str]:
        return [f"volume {v}: {have} of {want} copies" for v, (have, want) in sorted(self.copies.items())
                if have < want]


def parse_volume_list(text: str) -> Topology:
    """`weed shell` `volume.list` (SeaweedFS 3.x: DataNode lines, then one `volume id:N ...` line per replica;
    `replica_placement:N` is the code as a number, 1 for "001", absent for "000")."""
    nodes: dict[str, int] = {}
    found: dict[int, int] = {}
    wanted: dict[int, int] = {}
    node = ""
    for line in text.splitlines():
        if (m := _NODE.match(line)) and "total size" not in line:  # not the node's closing summary line
            node = m.group(1)
            nodes[node] = 0
        elif (v := _VOLUME.search(line)) and node:
            vid = int(v.group(1))
            code = re.search(r"replica_placement:(\d+)", v.group(2))
            nodes[node] += 1
            found[vid] = found.get(vid, 0) + 1
            wanted[vid] = replica_count(f"{int(code.group(1)) if code else 0:03d}")
    if not nodes:
        raise CheckError(f"volume.list lists no volume server: {text.strip()[-300:]}")
    return Topology(nodes=nodes, copies={v: (found[v], wanted[v]) for v in found})


def volume_servers(ctx: Context) -> list[tuple[str, str]]:
    """(host, address:port) of every object-store host's volume server, in plan order."""
    port = knowledge.load().ports.seaweedfs.volume.value
    return [(h, f"{a[0]}:{port}") for h in ctx.plan.objectstore.hosts if (a := ctx.inventory.storage_addresses(h))]


@register
class RollingRestart(Check):
    id = "objectstore.rolling_restart"
    runbook = RUNBOOK
    single_run = True
    tools = ("warp", "weed shell")
    variables = (RollingVariables,)

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        return launcher_subject(ctx, target)

    def not_applicable(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> str | None:
        store = ctx.plan.objectstore
        copies = replica_count(store.replication or "000")
        servers = volume_servers(ctx)
        if copies < 2:
            return (f"replication {store.replication} keeps one copy of each volume: restarting its server makes "
                    "the volume unreadable; a rolling restart needs objectstore.replication with 2 or more copies")
        if len(servers) < copies + 1:
            return (f"{len(servers)} volume servers for {copies} copies: with one restarting, new volumes find no "
                    f"{copies} servers to grow on; a rolling restart needs at least {copies + 1}")
        if not ctx.var(RollingVariables).restart:
            return "a maintenance action: pass --option objectstore.rolling.restart=true"
        return None

    def prepare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:
        s3_credentials(ctx)
        warp_version(ctx, subject.hosts[0], warp_on(ctx, subject.hosts[0]))
        if ctx.var(RollingVariables).upgrade_binary:  # refused here, before the load and any restart
            ctx.keep(_UPGRADE_KEY, self._upgrade_versions(ctx))

    def _upgrade_versions(self, ctx: Context) -> tuple[str, str]:
        """(installed release, release upgraded to), the same on every host; CheckError before anything restarts
        when a host lacks the binary, the hosts differ, or the builds' offsets differ: a volume's index entry is
        NeedleIdSize + OffsetSize + SizeSize bytes, 16 with 4-byte offsets and 17 with the 5BytesOffset build
        (weed/storage/types/needle_types.go, offset_4bytes.go, offset_5bytes.go), so the other build misreads
        every index the store holds."""
        binary = ctx.var(RollingVariables).upgrade_binary
        found: set[tuple[tuple[str, str], tuple[str, str]]] = set()
        for host, _ in volume_servers(ctx):
            r = ctx.run(host, f"{INSTALLED} version 2>/dev/null; echo ---; {quote(binary)} version 2>/dev/null", 60)
            old, _, new = r.stdout.partition("---")
            if not new.strip():
                raise CheckError(f"{host}: {binary} does not run (`{binary} version` printed nothing): stage the "
                                 "release to upgrade to on every object-store host first")
            found.add((weed_release(old), weed_release(new)))
        if len(found) != 1:
            raise CheckError(f"the object-store hosts run different releases: {sorted(found)}; finish the last "
                             "roll first")
        (old_kind, old), (new_kind, new) = found.pop()
        if old_kind != new_kind:
            raise CheckError(f"{binary} is a {new_kind} build and the store runs a {old_kind} build: their volume "
                             "index entries differ in size (4- against 5-byte offsets), so it cannot read the "
                             "volumes; stage a " + old_kind + " build of the release instead")
        return old, new

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        v = ctx.var(RollingVariables)
        host = subject.hosts[0]
        servers = volume_servers(ctx)
        duration = v.lead_s + len(servers) * v.per_server_s + 10
        out = ctx.workdir(f"rolling-{rep.label}")
        releases = (ctx.recall(_UPGRADE_KEY) or self._upgrade_versions(ctx)) if v.upgrade_binary else None
        env = self._start_load(ctx, host, out, duration)
        try:
            time.sleep(v.lead_s)
            started = time.monotonic()
            rejoined = [self._restart(ctx, h, addr, v.per_server_s) for h, addr in servers]
            restarts_s = time.monotonic() - started
            if v.lead_s + restarts_s > duration - 5:
                raise CheckError(f"the restarts took {restarts_s:.0f} s, past the end of the load; raise "
                                 "objectstore.rolling.per_server_s")
            totals, raw = self._load_result(ctx, host, out, duration)
        finally:  # a roll stopped early leaves the load running: end it before its files go
            ctx.run(host, f"pkill -f -- {quote('--benchdata ' + out)} || true", 30)
            drop_env_file(ctx, host, env)
            ctx.run(host, f"rm -f {quote(out)}.*", 60)
            drop_benchmark_bucket(ctx, v.bucket)
        sample = self._sample(totals, servers, rejoined, restarts_s, duration)
        if releases:
            entry_s = [self._upgrade_entry_points(ctx, h, v.per_server_s) for h, _ in servers]
            self._upgraded(sample, servers, releases, entry_s)
        sample.raw.update(raw)
        return sample

    def _upgrade_entry_points(self, ctx: Context, host: str, budget_s: int) -> float:
        """After the load: restart the host's master, filer and S3 gateway on the upgraded binary; seconds until
        every SeaweedFS service of the host runs it and the master answers volume.list with no volume short."""
        t0 = time.monotonic()
        ctx.must(host, "systemctl restart seaweedfs-master seaweedfs-filer seaweedfs-s3", 180,
                 what="restarting the master, filer and S3 gateway")
        stale: list[str] = []
        while time.monotonic() - t0 < budget_s:
            time.sleep(1)
            stale = self._not_on_binary(ctx, host)
            if not stale:
                try:
                    if not self._topology(ctx).short():
                        return time.monotonic() - t0
                except CheckError:  # the masters are electing a leader
                    pass
        raise CheckError(f"{host}: not back on the upgraded binary within {budget_s} s: "
                         f"{', '.join(stale) or 'volume.list still short of copies'} (see journalctl -u 'seaweedfs-*')")

    @staticmethod
    def _not_on_binary(ctx: Context, host: str, services: tuple[str, ...] = _SERVICES) -> list[str]:
        """The host's SeaweedFS services that are not running, or run another file than INSTALLED (the old
        binary's inode, still open after the rename)."""
        probe = "; ".join(
            f"p=$(systemctl show -p MainPID --value {s}); "
            f"if [ \"$p\" -gt 0 ] && [ \"$(stat -L -c %d:%i /proc/$p/exe)\" = \"$(stat -L -c %d:%i {INSTALLED})\" ]; "
            f"then echo {s} ok; else echo {s} stale; fi" for s in services)
        r = ctx.run(host, probe + " 2>/dev/null", 30)
        return [s for s in services if f"{s} ok" not in r.stdout]

    @staticmethod
    def _upgraded(sample: Sample, servers: list[tuple[str, str]], releases: tuple[str, str],
                  entry_s: list[float]) -> None:
        old, new = releases
        sample.details.insert(0, f"upgrade SeaweedFS {old} → {new}: each volume server switched to the new binary "
                                 "as it restarted under the load")
        sample.details.append("after the load, one host at a time: master, filer and S3 gateway restarted on the new "
                              "binary, " + ", ".join(f"{h} {s:.1f} s" for (h, _), s in zip(servers, entry_s,
                                                                                            strict=True)))
        sample.info["upgrade"] = {"from": old, "to": new, "entry_points_s": [round(s, 1) for s in entry_s]}

    def _start_load(self, ctx: Context, host: str, out: str, duration: int) -> str:
        """warp mixed in the background on the launcher (credentials in a 0600 env file); returns that file."""
        v = ctx.var(RollingVariables)
        ak, sk = s3_credentials(ctx)
        warp = warp_on(ctx, host)
        # One gateway: each node's filer keeps its own metadata store, synced to its peers asynchronously (SeaweedFS
        # wiki "Filer Store Replication"), so reads through another gateway would count that lag, not the restart.
        args = [warp, "mixed", "--json", "--no-color", "--host", s3_endpoints(ctx)[0], "--bucket", v.bucket,
                "--obj.size", v.obj_size, "--concurrent", str(v.concurrent), "--objects", str(v.objects),
                "--duration", f"{duration}s", "--benchdata", out]
        if s3_tls(ctx):
            args.append("--tls")
        env = push_env_file(ctx, host, "rolling.env", {"WARP_ACCESS_KEY": ak, "WARP_SECRET_KEY": sk})
        command = with_env_file(env, " ".join(quote(a) for a in args))
        script = f"{command} >{quote(out)}.out 2>&1; echo $? >{quote(out)}.rc"
        ctx.must(host, f"rm -f {quote(out)}.rc && setsid nohup sh -c {quote(script)} >/dev/null 2>&1 </dev/null &",
                 30, what="starting warp mixed")
        return env

    def _topology(self, ctx: Context) -> Topology:
        found = master_address(ctx)
        if found is None:
            raise CheckError("the first SeaweedFS master is not among the selected hosts")
        host, master = found
        r = ctx.run(host, f"echo volume.list | weed shell -master={master} 2>&1", 60)
        if not r.ok:
            raise CheckError(f"{host}: weed shell volume.list failed (rc {r.rc}): {r.stdout.strip()[-300:]}")
        return parse_volume_list(r.stdout)

    def _restart(self, ctx: Context, host: str, address: str, budget_s: int) -> tuple[float, float]:
        """Restart one volume server: (seconds the restart took, seconds from its start until the master lists it
        with its volumes and no volume is short of copies). On SIGTERM a volume server stops its heartbeats first and
        exits preStopSeconds later (10 s; weed/command/volume.go), so the master sends no client to it meanwhile.
        CheckError (the roll stops there, the rest untouched) when it is not back within budget_s of the restart's
        start."""
        before = self._topology(ctx)
        if before.short():
            raise CheckError(f"before restarting {host}: {'; '.join(before.short()[:5])}")
        binary = ctx.var(RollingVariables).upgrade_binary
        if binary:  # a new name for the new file (a rename is atomic; running services keep the old inode open)
            ctx.must(host, f"ln -f {quote(binary)} {INSTALLED}.kiln-new && mv -f {INSTALLED}.kiln-new {INSTALLED}",
                     60, what=f"switching {INSTALLED} to {binary}")
        t0 = time.monotonic()
        ctx.must(host, "systemctl restart seaweedfs-volume", 180, what="restarting seaweedfs-volume")
        t1 = time.monotonic()
        last = before
        while time.monotonic() - t0 < budget_s:
            time.sleep(1)
            last = self._topology(ctx)
            if last.nodes.get(address, -1) >= before.nodes.get(address, 0) and not last.short():
                if binary and self._not_on_binary(ctx, host, ("seaweedfs-volume",)):
                    raise CheckError(f"{host}: the volume server rejoined but does not run {INSTALLED}")
                return t1 - t0, time.monotonic() - t1
        had = before.nodes.get(address, 0)
        missing = last.short() or [f"{address} lists {last.nodes.get(address, 0)} of {had} volumes"]
        raise CheckError(f"{host}: the volume server did not rejoin within {budget_s} s of the restart: "
                         f"{'; '.join(missing[:5])} (raise objectstore.rolling.per_server_s, or see journalctl -u "
                         "seaweedfs-volume)")

    def _load_result(self, ctx: Context, host: str, out: str,
                     duration: int) -> tuple[dict[str, WarpTotal], dict[str, str]]:
        """Wait for warp to end; the whole run's requests per operation from its per-operation record, and what the
        report keeps of it (warp's summary, the failed requests' lines, at most 50)."""
        deadline = time.monotonic() + duration + 300
        while ctx.run(host, f"test -s {quote(out)}.rc", 30).rc != 0:
            if time.monotonic() > deadline:
                raise CheckError(f"{host}: warp mixed did not end within {duration + 300} s")
            time.sleep(2)
        rc = ctx.run(host, f"cat {quote(out)}.rc; tail -c 2000 {quote(out)}.out", 30)
        status, _, tail = rc.stdout.partition("\n")
        record = ctx.run(host, f"command -v zstd >/dev/null || exit 127; zstd -dc {quote(out)}.csv.zst", 120)
        if record.rc == 127:
            raise CheckError(f"{host}: zstd, which reads warp's per-operation record, is missing (roles/bench_tools "
                             "installs it)")
        tool_finished(host, "zstd", record)
        if status.strip() != "0" and not record.stdout.strip():
            raise CheckError(f"{host}: warp mixed exited with rc {status.strip()}: {tail.strip()[-300:]}")
        lines = record.stdout.splitlines() or [""]
        header = lines[0].split("\t")
        col = header.index("error") if "error" in header else len(header)
        failed = [ln for ln in lines[1:] if len(cells := ln.split("\t")) > col and cells[col].strip()][:50]
        kept = {"warp.txt": re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", tail)}
        if failed:
            kept["failed-requests.tsv"] = "\n".join([lines[0], *failed]) + "\n"
        return parse_warp_record(record.stdout), kept

    @staticmethod
    def _sample(totals: dict[str, WarpTotal], servers: list[tuple[str, str]], rejoined: list[tuple[float, float]],
                restarts_s: float, duration: int) -> Sample:
        failed = sum(t.errors for t in totals.values())
        requests = sum(t.requests for t in totals.values())
        if requests == 0:
            raise CheckError("warp's per-operation record holds no request")
        details = [f"{h} ({addr}): restart {stop:.1f} s (heartbeats stop, preStopSeconds, start), then listed with "
                   f"every volume's copies {back:.1f} s later" for (h, addr), (stop, back) in zip(servers, rejoined,
                                                                                                  strict=True)]
        by_op = ", ".join(f"{op} {t.requests}" for op, t in sorted(totals.items()))
        details.append(f"load: {requests} requests in {duration} s ({by_op}), {failed} failed; the restarts took "
                       f"{restarts_s:.1f} s of it")
        return Sample(float(failed), details=details, info={
            "requests": requests, "failed": failed, "restart_s": [round(a, 1) for a, _ in rejoined],
            "rejoin_s": [round(b, 1) for _, b in rejoined], "restarts_s": round(restarts_s, 1),
            "by_op": {op: {"requests": t.requests, "errors": t.errors} for op, t in totals.items()}})
