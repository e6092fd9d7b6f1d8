"""Data flow: the mover's ratios against the naive way, measured on a mover host against the lake.

One pass of `python -m kiln.dataflow.measure` (the kiln the datamover role installed on the host) gives every
figure on the same data; each repetition runs one pass, and the seven checks judge their figure from the pass of
that repetition, so `kiln verify` measures the data once per repetition, not once per check. Model distribution is
not part of the pass: `dataflow.model_distribution` (kiln/verify/checks/dataflow_models.py) writes a model to the
lake and waits for the model service to deliver it unasked.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import Any, ClassVar

from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks.check import Check, CheckError, Rep, Sample, Subject, register
from kiln.verify.checks.conformance import s3_credentials
from kiln.verify.checks.context import Context
from kiln.verify.checks.objectstore import drop_benchmark_bucket
from kiln.verify.checks.options import Variables, var
from kiln.verify.checks.remote import drop_env_file, push_env_file, quote, tool_finished, with_env_file

RUNBOOK = "docs/runbooks/acceptance-dataflow.md"


@dataclass(frozen=True, slots=True)
class DataflowVariables(Variables):
    scope = "dataflow"
    python: str = var("/opt/kiln-datamover/bin/python", "the Python of the kiln the datamover role installed on "
                      "the mover hosts")
    fast_tier: str | None = var(None, "the fast-tier directory of the pass and the model relay; default: the "
                                "plan's Lustre mount point (the lab: /srv/kiln-fast)")
    shard_MiB: int = var(64, "checkpoint shard and model size of the pass, MiB (4 such files resume)")



MEASURE_BUCKET = "kiln-dataflow-measure"


def _bucket(ctx: Context) -> str:
    """On a kiln-deployed SeaweedFS a bucket of its own, dropped after each pass (SeaweedFS keeps deleted
    objects' space until a vacuum, and the lab's lake is small); on an external store the plan's bucket."""
    flow = ctx.plan.dataflow
    if flow is None:
        raise CheckError("the stack has no dataflow section")
    if ctx.plan.objectstore.backend == "seaweedfs":
        return MEASURE_BUCKET
    if flow.checkpoints is not None:
        return flow.checkpoints.bucket
    return flow.links[0].bucket if flow.links else ctx.plan.objectstore.buckets[0].name


def last_json_line(host: str, what: str, stdout: str, stderr: str) -> Any:
    """The JSON object a remote kiln script printed as its last line, or a CheckError quoting what it said."""
    try:
        return json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CheckError(f"{host}: {what} printed no JSON: {(stderr or stdout).strip()[-300:]}") from None


def measure_pass(ctx: Context, host: str, rep: Rep) -> dict[str, Any]:
    """The figures of this repetition's pass on `host`, measured on first use."""
    key = ("dataflow.measure", host, rep.label)
    kept: dict[str, Any] | None = ctx.recall(key)
    if kept is not None:
        return kept
    flow = ctx.plan.dataflow
    assert flow is not None
    v = ctx.var(DataflowVariables)
    python = v.python
    if not ctx.run(host, f"{quote(python)} -c 'import kiln.dataflow.measure'", 60).ok:
        raise CheckError(f"{host}: {python} has no kiln data mover; deploy it with the datamover role "
                         "(ansible/site.yml, tag datamover) or pass --option dataflow.python=PATH")
    fast = v.fast_tier or ctx.plan.mount_point
    work = posixpath.join(fast, f".kiln-measure-{rep.label}")
    ak, sk = s3_credentials(ctx)
    argv = [python, "-m", "kiln.dataflow.measure", "--endpoint", ctx.plan.objectstore.endpoint,
            "--bucket", _bucket(ctx), "--work", work, "--concurrency", str(flow.concurrency),
            "--part-MiB", str(flow.part_size_MiB), "--shard-MiB", str(v.shard_MiB)]
    shown = " ".join(quote(a) for a in argv)
    env = push_env_file(ctx, host, "dataflow.env", {"KILN_S3_ACCESS_KEY": ak, "KILN_S3_SECRET_KEY": sk})
    try:
        r = ctx.run(host, with_env_file(env, shown), 1800)
    finally:
        drop_env_file(ctx, host, env)
        if ctx.plan.objectstore.backend == "seaweedfs":
            drop_benchmark_bucket(ctx, MEASURE_BUCKET)
    tool_finished(host, "kiln.dataflow.measure", r)
    figures: dict[str, Any] = last_json_line(host, "kiln.dataflow.measure", r.stdout, r.stderr)
    figures["command"] = shown
    ctx.keep(key, figures)
    return figures


class DataflowCheck(Check):
    runbook = RUNBOOK
    tools = ("kiln data (rclone, boto3)",)
    variables = (DataflowVariables,)
    figure: ClassVar[str]

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        """One mover host (the first of the plan's movers the inventory reaches) runs the pass."""
        flow = ctx.plan.dataflow
        movers = [h for h in (flow.mover_hosts if flow else ()) if h in ctx.remotes]
        if not movers:
            return []
        return [Subject(f"{movers[0]} → lake {ctx.plan.objectstore.endpoint}", (movers[0],))]

    def not_applicable(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> str | None:
        return None  # the plan deploys or names the lake, and the role the mover: failures are errors

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        f = measure_pass(ctx, subject.hosts[0], rep)
        details = self.details(f)
        return Sample(float(f[self.figure]), details=details, raw={"measure.json": json.dumps(f, indent=1)},
                      info={k: v for k, v in f.items() if k != "command"})

    def details(self, f: dict[str, Any]) -> list[str]:
        return []


@register
class StageIn(DataflowCheck):
    id = "dataflow.stage_in"
    figure = "stage_in_speedup"

    def details(self, f: dict[str, Any]) -> list[str]:
        return [f"mover {f['stage_s']:.2f} s vs one sequential boto3 stream {f['naive_s']:.2f} s for "
                f"{f['stage_files']} files, {f['stage_bytes'] / 1e6:.1f} MB",
                f"the lake's GET rate alone (mover's engine, nothing written) is {f['naive_s'] / f['s3_get_s']:.2f}× "
                "the stream, the ceiling of a stage with this engine on this host"]


@register
class StageInEfficiency(DataflowCheck):
    id = "dataflow.stage_in_efficiency"
    figure = "stage_in_efficiency"

    def details(self, f: dict[str, Any]) -> list[str]:
        return [f"mover {f['stage_s']:.2f} s vs fast-tier write {f['fast_write_s']:.2f} s and S3 GET (mover's "
                f"engine, data discarded) {f['s3_get_s']:.2f} s for {f['stage_bytes'] / 1e6:.1f} MB"]


@register
class Resync(DataflowCheck):
    id = "dataflow.resync"
    figure = "resync_bytes"

    def details(self, f: dict[str, Any]) -> list[str]:
        return [f"re-sync took {100 * f['resync_share']:.1f} % of the full stage (dataflow.resync_time)"]


@register
class ResyncTime(DataflowCheck):
    id = "dataflow.resync_time"
    figure = "resync_share"

    def details(self, f: dict[str, Any]) -> list[str]:
        return [f"re-sync with nothing changed {f['resync_s']:.3f} s ({f['resync_bytes']} bytes) vs the full "
                f"stage {f['stage_s']:.2f} s"]


@register
class CheckpointBlocked(DataflowCheck):
    id = "dataflow.checkpoint_blocked"
    figure = "checkpoint_blocked_ratio"

    def details(self, f: dict[str, Any]) -> list[str]:
        write, upload = f["checkpoint_write_s"], f["checkpoint_export_s"]
        return [f"blocked {write:.2f} s (write) vs {write + upload:.2f} s (write + upload); export lag {upload:.2f} s"]


@register
class CheckpointRestore(DataflowCheck):
    id = "dataflow.checkpoint_restore"
    figure = "checkpoint_restore_ratio"

    def details(self, f: dict[str, Any]) -> list[str]:
        return [f"restore from the fast tier {f['restore_fast_s']:.2f} s vs from the lake {f['restore_lake_s']:.2f} s"]


@register
class Resume(DataflowCheck):
    id = "dataflow.resume"
    figure = "resume_lost_or_partial"

    def details(self, f: dict[str, Any]) -> list[str]:
        killed = "killed mid-upload" if f["resume_killed_mid_upload"] else "the kill came too late to interrupt it"
        return [f"export {killed}; {f['resume_visible_before_restart']} object(s) visible before the restart, "
                f"{f['resume_partial']} partial, {f['resume_lost']} lost after it"]
