"""The token stream's plan: a KRaft Kafka cluster sized by replication, retention and replay, not throughput.

Pure: the spec's `pipeline.kafka` in, a KafkaPlan and SpecIssues out. Every figure comes from
kiln/knowledge/kafka.yaml with its source; docs/kafka.md walks through the model with a worked example.

- tokens/s per node: given, or GPUs × peak BF16 FLOPS × MFU ÷ (6 × parameters)
- bytes per token: the dtype's bytes ÷ the codec's measured ratio on token ids
- ingress: the job's consumption × the replay headroom (a producer or a restarted job catches up at 2×)
- retention: at least the oldest kept checkpoint's age plus the restart time (a resume must find its offsets)
- brokers: the most of replication, retained bytes, ingress and partitions per broker
- partitions: a highly composite multiple of the consumer count, else lcm(consumers, 12) (a resized job still
  splits evenly)
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import math
from typing import Any

from kiln import knowledge
from kiln.plan.groups import KAFKA
from kiln.plan.model import AcceptanceTarget, KafkaNode, KafkaPlan, KafkaSetting, KafkaTopicPlan
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, ComputePool, Kafka, KafkaConsumers, KafkaTopicSpec
from kiln.spec.naming import kafka_families

DTYPE_BYTES = {"uint16": 2, "uint32": 4}
_PATH = "pipeline.kafka"
#: The Strimzi Kafka cluster's name and its node pools: they name the pods and the broker volumes' claims
#: (data-<volume id>-<cluster>-<pool>-<node id>), which the renderer creates and the alerts select.
CLUSTER = "kiln-tokens"
BROKER_POOL = "brokers"
CONTROLLER_POOL = "controllers"


def build_kafka(spec: ClusterSpec) -> tuple[KafkaPlan | None, list[SpecIssue]]:
    """The Kafka plan of a spec with `pipeline.kafka`, else None; errors stop the plan, warnings ride along."""
    kc = spec.pipeline.kafka if spec.pipeline is not None else None
    if kc is None:
        return None, []
    issues = list(_version_issues(kc))
    if kc.combined and kc.mode != "baremetal":
        issues.append(SpecIssue(f"{_PATH}.combined", True, "Strimzi runs the controllers in their own node pool",
                                "set combined only with mode: baremetal"))
    topics: list[KafkaTopicPlan] = []
    for i, t in enumerate(kc.topics):
        topic, found = _topic(spec, i, t)
        issues += found
        if topic is not None:
            topics.append(topic)
    if kc.mode == "baremetal" and kc.brokers == "auto" and topics:
        issues.append(SpecIssue(f"{_PATH}.brokers", "auto", "bare-metal brokers are hosts the plan cannot invent",
                                f"give their number: at least {max(_brokers_by(kc, topics).values())} for this "
                                "stream's replication, retention, ingress and partitions"))
    if any(i.severity == "error" for i in issues):
        return None, issues
    brokers_by = _brokers_by(kc, topics)
    brokers, found = _count(f"{_PATH}.brokers", kc.brokers, brokers_by)
    controllers = _controllers(kc)
    issues += found + _controller_issues(controllers)
    plan = KafkaPlan(
        mode=kc.mode, version=kc.version, strimzi_release=knowledge.load().kafka.strimzi.release,
        namespace=kc.namespace, auth=kc.auth, controllers=controllers, brokers=brokers, brokers_by=brokers_by,
        storage_GB_per_broker=kc.storage_GB_per_broker,
        broker_heap_GB=kc.heap_GB or knowledge.load().kafka.broker_heap_GB.value,
        runway_min_s=knowledge.load().kafka.runway_min_s.value,
        latency_p99_ms=knowledge.load().kafka.latency_p99_ms.value,
        topics=tuple(topics),
        producer=producer_settings(topics), consumer=consumer_settings(topics),
        broker=broker_settings(topics, kc.heap_GB),
        cluster_id=cluster_id(spec.name) if kc.mode == "baremetal" else "",
        nodes=node_layout(spec, kc),
    )
    return plan, issues


BROKER_ENVIRONMENT = frozenset({"KAFKA_HEAP_OPTS"})  # environment, not broker configuration
#: The JMX exporter rules the alerts need (kiln/plan/monitoring.py, _kafka_rules): the generic gauge rules of
#: strimzi-kafka-operator packaging/examples/metrics/kafka-metrics.yaml ("Generic gauges with 0-2 key/value pairs"),
#: verbatim and in its order. They name kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount
#: kafka_server_replicamanager_underminisrpartitioncount, kafka.controller:type=KafkaController,name=
#: OfflinePartitionsCount and ActiveControllerCount kafka_controller_kafkacontroller_*, and
#: kafka.log:type=Log,name=LogStartOffset,topic=*,partition=* kafka_log_log_logstartoffset{topic,partition}.
JMX_RULES: dict[str, Any] = {"lowercaseOutputName": True, "rules": [
    {"pattern": r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Value", "name": "kafka_$1_$2_$3",
     "type": "GAUGE", "labels": {"$4": "$5", "$6": "$7"}},
    {"pattern": r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+)><>Value", "name": "kafka_$1_$2_$3", "type": "GAUGE",
     "labels": {"$4": "$5"}},
    {"pattern": r"kafka.(\w+)<type=(.+), name=(.+)><>Value", "name": "kafka_$1_$2_$3", "type": "GAUGE"},
]}


def cluster_id(stack: str) -> str:
    """The KRaft cluster id of a stack's bare-metal cluster: 16 bytes as Kafka's Uuid prints them (22 characters of
    URL-safe base64, no padding; org.apache.kafka.common.Uuid#toString), derived from the stack's name so every node
    and every later converge formats with the same id."""
    raw = hashlib.sha256(f"kiln-kafka:{stack}".encode()).digest()[:16]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def node_layout(spec: ClusterSpec, kc: Kafka) -> tuple[KafkaNode, ...]:
    """The bare-metal nodes, named by kiln.spec.naming.kafka_families. Separate (the default): dedicated controllers
    with node ids 1..C, then the brokers. Combined: the first C nodes run a controller too (a node past the
    brokers runs only a controller)."""
    families = kafka_families(spec)
    if not families:
        return ()
    brokers = kc.brokers if isinstance(kc.brokers, int) else 0
    if kc.combined:
        return tuple(KafkaNode(host=name, node_id=i, roles=(("broker",) if i <= brokers else ())
                               + (("controller",) if i <= _controllers(kc) else ()))
                     for i, name in enumerate(families[0].names(), start=1))
    ctl, brk = families
    return (*(KafkaNode(host=name, node_id=i, roles=("controller",)) for i, name in enumerate(ctl.names(), start=1)),
            *(KafkaNode(host=name, node_id=ctl.count + i, roles=("broker",))
              for i, name in enumerate(brk.names(), start=1)))


def _controllers(kc: Kafka) -> int:
    return knowledge.load().kafka.controllers.value if kc.controllers == "auto" else kc.controllers


def kafka_nodes(spec: ClusterSpec) -> tuple[KafkaNode, ...]:
    """The bare-metal nodes of the spec's token stream (none with Strimzi, none without a stream): named from the
    spec alone, so the topology need not size the whole stream (build_kafka reports its errors)."""
    kc = spec.pipeline.kafka if spec.pipeline is not None else None
    return node_layout(spec, kc) if kc is not None else ()


def _version_issues(kc: Kafka) -> list[SpecIssue]:
    k = knowledge.load().kafka
    if kc.mode == "strimzi" and kc.version not in k.strimzi.kafka_versions:
        return [SpecIssue(f"{_PATH}.version", kc.version,
                          f"Strimzi {k.strimzi.release} does not run Kafka {kc.version}",
                          f"use one of {', '.join(k.strimzi.kafka_versions)} ({k.strimzi.source.split(',')[0]})")]
    if kc.mode == "baremetal" and kc.version not in k.baremetal_versions.value:
        return [SpecIssue(f"{_PATH}.version", kc.version, "not a KRaft release the kafka role installs",
                          f"use one of {', '.join(k.baremetal_versions.value)}")]
    return []


def _controller_issues(controllers: int) -> list[SpecIssue]:
    if controllers % 2 == 0:
        return [SpecIssue(f"{_PATH}.controllers", controllers,
                          f"an even quorum survives no more failures than {controllers - 1} controllers do",
                          f"use {controllers - 1} or {controllers + 1}", severity="warning")]
    return []


def _count(path: str, given: int | str, needs: dict[str, int]) -> tuple[int, list[SpecIssue]]:
    """The planned count: the largest need when auto; a given count below it is an error naming the need."""
    need = max(needs.values())
    if given == "auto":
        return need, []
    assert isinstance(given, int)
    if given < need:
        why = ", ".join(f"{k} {v}" for k, v in needs.items())
        return given, [SpecIssue(path, given, f"too few: the plan needs {need} ({why})", f"set {need} or auto")]
    return given, []


def _pool(spec: ClusterSpec, path: str, name: str) -> tuple[ComputePool | None, list[SpecIssue]]:
    pools = {p.name: p for p in spec.compute.pools}
    if name in pools:
        return pools[name], []
    return None, [SpecIssue(path, name, "no such compute pool", f"use one of {', '.join(pools)}")]


def _topic(spec: ClusterSpec, i: int, t: KafkaTopicSpec) -> tuple[KafkaTopicPlan | None, list[SpecIssue]]:
    path = f"{_PATH}.topics[{i}]"
    pool, issues = _pool(spec, f"{path}.consumers.pool", t.consumers.pool)
    if pool is None:
        return None, issues
    ranks = t.consumers.ranks_per_node or (pool.gpu.count if pool.gpu else 0)
    if not ranks:
        return None, [SpecIssue(f"{path}.consumers.ranks_per_node", None, f"pool {pool.name} has no GPUs",
                                "give ranks_per_node: the consuming processes per node")]
    rate, how, found = _tokens_per_s(f"{path}.consumers", t.consumers, pool, spec.workload.model_params_B)
    issues += found + _replica_issues(path, t)
    consumers = pool.nodes * ranks
    partitions, found = _partitions(f"{path}.partitions", t.partitions, consumers)
    interval = t.consumers.checkpoint_interval_min or spec.workload.checkpoint.interval_min
    retention, needed, found2 = _retention(f"{path}.retention_hours", t, interval)
    issues += found + found2
    if rate is None or any(x.severity == "error" for x in issues):
        return None, issues
    k = knowledge.load().kafka
    per_token = DTYPE_BYTES[t.dtype] / (t.codec_ratio or k.codec_ratio[t.dtype][t.compression].value)
    consume = pool.nodes * rate * per_token / 1e6
    ingress = consume * k.replay_headroom.value
    message = t.tokens_per_message * DTYPE_BYTES[t.dtype]
    topic = KafkaTopicPlan(
        name=t.name, pool=pool.name, nodes=pool.nodes, ranks_per_node=ranks, consumers=consumers,
        partitions=partitions, replication=t.replication, min_insync_replicas=t.min_insync_replicas,
        compression=t.compression, dtype=t.dtype, tokens_per_message=t.tokens_per_message, message_bytes=message,
        bytes_per_token=round(per_token, 4), tokens_per_s_node=round(rate, 1), tokens_per_s_how=how,
        consume_MBps=round(consume, 6), ingress_MBps=round(ingress, 6), retention_hours=retention,
        retention_needed_hours=round(needed, 3),
        retained_GB=round(ingress * retention * 3600 * t.replication / 1000, 3),
        settings=topic_settings(t, message, retention),
    )
    return topic, issues


def _tokens_per_s(
    path: str, c: KafkaConsumers, pool: ComputePool, workload_params_B: float
) -> tuple[float | None, str, list[SpecIssue]]:
    """Tokens one node trains on per second: given, or derived from the model size (the consumers', else the
    workload's), the GPUs and an MFU."""
    if c.tokens_per_s_per_node is not None:
        return c.tokens_per_s_per_node, "given (consumers.tokens_per_s_per_node)", []
    k = knowledge.load().kafka
    peak = k.gpu_peak_bf16_tflops.get(pool.gpu.model) if pool.gpu else None
    params = c.model_params_B or workload_params_B
    if peak is None or pool.gpu is None:
        known = ", ".join(k.gpu_peak_bf16_tflops)
        return None, "", [SpecIssue(f"{path}.tokens_per_s_per_node", None, "the job's token rate is unknown",
                                    "give tokens_per_s_per_node, or consume on a pool whose GPU model has a peak "
                                    f"in kiln/knowledge/kafka.yaml ({known})")]
    mfu = c.mfu if c.mfu is not None else k.mfu.value
    flops = pool.gpu.count * peak.value * 1e12 * mfu
    rate = flops / (k.flops_per_token_per_param.value * params * 1e9)
    how = (f"{pool.gpu.count} × {pool.gpu.model} {peak.value:g} TFLOPS × MFU {mfu:g} ÷ "
           f"({k.flops_per_token_per_param.value:g} × {params:g} B parameters)")
    return rate, how, []


def _replica_issues(path: str, t: KafkaTopicSpec) -> list[SpecIssue]:
    if t.min_insync_replicas > t.replication:
        return [SpecIssue(f"{path}.min_insync_replicas", t.min_insync_replicas,
                          f"more than the {t.replication} replicas: no write could ever be acknowledged",
                          f"set at most {t.replication} (usually replication - 1)")]
    if t.replication > 1 and t.min_insync_replicas == t.replication:
        return [SpecIssue(f"{path}.min_insync_replicas", t.min_insync_replicas,
                          "one broker down stops every acks=all producer",
                          f"set {t.replication - 1}", severity="warning")]
    if t.replication == 1:
        return [SpecIssue(f"{path}.replication", 1, "one broker's disk loses the stream",
                          "set 3 with min_insync_replicas 2", severity="warning")]
    return []


def _partitions(path: str, given: int | str, consumers: int) -> tuple[int, list[SpecIssue]]:
    """The smallest highly composite multiple of the consumers when it is below lcm(consumers, 12), else that
    lcm: divisible by the consumers and by 2, 3, 4, 6 and 12. A given count must be a multiple of the consumers."""
    hcn = knowledge.load().kafka.highly_composite.value
    bound = math.lcm(consumers, 12)
    auto = min((h for h in hcn if h >= consumers and h % consumers == 0), default=bound)
    auto = min(auto, bound)
    if given == "auto":
        return auto, []
    assert isinstance(given, int)
    if given % consumers:
        return given, [SpecIssue(path, given, f"not a multiple of the {consumers} consumers: ranks would read "
                                 "unequal shares", f"use {auto} (auto) or another multiple of {consumers}")]
    return given, []


def _retention(path: str, t: KafkaTopicSpec, interval_min: float) -> tuple[float, float, list[SpecIssue]]:
    """Planned retention and the least a resume from the oldest kept checkpoint needs, in hours."""
    c = t.consumers
    needed = (c.checkpoints_kept * interval_min + c.restart_min) / 60
    if t.retention_hours == "auto":
        safety = knowledge.load().kafka.retention_safety.value
        return float(max(24, math.ceil(needed * safety))), needed, []
    assert isinstance(t.retention_hours, float | int)
    if t.retention_hours < needed:
        return float(t.retention_hours), needed, [SpecIssue(
            path, t.retention_hours,
            f"shorter than the oldest kept checkpoint plus the restart ({c.checkpoints_kept} × "
            f"{interval_min:g} min + {c.restart_min:g} min = {needed:.2f} h): a resume would find its "
            "offsets deleted", f"set at least {math.ceil(needed)} or auto")]
    return float(t.retention_hours), needed, []


def _brokers_by(kc: Kafka, topics: list[KafkaTopicPlan]) -> dict[str, int]:
    k = knowledge.load().kafka
    retained = sum(t.retained_GB for t in topics)
    written = sum(t.ingress_MBps * t.replication for t in topics)
    replicas = sum(t.partitions * t.replication for t in topics)
    return {
        "replication": max(t.replication for t in topics),
        "retention": math.ceil(retained / (kc.storage_GB_per_broker * k.broker_disk_fill.value)),
        "ingress": math.ceil(written / k.broker_write_MBps.value),
        "partitions": math.ceil(replicas / k.partitions_per_broker_max.value),
    }


def _s(name: str, value: object, reason: str, source: str) -> KafkaSetting:
    return KafkaSetting(name=name, value=str(value).lower() if isinstance(value, bool) else str(value),
                        reason=reason, source=source)


PRODUCER_DOCS = "Apache Kafka documentation, 3.3 Producer Configs"
CONSUMER_DOCS = "Apache Kafka documentation, 3.4 Consumer Configs"
TOPIC_DOCS = "Apache Kafka documentation, 3.2 Topic-Level Configs"
BROKER_DOCS = "Apache Kafka documentation, 3.1 Broker Configs"


#: Kafka's default message.max.bytes / max.message.bytes (Apache Kafka documentation, 3.1 Broker Configs): never
#: planned below it.
KAFKA_DEFAULT_MAX_MESSAGE = 1048588


def message_limit(message: int) -> int:
    """The largest record batch a topic, broker or fetch must take for a message of `message` payload bytes."""
    return max(KAFKA_DEFAULT_MAX_MESSAGE, message + knowledge.load().kafka.max_message_overhead_bytes.value)


def max_message_bytes(topics: list[KafkaTopicPlan]) -> int:
    return max(message_limit(t.message_bytes) for t in topics)


def producer_settings(topics: list[KafkaTopicPlan]) -> tuple[KafkaSetting, ...]:
    largest = max(t.message_bytes for t in topics)
    return (
        _s("acks", "all", "an acknowledged message is on min.insync.replicas brokers", PRODUCER_DOCS + ", acks"),
        _s("enable.idempotence", True, "a retried send is written once: no duplicate token message",
           PRODUCER_DOCS + ", enable.idempotence (KIP-98)"),
        _s("compression.type", topics[0].compression, "the topic's planned codec (bytes per token in the plan)",
           "kiln/knowledge/kafka.yaml codec_ratio"),
        _s("linger.ms", 20, "wait up to 20 ms to fill a batch: the stream is read ahead, latency is not the goal",
           PRODUCER_DOCS + ", linger.ms"),
        _s("batch.size", max(1_000_000, 8 * largest), "at least eight messages per batch, for the codec",
           PRODUCER_DOCS + ", batch.size"),
    )


def consumer_settings(topics: list[KafkaTopicPlan]) -> tuple[KafkaSetting, ...]:
    return (
        _s("enable.auto.commit", False, "positions live in the model checkpoint; commits only report lag",
           CONSUMER_DOCS + ", enable.auto.commit; Mosaic StreamingDataset saves the stream state with the model"),
        _s("fetch.min.bytes", 1_048_576, "fetch a MiB at a time: fewer, larger fetches feed a batch decoder",
           CONSUMER_DOCS + ", fetch.min.bytes"),
        _s("fetch.max.wait.ms", 100, "bound the wait when less than fetch.min.bytes is ready",
           CONSUMER_DOCS + ", fetch.max.wait.ms"),
        _s("max.partition.fetch.bytes", max_message_bytes(topics), "at least one whole message per partition",
           CONSUMER_DOCS + ", max.partition.fetch.bytes"),
    )


def topic_settings(t: KafkaTopicSpec, message: int, retention_h: float) -> tuple[KafkaSetting, ...]:
    return (
        _s("min.insync.replicas", t.min_insync_replicas, "replicas an acks=all write must reach",
           TOPIC_DOCS + ", min.insync.replicas"),
        _s("unclean.leader.election.enable", False, "an out-of-sync replica never becomes leader: no lost "
           "acknowledged message", TOPIC_DOCS + ", unclean.leader.election.enable"),
        _s("retention.ms", int(retention_h * 3_600_000), "the planned retention (resume from the oldest checkpoint)",
           TOPIC_DOCS + ", retention.ms"),
        _s("max.message.bytes", message_limit(message), "one token message and its batch overhead",
           TOPIC_DOCS + ", max.message.bytes"),
        _s("compression.type", "producer", "keep the producer's codec: the broker never recompresses",
           TOPIC_DOCS + ", compression.type"),
        _s("cleanup.policy", "delete", "a stream, not a table: old segments are deleted after retention",
           TOPIC_DOCS + ", cleanup.policy"),
    )


def jvm_size(gb: float) -> str:
    """A heap size as the JVM's -Xmx takes it: whole gigabytes as g, else whole megabytes as m (-Xmx takes no
    fraction)."""
    return f"{gb:g}g" if float(gb).is_integer() else f"{round(gb * 1024)}m"


def broker_settings(topics: list[KafkaTopicPlan], heap_GB: float | None = None) -> tuple[KafkaSetting, ...]:
    k = knowledge.load().kafka
    size = jvm_size(heap_GB or k.broker_heap_GB.value)
    reason = k.broker_heap_GB.reason if heap_GB is None else "pipeline.kafka.heap_GB"
    return (
        _s("KAFKA_HEAP_OPTS", f"-Xms{size} -Xmx{size}", reason, k.broker_heap_GB.source),
        _s("auto.create.topics.enable", False, "every topic is planned; a typo must fail, not create a topic",
           BROKER_DOCS + ", auto.create.topics.enable"),
        _s("default.replication.factor", max(t.replication for t in topics), "internal topics as durable as "
           "the token topics", BROKER_DOCS + ", default.replication.factor"),
        _s("unclean.leader.election.enable", False, "no acknowledged message lost to an election",
           BROKER_DOCS + ", unclean.leader.election.enable"),
        _s("message.max.bytes", max_message_bytes(topics), "the largest planned message and its overhead",
           BROKER_DOCS + ", message.max.bytes"),
    )


#: Bytes per token on the wire above the plan's that still pass with a warning: the retained bytes the plan sizes
#: the brokers for fill at most broker_disk_fill (0.7) of their disks, so 10% more still fits with room to spare.
BYTES_TOLERANCE = 1.1
#: How many times faster than the naive loop, and than the plan's per-node need, one kiln consumer process must read.
CONSUMER_MARGIN = 10.0


def _more(spec: ClusterSpec, env: tuple[tuple[str, str], ...], group: str | None, check: str, metric: str, unit: str,
          expected: float, why: str) -> AcceptanceTarget:
    """A higher-is-better row (warn and fail at the stack's fractions; a ratio fails below itself)."""
    a, ratio = spec.acceptance, unit == "ratio"
    return AcceptanceTarget(check=check, metric=metric, unit=unit, expected=round(expected, 4),
                            warn=expected if ratio else round(expected * a.warn_fraction, 4),
                            fail=expected if ratio else round(expected * a.fail_fraction, 4),
                            why=why, scope="aggregate", group=group, env=env)


def _most(env: tuple[tuple[str, str], ...], group: str | None, check: str, metric: str, unit: str, limit: float,
          why: str, fail: float | None = None) -> AcceptanceTarget:
    """A lower-is-better row that warns above its limit and fails above `fail` (default the limit)."""
    return AcceptanceTarget(check=check, metric=metric, unit=unit, expected=round(limit, 4), warn=round(limit, 4),
                            fail=round(limit if fail is None else fail, 4), why=why, scope="aggregate",
                            higher_is_better=False, group=group, env=env)


def kafka_targets(spec: ClusterSpec, k: KafkaPlan | None) -> list[AcceptanceTarget]:
    """The token stream's acceptance targets, per topic (its name in env KILN_STREAM_TOPIC): kiln/verify/checks/
    stream.py measures each in one pass on the running brokers, the naive loop beside it."""
    if k is None:
        return []
    g = KAFKA if k.mode == "baremetal" else None
    out: list[AcceptanceTarget] = []
    for t in k.topics:
        env = (("KILN_STREAM_TOPIC", t.name),)
        rows = [
            _more(spec, env, g, "stream.consumer", "tokens_per_s", "tokens/s", CONSUMER_MARGIN * t.tokens_per_s_node,
                  f"one kiln consumer process reads ≥ {CONSUMER_MARGIN:g}× a node's need "
                  f"({t.tokens_per_s_node:.0f} tokens/s)"),
            _more(spec, env, g, "stream.consumer_vs_naive", "speedup", "ratio", CONSUMER_MARGIN,
                  f"≥ {CONSUMER_MARGIN:g}× the naive loop (kafka-python, JSON, gzip) in the same pass"),
            _more(spec, env, g, "stream.producer", "wire_MBps", "MB/s", t.ingress_MBps,
                  f"the producer sends at least the planned ingress ({t.compression})"),
            _most(env, g, "stream.bytes_per_token", "bytes_per_token", "B", t.bytes_per_token,
                  f"bytes on the wire per token at most the plan's ({t.dtype}, {t.compression}); up to "
                  f"{BYTES_TOLERANCE - 1:.0%} more warns (the brokers' disk headroom), beyond fails",
                  fail=t.bytes_per_token * BYTES_TOLERANCE),
            _most(env, g, "stream.latency", "p99_ms", "ms", k.latency_p99_ms,
                  "end-to-end p99 latency, acks=all"),
            _most(env, g, "stream.resume", "mismatched_batches", "count", 0,
                  "a rank SIGKILLed twice and resumed from its checkpoints trains on the same sequence"),
            _most(env, g, "stream.durability", "lost_or_repeated", "count", 0,
                  f"a broker killed during production loses and repeats no acknowledged message "
                  f"(replication {t.replication}, min ISR {t.min_insync_replicas})"),
            _most(env, g, "stream.retention", "mismatches", "count", 0,
                  f"the running topic keeps {t.retention_hours:g} h ≥ the {t.retention_needed_hours:g} h "
                  "a resume from the oldest kept checkpoint needs, and the planned durability settings"),
        ]
        out += [dataclasses.replace(r, why=f"{r.why} (topic {t.name})") for r in rows]
    return out
