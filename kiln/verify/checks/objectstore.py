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
from kiln.verify.parsers import parse_warp, parse_warp_version

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
        """warp runs on a client (the first selected compute host, or --launcher-host), not on a gateway."""
        stores = ctx.group_hosts(target.group)
        clients = ctx.group_hosts(COMPUTE)
        launcher = ctx.options.launcher_host or (clients[0] if clients else (stores[0] if stores else None))
        if launcher is None or launcher not in ctx.remotes:
            return []
        eps = s3_endpoints(ctx)
        return [Subject(f"{launcher} → {len(eps)} S3 gateway{'s' if len(eps) > 1 else ''}", (launcher, *stores))]

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
                "--duration", f"{v.duration_s}s", "--benchdata", bench]
        if self.op == "GET":
            args += ["--objects", str(v.objects)]
        if s3_tls(ctx):
            args.append("--tls")
        shown = " ".join(quote(a) for a in args)
        # credentials in a 0600 env file that the shell reads (warp takes WARP_ACCESS_KEY/WARP_SECRET_KEY from
        # the environment): never on warp's or the shell's command line
        env = push_env_file(ctx, host, "warp.env", {"WARP_ACCESS_KEY": ak, "WARP_SECRET_KEY": sk})
        cmd = with_env_file(env, f"{shown}; rc=$?; rm -f {quote(bench)}.csv.zst; exit $rc")
        try:
            r = ctx.run(host, cmd, v.duration_s * 4 + 600)
        finally:
            drop_env_file(ctx, host, env)
            drop_benchmark_bucket(ctx, v.bucket)
        res = parse_warp(r.stdout, r.stderr)
        op = res.op(self.op)  # any failed request is an error
        tool_finished(host, "warp", r)
        return Sample(op.bytes_per_s / 1e9, raw={"warp.json": _strip_progress(r.stdout), "command.txt": shown},
                      info={"ops_per_s": op.ops_per_s, "requests": op.requests, "errors": op.errors,
                            "concurrency": op.concurrency, "endpoints": eps, "object_size": v.obj_size})


def drop_benchmark_bucket(ctx: Context, bucket: str) -> None:
    """Drop warp's bucket after a run on a kiln-deployed SeaweedFS.

    SeaweedFS keeps the space of deleted objects until a vacuum; dropping the bucket drops its
    collection at once, so repeated PUT runs never fill the volume servers (the lab's small disks
    filled up after three runs). An external store's bucket is left alone: warp clears its objects.
    """
    store = ctx.plan.objectstore
    if store.backend != "seaweedfs" or not store.masters:
        return
    master = store.masters[0]
    if master not in ctx.remotes:
        return
    interfaces = ctx.hostvars(master).get("kiln_storage_interfaces") or [{}]
    address = interfaces[0].get("address") or master
    port = knowledge.load().ports.seaweedfs.master.value
    ctx.run(master, f"echo {quote('s3.bucket.delete -name ' + bucket)} | weed shell -master={address}:{port}", 120)


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
