"""Model distribution: a model object written to the lake reaches every receiver without anyone asking.

`dataflow.model_distribution` does what a user does and nothing more: it PUTs a fresh model object under the prefix
of the plan's first event-driven `dataflow.models` entry. Nobody tells the mover: the entry's model service
(`kiln data models`, `kiln-datamover-models@<i>.service` from roles/datamover) hears of the object from the
SeaweedFS filer's metadata subscription and distributes it through its relay. The check then waits, bounded by
5 × the plan's predicted arrival time (`kiln.plan.dataflow.model_arrival_s`, at least 30 s), until every receiver
directory holds the object under its final name with the same MD5, and counts any file it finds under the final
name with the wrong size or checksum (a partial copy exposed as complete).

The figure is the lake bytes served ÷ the model's bytes, from the object-store hosts' own network counters
(/proc/net/dev transmit bytes of every interface but loopback, read before the PUT and after the last arrival),
independent of the mover's accounting; it is an upper bound, since it also counts the PUT's TCP acknowledgements
and any other traffic those hosts send in the window. The mover's own count of the bytes it pulled (its status
file) is reported beside it. The object, the receivers' copies and the relay copy are deleted afterwards.

The object is PUT from the entry's first receiver host (with the kiln the datamover role installed there) and
watched on every receiver host; in the lab that is one host, so the upload and arrival times come from one clock.
"""

from __future__ import annotations

import json
import posixpath
import secrets

from kiln.plan.dataflow import model_arrival_s
from kiln.plan.model import AcceptanceTarget, ModelFlowPlan
from kiln.verify.checks.check import Check, CheckError, Rep, Sample, Subject, register
from kiln.verify.checks.conformance import s3_credentials
from kiln.verify.checks.context import Context
from kiln.verify.checks.dataflow import RUNBOOK, DataflowVariables, last_json_line
from kiln.verify.checks.remote import drop_env_file, push_env_file, quote, with_env_file

#: The relay directory under the fast tier (the datamover role's datamover_models_relay default).
RELAY_DIR = ".kiln-models-relay"
#: The wait is bounded by this many times the plan's predicted arrival, and never shorter than MIN_WAIT_S.
WAIT_FACTOR = 5.0
MIN_WAIT_S = 30.0

_PUT_PY = r"""
import hashlib, json, os, sys, time
from kiln.dataflow.lake import Credentials, client
endpoint, bucket, key, mib = sys.argv[1:5]
data = os.urandom(int(mib) << 20)
s3 = client(Credentials(endpoint, os.environ["KILN_S3_ACCESS_KEY"], os.environ["KILN_S3_SECRET_KEY"]))
s3.put_object(Bucket=bucket, Key=key, Body=data)
print(json.dumps({"md5": hashlib.md5(data).hexdigest(), "bytes": len(data), "put_done": time.time()}))
"""

_WAIT_PY = r"""
import hashlib, json, os, sys, time
paths, size, md5 = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
put_done, wait_s = float(sys.argv[4]), float(sys.argv[5])
arrived, bad = {}, {}
while len(arrived) < len(paths) and time.time() < put_done + wait_s:
    for p in paths:
        if p in arrived:
            continue
        try:
            seen, n = time.time(), os.path.getsize(p)
        except OSError:
            continue
        if n != size:
            bad[p] = f"{n} bytes under the final name, expected {size}"
            continue
        h = hashlib.md5()
        with open(p, "rb") as f:
            for b in iter(lambda: f.read(8 << 20), b""):
                h.update(b)
        if h.hexdigest() == md5:
            arrived[p] = seen - put_done
        else:
            bad[p] = "MD5 differs from the object's"
    time.sleep(0.1)
print(json.dumps({"arrived": arrived, "bad": bad}))
"""

_STATUS_PY = r"""
import json
from pathlib import Path
from kiln.dataflow import cli, progress
print(json.dumps(progress.read_all(Path(cli.STATE_DIR))))
"""


def model_entry(ctx: Context) -> tuple[int, ModelFlowPlan] | None:
    """The plan's first model entry driven by the filer's change events, with receivers, and its index."""
    flow = ctx.plan.dataflow
    for i, m in enumerate(flow.models if flow else ()):
        if m.events == "filer-subscribe" and m.hosts:
            return i, m
    return None


def tx_bytes(ctx: Context, host: str) -> int:
    """Bytes `host` has sent on every network interface but loopback (/proc/net/dev, the 9th counter)."""
    r = ctx.run(host, "cat /proc/net/dev", 30)
    if not r.ok:
        raise CheckError(f"{host}: cannot read /proc/net/dev (rc {r.rc}): {r.stderr.strip()[-200:]}")
    total = 0
    for line in r.stdout.splitlines()[2:]:
        name, _, counters = line.partition(":")
        fields = counters.split()
        if name.strip() != "lo" and len(fields) >= 9:
            total += int(fields[8])
    return total


@register
class ModelDistribution(Check):
    id = "dataflow.model_distribution"
    runbook = RUNBOOK
    tools = ("boto3 PUT", "kiln data models (SeaweedFS filer subscription)", "/proc/net/dev")
    variables = (DataflowVariables,)

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        found = model_entry(ctx)
        if found is None or found[1].hosts[0] not in ctx.remotes:
            return []
        i, m = found
        return [Subject(f"dataflow.models[{i}] {m.bucket}/{m.prefix} → {m.receivers} receivers on "
                        f"{', '.join(m.hosts)}", (m.hosts[0],))]

    def not_applicable(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> str | None:
        return None  # the plan deploys the lake and the role the model service: failures are errors

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        found = model_entry(ctx)
        flow = ctx.plan.dataflow
        assert found is not None and flow is not None
        index, m = found
        host, v = subject.hosts[0], ctx.var(DataflowVariables)
        stores = [h for h in ctx.plan.objectstore.hosts if h in ctx.remotes]
        if not stores:
            raise CheckError("no object-store host in the inventory: the lake's network counters cannot be read")
        name = f"kiln-verify-{rep.label}-{secrets.token_hex(4)}.safetensors"
        key = m.prefix + name
        paths = [posixpath.join(t, name) for t in m.targets]
        receivers = [h for h in m.hosts if h in ctx.remotes]
        relay = posixpath.join(v.fast_tier or ctx.plan.mount_point, RELAY_DIR, name)
        python = quote(v.python)
        ak, sk = s3_credentials(ctx)
        env = push_env_file(ctx, host, "models.env", {"KILN_S3_ACCESS_KEY": ak, "KILN_S3_SECRET_KEY": sk})
        put_argv = [ctx.plan.objectstore.endpoint, m.bucket, key, str(v.shard_MiB)]
        try:
            before = {h: tx_bytes(ctx, h) for h in stores}
            r = ctx.run(host, with_env_file(env, f"{python} -c {quote(_PUT_PY)} "
                                            + " ".join(quote(a) for a in put_argv)), 300)
            if not r.ok:
                raise CheckError(f"{host}: the PUT of {m.bucket}/{key} failed (rc {r.rc}): "
                                 f"{(r.stderr or r.stdout).strip()[-300:]}")
            put = last_json_line(host, "the PUT", r.stdout, r.stderr)
            nbytes = int(put["bytes"])
            predicted = model_arrival_s(flow, m, nbytes)
            wait_s = max(MIN_WAIT_S, WAIT_FACTOR * predicted)
            arrived: dict[str, float] = {}
            bad: dict[str, str] = {}
            for h in receivers:  # the other receivers' clocks are taken to agree with the uploader's (NTP)
                w = ctx.run(h, f"{python} -c {quote(_WAIT_PY)} {quote(json.dumps(paths))} {nbytes} {put['md5']} "
                               f"{put['put_done']} {wait_s}", int(wait_s) + 120)
                seen = last_json_line(h, "the receiver watch", w.stdout, w.stderr)
                arrived |= {f"{h}:{p}": t for p, t in seen["arrived"].items()}
                bad |= {f"{h}:{p}": why for p, why in seen["bad"].items()}
            after = {h: tx_bytes(ctx, h) for h in stores}
            st = ctx.run(host, f"{python} -c {quote(_STATUS_PY)}", 60)
            status = last_json_line(host, "kiln data status", st.stdout, st.stderr) if st.ok else []
        finally:
            ctx.run(host, with_env_file(env, f"{python} -c "
                                        + quote("import os, sys; from kiln.dataflow.lake import Credentials, client; "
                                                "client(Credentials(sys.argv[1], os.environ['KILN_S3_ACCESS_KEY'], "
                                                "os.environ['KILN_S3_SECRET_KEY'])).delete_object(Bucket=sys.argv[2], "
                                                "Key=sys.argv[3])")
                                        + " " + " ".join(quote(a) for a in put_argv[:3])), 60)
            drop_env_file(ctx, host, env)
            for h in receivers:
                ctx.run(h, "rm -f " + " ".join(quote(p) for p in [*paths, relay]), 30)
        expected = [f"{h}:{p}" for h in receivers for p in paths]
        journal = f"journalctl -u kiln-datamover-models@{index} on {', '.join(receivers)}"
        if bad:
            raise CheckError(f"{len(bad)} receiver(s) exposed a wrong copy under the final name: "
                             + "; ".join(f"{p}: {why}" for p, why in sorted(bad.items())) + f" ({journal})")
        if len(arrived) < len(expected):
            missing = sorted(set(expected) - set(arrived))
            raise CheckError(f"{len(arrived)}/{len(expected)} receivers got {m.bucket}/{key} within {wait_s:.0f} s "
                             f"(5 × the plan's {predicted:.1f} s); missing: {', '.join(missing)} ({journal})")
        sent = sum(after[h] - before[h] for h in stores)
        mover = sum(int(s.get("bytes_done", 0)) for s in status if s.get("link") == f"models{index}")
        last, first = max(arrived.values()), min(arrived.values())
        s = Sample(sent / nbytes, raw={"arrivals.json": json.dumps(arrived, indent=1)})
        s.details.append(f"{len(arrived)}/{len(expected)} receivers got the {nbytes / 1e6:.1f} MB model unasked, "
                         f"checksum-identical, none partial under its final name; first {first:.2f} s, last "
                         f"{last:.2f} s after the PUT (plan {predicted:.1f} s, bound {wait_s:.0f} s)")
        s.details.append(f"object-store hosts sent {sent / 1e6:.1f} MB in the window ({sent / nbytes:.2f}× the "
                         f"model; /proc/net/dev, an upper bound); the mover's status file: {mover / 1e6:.1f} MB "
                         f"pulled by its last pass")
        s.info.update(model_bytes=nbytes, receivers=len(expected), arrival_last_s=last, arrival_first_s=first,
                      arrival_predicted_s=predicted, wait_bound_s=wait_s, lake_tx_bytes=sent,
                      mover_pulled_bytes=mover, naive_lake_factor=float(len(expected)))
        return s
