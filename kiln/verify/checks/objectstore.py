"""Object store: MinIO warp GET and PUT with many parallel streams against every S3 gateway, from a client."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kiln import knowledge
from kiln.plan.groups import COMPUTE
from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks.check import Check, CheckError, Rep, Sample, Subject, register
from kiln.verify.checks.conformance import s3_credentials, s3_endpoints, s3_tls
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Variables, var
from kiln.verify.checks.remote import drop_env_file, push_env_file, quote, tool_finished, with_env_file
from kiln.verify.parsers import parse_warp, parse_warp_ops, parse_warp_version

RUNBOOK = "docs/runbooks/acceptance-objectstore.md"
REPO_WARP = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "warp"


@dataclass(frozen=True, slots=True)
class WarpVariables(Variables):
    scope = "objectstore.warp"
    binary: str | None = var(None, "a local warp pushed to the launcher when it has none; default: .tools/bin/warp")
    duration_s: int = var(30, "duration of each run (--duration)")
    obj_size: str = var("4MiB", "object size (--obj.size)")
    concurrent: int = var(32, "parallel requests (--concurrent)")
    objects: int = var(500, "objects the GET run reads (--objects)")
    bucket: str = var("kiln-verify-warp", "the bucket warp creates and empties (dropped after each run on a "
                      "kiln-deployed SeaweedFS)")


def launcher_subject(ctx: Context, target: AcceptanceTarget) -> list[Subject]:
    """warp runs on a client (the first selected compute host, or --launcher-host), not on a gateway; the
    subject's other hosts are the object store's."""
    stores = ctx.group_hosts(target.group)
    clients = ctx.group_hosts(COMPUTE)
    launcher = ctx.options.launcher_host or (clients[0] if clients else (stores[0] if stores else None))
    if launcher is None or launcher not in ctx.remotes:
        return []
    eps = s3_endpoints(ctx)
    return [Subject(f"{launcher} → {len(eps)} S3 gateway{'s' if len(eps) > 1 else ''}", (launcher, *stores))]


def master_address(ctx: Context) -> tuple[str, str] | None:
    """(host, address:port) of the first SeaweedFS master when kiln deployed the store and that host is selected."""
    store = ctx.plan.objectstore
    if store.backend != "seaweedfs" or not store.masters or store.masters[0] not in ctx.remotes:
        return None
    master = store.masters[0]
    interfaces = ctx.hostvars(master).get("kiln_storage_interfaces") or [{}]
    address = interfaces[0].get("address") or master
    return master, f"{address}:{knowledge.load().ports.seaweedfs.master.value}"


def warp_on(ctx: Context, host: str) -> str:
    """warp on the host: its own, else the local binary (objectstore.warp.binary, .tools/bin/warp) pushed there."""
    r = ctx.run(host, "command -v warp", 30)
    if r.ok and r.stdout.strip():
        return r.stdout.strip().splitlines()[0]
    binary = ctx.var(WarpVariables).binary
    local = Path(binary) if binary else REPO_WARP
    if not local.is_file():
        raise CheckError(f"{host}: warp is not installed and there is no local warp to copy ({local}); "
                         "build it with scripts/build-tools.sh warp or pass --option objectstore.warp.binary=PATH")
    dest = ctx.workdir("bin", "warp")
    check = ctx.run(host, f"{quote(dest)} --version", 30)
    if not (check.ok and check.stdout.strip()):
        ctx.remote(host).put(local, dest, 0o755)
    return dest


def warp_version(ctx: Context, host: str, warp: str) -> str:
    """The warp version on the host, or CheckError when it is not one whose JSON the parser reads."""
    r = ctx.run(host, f"{quote(warp)} --version", 30)
    try:
        return parse_warp_version(r.stdout + r.stderr)
    except ValueError as exc:
        raise CheckError(f"{host}: {warp}: {exc}") from None


class Warp(Check):
    op = "GET"
    runbook = RUNBOOK
    tools = ("warp",)
    variables = (WarpVariables,)

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        return launcher_subject(ctx, target)

    def not_applicable(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> str | None:
        return None  # "objectstore": the plan deploys or names one; failure to reach it is an error, not N/A

    def __init__(self) -> None:
        self._warp: dict[str, str] = {}  # launcher → warp path there

    def prepare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:
        s3_credentials(ctx)  # no secret, no run: fail before copying anything to the host
        warp = warp_on(ctx, subject.hosts[0])
        warp_version(ctx, subject.hosts[0], warp)
        self._warp[subject.hosts[0]] = warp

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        v = ctx.var(WarpVariables)
        host = subject.hosts[0]
        ak, sk = s3_credentials(ctx)
        eps = s3_endpoints(ctx)
        bench = ctx.workdir(f"warp-{self.op.lower()}-{rep.label}")
        warp = self._warp.get(host) or warp_on(ctx, host)
        args = [warp, self.op.lower(), "--json", "--no-color", "--host", ",".join(eps),
                "--bucket", v.bucket, "--obj.size", v.obj_size, "--concurrent", str(v.concurrent),
                "--duration", f"{v.duration_s}s", "--analyze.dur", f"{analysis_segment_ms(v.duration_s)}ms",
                "--benchdata", bench]
        if self.op == "GET":
            args += ["--objects", str(v.objects)]
        if s3_tls(ctx):
            args.append("--tls")
        shown = " ".join(quote(a) for a in args)
        # credentials in a 0600 env file that the shell reads (warp takes WARP_ACCESS_KEY/WARP_SECRET_KEY from
        # the environment): never on warp's or the shell's command line
        env = push_env_file(ctx, host, "warp.env", {"WARP_ACCESS_KEY": ak, "WARP_SECRET_KEY": sk})
        try:
            r = ctx.run(host, with_env_file(env, shown), v.duration_s * 4 + 600)
            res = parse_warp(r.stdout, r.stderr)
            tool_finished(host, "warp", r)
            raw = {"warp.json": _strip_progress(r.stdout), "command.txt": shown}
            if res.skipped(self.op) is not None:
                return self.run_total(ctx, host, bench, v, raw)
        finally:
            drop_env_file(ctx, host, env)
            ctx.run(host, f"rm -f {quote(bench)}.csv.zst", 60)
            drop_benchmark_bucket(ctx, v.bucket)
        op = res.op(self.op)  # any failed request is an error
        return Sample(op.bytes_per_s / 1e9, raw=raw,
                      info={"ops_per_s": op.ops_per_s, "requests": op.requests, "errors": op.errors,
                            "concurrency": op.concurrency, "endpoints": s3_endpoints(ctx), "object_size": v.obj_size})

    def run_total(self, ctx: Context, host: str, bench: str, v: WarpVariables, raw: dict[str, str]) -> Sample:
        """The figure when warp's analysis skipped the operation: the run's total from warp's own per-operation
        record (bytes of the successful requests ÷ first start to last end). Every stream must have finished a
        request and none may have failed, else there is no figure (ERROR)."""
        r = ctx.run(host, f"command -v zstd >/dev/null || exit 127; zstd -dc {quote(bench)}.csv.zst", 120)
        if r.rc == 127:
            raise CheckError(f"{host}: warp's analysis skipped {self.op} (too few samples) and zstd, which reads "
                             "warp's per-operation record, is missing (roles/bench_tools installs it)")
        tool_finished(host, "zstd", r)
        total = parse_warp_ops(r.stdout, self.op)
        raw["ops.tsv"] = r.stdout
        if total.errors:
            raise CheckError(f"{host}: {total.errors} of {total.requests} {self.op} requests failed")
        if total.streams < v.concurrent:
            raise CheckError(f"{host}: only {total.streams} of {v.concurrent} warp streams finished a {self.op} in "
                             f"{total.seconds:.1f} s: too few requests to judge")
        return Sample(total.bytes_per_s / 1e9, raw=raw, details=[
            f"note: warp's analysis skipped {self.op}: no two analysis segments of "
            f"{analysis_segment_ms(v.duration_s)} ms in which all {v.concurrent} streams were busy; the figure is the "
            f"run's total from warp's per-operation record: {total.requests} requests, {total.bytes / 1e9:.3f} GB "
            f"in {total.seconds:.2f} s (first start to last end)"],
            info={"requests": total.requests, "errors": 0, "concurrency": total.streams, "figure": "run total",
                  "endpoints": s3_endpoints(ctx), "object_size": v.obj_size})


def analysis_segment_ms(duration_s: int) -> int:
    """The length of warp's analysis segments for a run of `duration_s`: a twentieth of it, 100 ms to 1 s.

    warp v1.0 averages over the window in which every stream was busy and skips an operation whose window holds
    fewer than two segments (pkg/aggregate/aggregate.go Aggregate: `len(segs) <= 1` → Skipped). Its own choice
    for a run under 400 s is 1 s (cli/analyze.go analysisDur), which a 5 s run with slow PUTs under load does
    not fill. The segments only split the window: the figure (the average over the window) is the same; a run
    whose window is still too short remains an ERROR. 30 s runs keep warp's 1 s."""
    return max(100, min(1000, duration_s * 1000 // 20))


def drop_benchmark_bucket(ctx: Context, bucket: str) -> None:
    """Drop warp's bucket after a run on a kiln-deployed SeaweedFS.

    SeaweedFS keeps the space of deleted objects until a vacuum; dropping the bucket drops its
    collection at once, so repeated PUT runs never fill the volume servers (the lab's small disks
    filled up after three runs). An external store's bucket is left alone: warp clears its objects.
    """
    found = master_address(ctx)
    if found is None:
        return
    host, master = found
    ctx.run(host, f"echo {quote('s3.bucket.delete -name ' + bucket)} | weed shell -master={master}", 120)


def _strip_progress(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", text)


@register
class WarpGet(Warp):
    id = "objectstore.s3_get"
    op = "GET"


@register
class WarpPut(Warp):
    id = "objectstore.s3_put"
    op = "PUT"
