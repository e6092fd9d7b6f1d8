"""The token stream (stream.*): kiln's consumer and producer against the naive loop, latency, resume, durability and
retention, on the running brokers.

One measurement pass per topic (kiln.stream.measure, from the host `kiln verify` runs on, like a training rank
reading over the management network) gives every figure but retention's: the kiln and naive sides publish and read
the same token ids on the same brokers, one after the other, so their ratio is not skewed by a busier moment. Each
stream.* row judges its figure from that pass; the pass runs once however many repetitions the stack asks for (its
own repetitions are its message counts), when the first benchmark row asks for it: benchmarks run one at a time
(kiln.verify.runner), never beside the conformance reads, whose load on this host would stretch the latency tail.
stream.retention is such a read (the running topic's configs) and reads them itself, outside the pass.

The durability drill kills a broker (`systemctl kill -s SIGKILL` of the kafka role's unit, over SSH): it runs only
with `--option stream.drill=true` (the lab sets it), and the pass waits for the killed broker to rejoin every
partition's ISR before it ends.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from kiln import knowledge
from kiln.plan.model import AcceptanceTarget, KafkaPlan, KafkaTopicPlan
from kiln.stream.settings import client_config
from kiln.verify.checks.check import Check, CheckError, NotApplicable, Rep, Sample, Subject, register
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Variables, var
from kiln.verify.checks.remote import quote

RUNBOOK = "docs/runbooks/acceptance-stream.md"
#: The unit the kafka role runs each KRaft node as (roles/kafka).
UNIT = "kafka.service"


@dataclass(frozen=True, slots=True)
class StreamVariables(Variables):
    scope = "stream"
    bootstrap: str | None = var(None, "host:port[,host:port] of brokers reachable from here; default the plan's "
                                "bare-metal brokers (with Strimzi: required, an external listener)")
    messages: int = var(4800, "token messages the naive loop, the resume and the durability runs publish and read")
    kiln_messages: int = var(19200, "token messages kiln's producer publishes and its consumer reads: enough that "
                             "what the first fetch buffers before the clock starts is a small part of the read")
    drill: bool = var(False, "kill the broker leading the most partitions during production (stream.durability); "
                      "the cluster keeps serving, the killed node restarts")
    latency_messages: int = var(2000, "messages of the latency run, sent at 100 per second: the p99 is then the "
                                      "20th slowest, which one stall of a busy host cannot decide")
    latency_warmup_messages: int = var(2000, "messages sent the same way just before the latency run and not "
                                       "counted: a broker JVM that has served little runs its request path cold")


def _kafka(ctx: Context) -> KafkaPlan:
    if ctx.plan.kafka is None:
        raise NotApplicable("the stack has no token stream (pipeline.kafka)")
    return ctx.plan.kafka


def _topic(ctx: Context, target: AcceptanceTarget) -> KafkaTopicPlan:
    name = dict(target.env).get("KILN_STREAM_TOPIC", "")
    topic = next((t for t in _kafka(ctx).topics if t.name == name), None)
    if topic is None:
        raise CheckError(f"the plan has no topic {name!r} (re-plan: kiln verify reads the current plan)")
    return topic


def bootstrap(ctx: Context) -> str:
    """The brokers' client listeners: --option stream.bootstrap, else the plan's bare-metal brokers."""
    given = ctx.var(StreamVariables).bootstrap
    if given:
        return given
    k = _kafka(ctx)
    if k.mode != "baremetal":
        raise NotApplicable("the brokers run on Kubernetes (Strimzi): pass --option stream.bootstrap=HOST:PORT of "
                            "a listener reachable from this host")
    port = knowledge.load().ports.kafka.client.value
    return ",".join(f"{ctx.plan.host(n.host).management_address}:{port}" for n in k.nodes if "broker" in n.roles)


class StreamCheck(Check):
    """A stream.* row: its figure comes from the topic's measurement pass (run on first use)."""

    runbook = RUNBOOK
    single_run = True
    tools: ClassVar[tuple[str, ...]] = ("kiln.stream.measure", "confluent-kafka", "kafka-python")
    variables = (StreamVariables,)
    figure: ClassVar[str]

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        """One per topic, measured from here; on bare metal only when the KRaft nodes are selected (the drill and
        the restarts reach them over SSH)."""
        topic = dict(target.env).get("KILN_STREAM_TOPIC", "?")
        label = f"{topic} (from the kiln verify host)"
        k = ctx.plan.kafka
        if k is None or k.mode != "baremetal":
            return [Subject(label, ("localhost",))]
        nodes = tuple(n.host for n in k.nodes if n.host in ctx.remotes)
        return [Subject(label, nodes)] if nodes else []

    def not_applicable(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> str | None:
        try:
            import confluent_kafka  # noqa: F401
            import kafka  # type: ignore[import-untyped]  # noqa: F401
        except ImportError as exc:
            return f"{exc.name} is not installed on this host: pip install 'kiln[ops,stream]'"
        return None

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        figures = measure_pass(ctx, _topic(ctx, target))
        value = figures.get(self.figure)
        if value is None and f"{self.figure}_error" in figures:
            raise CheckError(figures[f"{self.figure}_error"])
        if value is None:
            raise NotApplicable(figures.get(f"{self.figure}_why", "not measured in this pass"))
        return Sample(float(value), details=list(figures.get(f"{self.figure}_details", [])),
                      info={k: v for k, v in figures.items() if not k.endswith(("_details", "_why", "_error"))})


def measure_pass(ctx: Context, topic: KafkaTopicPlan) -> dict[str, Any]:
    """Every figure of the topic's pass, measured once per `kiln verify` run."""
    key = ("stream.pass", topic.name)
    kept: dict[str, Any] | None = ctx.recall(key)
    if kept is None:
        try:
            kept = _run_pass(ctx, topic)
        except (NotApplicable, CheckError) as exc:
            kept = {"failed": exc}
        except Exception as exc:  # a broker or client error: every row of the pass reports it, none re-runs it
            kept = {"failed": CheckError(f"the measurement pass of {topic.name} failed: {type(exc).__name__}: {exc}")}
        ctx.keep(key, kept)
    if "failed" in kept:
        raise kept["failed"]
    return kept


def _run_pass(ctx: Context, topic: KafkaTopicPlan) -> dict[str, Any]:
    from kiln.stream import measure as m

    k, v, brokers = _kafka(ctx), ctx.var(StreamVariables), bootstrap(ctx)
    shape = m.TopicShape(partitions=topic.partitions, replication=topic.replication,
                         tokens_per_message=topic.tokens_per_message, dtype=topic.dtype,
                         configs={s.name: s.value for s in topic.settings if s.name != "retention.ms"})
    # librdkafka's names of the plan's settings (kiln.stream.client_config, as training code gets them)
    producer, consumer = client_config(k, "producer", brokers), client_config(k, "consumer", brokers)
    ids = m.token_ids(v.messages * topic.tokens_per_message, topic.dtype)
    out: dict[str, Any] = {"bootstrap": brokers, "messages": v.messages, "kiln_messages": v.kiln_messages,
                           "tokens": int(ids.size),
                           "data": f"synthetic {topic.dtype} token ids (Zipf a={m.ZIPF_A}, kiln.stream.measure)"}
    with _scratch(m, brokers, shape, "kiln-verify-latency") as name:
        p50, p99, early = m.latency_ms(brokers, name, shape, producer, v.latency_messages, 100,
                                       v.latency_warmup_messages)
    out.update(latency=p99, latency_details=[
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms over {v.latency_messages} messages at 100/s, acks=all, after "
        f"{v.latency_warmup_messages} not counted (their p99 {early:.1f} ms)"])
    with _scratch(m, brokers, shape, "kiln-verify-kiln") as name:
        sent = m.produce(brokers, name, m.token_ids(v.kiln_messages * topic.tokens_per_message, topic.dtype), shape,
                         producer)
        # three reads of a fraction of a second each: the median steadies the figure on a shared host
        tail = m.end_of_topic(shape, consumer, sent)
        kiln_rate = statistics.median(m.consume_kiln(brokers, name, shape, sent.messages, consumer, tail=tail)
                                      for _ in range(3))
    with _scratch(m, brokers, shape, "kiln-verify-naive") as name:
        naive = m.naive(brokers, name, ids, shape)
    out.update(_rates(topic, sent, kiln_rate, naive, tail=tail))
    with _scratch(m, brokers, shape, "kiln-verify-resume") as name, tempfile.TemporaryDirectory() as work:
        m.produce(brokers, name, ids, shape, producer)
        r = m.resume(brokers, name, shape, steps=max(3, v.messages // 2 // 8), rank=1, world=2, work=Path(work))
    out.update(resume=r["mismatched"], resume_details=[
        f"rank 1 of 2, {r['steps']} batches, SIGKILLed after checkpoints {r['killed_at']}: "
        + ("the same sequence" if r["identical"] else f"{r['mismatched']} batches differ from the uninterrupted read")])
    out.update(_guarded("durability", lambda: _drill(ctx, m, brokers, shape, producer, ids)))
    return out


def _guarded(figure: str, part: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A part of the pass whose failure is its own row's ERROR: the figures measured before it stand."""
    try:
        return part()
    except Exception as exc:  # a broker or client error, reported on the row
        return {f"{figure}_error": f"{type(exc).__name__}: {exc}"}


@contextlib.contextmanager
def _scratch(m: Any, brokers: str, shape: Any, prefix: str) -> Any:
    name = m.scratch_topic(brokers, shape, prefix)
    try:
        yield name
    finally:
        m.drop_topic(brokers, name)


def _rates(topic: KafkaTopicPlan, sent: Any, kiln_rate: float, naive: dict[str, float], *,
           tail: int = 0) -> dict[str, Any]:
    per_token = sent.wire_bytes / (sent.messages * topic.tokens_per_message)
    speedup = kiln_rate / naive["consumer_tokens_per_s"]
    return {
        "consumer": kiln_rate, "consumer_details": [
            f"kiln {kiln_rate / 1e6:.1f} M tokens/s; naive {naive['consumer_tokens_per_s'] / 1e6:.2f} M tokens/s; "
            f"a node needs {topic.tokens_per_s_node:.0f}",
            f"kiln timed from its first batch to the topic's last {tail} messages (its last fetch of each partition "
            "waits fetch.wait.max.ms: the end of a finished topic, not a rate)"],
        "consumer_vs_naive": speedup, "consumer_vs_naive_details": [
            f"kiln {kiln_rate / 1e6:.1f} M ÷ naive {naive['consumer_tokens_per_s'] / 1e6:.2f} M tokens/s, same pass, "
            f"same brokers; kafka-python's CRC32C in {'C (crc32c)' if naive['c_crc32c'] else 'Python (its default)'}; "
            f"producers: kiln {sent.wire_MBps():.2f} MB/s on the wire ({topic.compression}), naive "
            f"{naive['producer_MBps']:.2f} MB/s of payload (JSON, gzip)"],
        "producer": sent.wire_MBps(), "producer_details": [
            f"{sent.messages} messages in {sent.seconds:.2f} s, {sent.wire_bytes / 1e6:.1f} MB sent; "
            f"planned ingress {topic.ingress_MBps:.3g} MB/s"],
        "bytes_per_token": per_token, "bytes_per_token_details": [
            f"{sent.wire_bytes} bytes sent for {sent.messages * topic.tokens_per_message} tokens (librdkafka "
            f"brokers[].txbytes, request framing included); plan {topic.bytes_per_token:.3f}"],
        "naive_consumer_tokens_per_s": naive["consumer_tokens_per_s"], "naive_producer_MBps": naive["producer_MBps"],
    }


def _drill(ctx: Context, m: Any, brokers: str, shape: Any, producer: dict[str, str], ids: Any) -> dict[str, Any]:
    if not ctx.var(StreamVariables).drill:
        return {"durability_why": "the durability drill kills a broker: run it with --option stream.drill=true"}
    k = _kafka(ctx)
    if k.mode != "baremetal":
        return {"durability_why": "the drill kills a bare-metal broker over SSH; Strimzi's pods are not reached"}
    hosts = {n.node_id: n.host for n in k.nodes}

    def kill(node: int) -> None:
        ctx.must(hosts[node], f"systemctl kill --signal=SIGKILL {quote(UNIT)}", 60, "kill the broker")

    restarts = {host: _restarts(ctx, host) for host in hosts.values()}
    with _scratch(m, brokers, shape, "kiln-verify-durability") as name:
        d = m.durability(brokers, name, ids, shape, producer, kill)
        for node in hosts.values():  # the unit restarts on failure; start it in case it did not
            ctx.run(node, f"systemctl start {quote(UNIT)}", 120)
        rejoined = _wait(lambda: m.in_sync(brokers, name), 180)
    if d.killed_node is None or d.kill_error or not d.leaders_during:
        why = d.kill_error or "its partitions never moved to another leader"
        raise CheckError(f"the drill proves nothing: no broker was lost during production ({why})")
    host = hosts[d.killed_node]
    bad = d.missing + d.repeated + (0 if d.in_order else 1)
    return {"durability": bad, "durability_details": [
        f"killed node {d.killed_node} ({host}) after {d.acked // 3} of {d.acked} acknowledgements; read back "
        f"{d.read}: {d.missing} missing, {d.repeated} repeated, {'in order' if d.in_order else 'OUT OF ORDER'}",
        f"partitions led per node: before {d.leaders_before}, with {host} down {d.leaders_during}, after "
        f"{d.leaders_after}; {host}'s unit restarts {restarts[host]} → {_restarts(ctx, host)}; "
        + ("every replica back in sync" if rejoined else "NOT every replica back in sync within 180 s")]}


def _restarts(ctx: Context, host: str) -> str:
    """How often systemd restarted the kafka unit on the host (NRestarts): the drill's kill shows there."""
    r = ctx.run(host, f"systemctl show --property=NRestarts --value {quote(UNIT)}", 60)
    return r.stdout.strip() if r.ok else "?"


def _wait(ready: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return True
        time.sleep(2)
    return False


def _retention(brokers: str, topic: KafkaTopicPlan) -> dict[str, Any]:
    """The running topic's configs against the plan: retention at least the resume's need and as planned, and the
    durability settings as planned."""
    from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": brokers})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic.name)
    try:
        found = {k: c.value for k, c in admin.describe_configs([res])[res].result(timeout=30).items()}
    except Exception as exc:  # any broker error is the row's finding
        return {"retention": 1, "retention_details": [f"topic {topic.name}: cannot read its configs: {exc}"]}
    planned = {s.name: s.value for s in topic.settings}
    details = [f"{name}: planned {want}, found {found.get(name)}" for name, want in planned.items()
               if found.get(name) != want]
    need_ms = topic.retention_needed_hours * 3_600_000
    if int(found.get("retention.ms") or 0) < need_ms:
        details.append(f"retention.ms {found.get('retention.ms')} < {need_ms:.0f}: a resume from the oldest kept "
                       "checkpoint would find its offsets deleted (docs/runbooks/kafka-retention.md)")
    return {"retention": len(details), "retention_details": details or [
        f"note: retention.ms {found.get('retention.ms')} ≥ {need_ms:.0f} needed; min.insync.replicas "
        f"{found.get('min.insync.replicas')}, unclean.leader.election.enable "
        f"{found.get('unclean.leader.election.enable')}"]}


class RetentionCheck(StreamCheck):
    """stream.retention: a read of the running topic's configs, judged against the plan (no measurement pass)."""

    id = "stream.retention"
    figure = "retention"
    kind = "conformance"

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        figures = _retention(bootstrap(ctx), _topic(ctx, target))
        return Sample(float(figures["retention"]), details=list(figures["retention_details"]))


def _row(check: str, figure: str) -> type[StreamCheck]:
    cls = type(check.replace(".", "_"), (StreamCheck,), {"id": check, "figure": figure})
    return register(cls)  # type: ignore[return-value]


for _check, _figure in (("stream.consumer", "consumer"), ("stream.consumer_vs_naive", "consumer_vs_naive"),
                        ("stream.producer", "producer"), ("stream.bytes_per_token", "bytes_per_token"),
                        ("stream.latency", "latency"), ("stream.resume", "resume"),
                        ("stream.durability", "durability")):
    _row(_check, _figure)
register(RetentionCheck)
