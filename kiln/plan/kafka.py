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

import math

from kiln import knowledge
from kiln.plan.model import KafkaPlan, KafkaSetting, KafkaTopicPlan
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, ComputePool, Kafka, KafkaConsumers, KafkaTopicSpec

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
    topics: list[KafkaTopicPlan] = []
    for i, t in enumerate(kc.topics):
        topic, found = _topic(spec, i, t)
        issues += found
        if topic is not None:
            topics.append(topic)
    if any(i.severity == "error" for i in issues):
        return None, issues
    brokers_by = _brokers_by(kc, topics)
    brokers, found = _count(f"{_PATH}.brokers", kc.brokers, brokers_by)
    controllers = knowledge.load().kafka.controllers.value if kc.controllers == "auto" else kc.controllers
    issues += found + _controller_issues(controllers)
    plan = KafkaPlan(
        mode=kc.mode, version=kc.version, strimzi_release=knowledge.load().kafka.strimzi.release,
        namespace=kc.namespace, auth=kc.auth, controllers=controllers, brokers=brokers, brokers_by=brokers_by,
        storage_GB_per_broker=kc.storage_GB_per_broker, broker_heap_GB=knowledge.load().kafka.broker_heap_GB.value,
        runway_min_s=knowledge.load().kafka.runway_min_s.value,
        topics=tuple(topics),
        producer=producer_settings(topics), consumer=consumer_settings(topics), broker=broker_settings(topics),
    )
    return plan, issues


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
    per_token = DTYPE_BYTES[t.dtype] / k.codec_ratio[t.dtype][t.compression].value
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


def broker_settings(topics: list[KafkaTopicPlan]) -> tuple[KafkaSetting, ...]:
    k = knowledge.load().kafka
    heap = f"-Xms{k.broker_heap_GB.value:g}g -Xmx{k.broker_heap_GB.value:g}g"
    return (
        _s("KAFKA_HEAP_OPTS", heap, k.broker_heap_GB.reason, k.broker_heap_GB.source),
        _s("auto.create.topics.enable", False, "every topic is planned; a typo must fail, not create a topic",
           BROKER_DOCS + ", auto.create.topics.enable"),
        _s("default.replication.factor", max(t.replication for t in topics), "internal topics as durable as "
           "the token topics", BROKER_DOCS + ", default.replication.factor"),
        _s("unclean.leader.election.enable", False, "no acknowledged message lost to an election",
           BROKER_DOCS + ", unclean.leader.election.enable"),
        _s("message.max.bytes", max_message_bytes(topics), "the largest planned message and its overhead",
           BROKER_DOCS + ", message.max.bytes"),
    )
