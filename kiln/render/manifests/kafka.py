"""TokenStream: the plan's Kafka token stream on Kubernetes, as Strimzi resources (API kafka.strimzi.io/v1).

    Namespace          the stream's namespace (pipeline.kafka.namespace)
    HelmRelease        the Strimzi Cluster Operator 1.2.0, watching that namespace only
    KafkaNodePool      `controllers` (KRaft controller role) and `brokers` (broker role), persistent claims
    Kafka              the cluster: version, listeners, the plan's broker configuration
    KafkaTopic         one per planned topic: partitions, replicas and the plan's topic configuration
    KafkaUser          one per consuming pool when the stream authenticates clients (SCRAM-SHA-512 or TLS)
    ConfigMap          the JMX Prometheus exporter's rules, which the Kafka resource's metricsConfig names
    Service            the brokers' and controllers' metrics port, and its ServiceMonitor (Prometheus scrapes it)
    PodMonitor         the training pods' stream gauges (lag, runway, kept checkpoints' offsets) the alerts read

Nothing without `pipeline.kafka` in `strimzi` mode. Every resource validates against the Strimzi 1.2.0 CRD
schemas (tests/infra/test_strimzi_schemas.py). The operator, not this builder, formats the KRaft storage.
"""

from __future__ import annotations

import yaml

from kiln.plan.kafka import BROKER_ENVIRONMENT, BROKER_POOL, CLUSTER, CONTROLLER_POOL, JMX_RULES, jvm_size
from kiln.plan.model import KafkaPlan, KafkaSetting, KafkaTopicPlan
from kiln.render.manifests.context import TOKEN_STREAM, Ctx, Obj, obj
from kiln.render.manifests.helm import helm_release, helm_source
from kiln.render.manifests.monitoring import HOST_RELABEL, MONITORING_API

STRIMZI_API = "kafka.strimzi.io/v1"
CLUSTER_LABEL = "strimzi.io/cluster"  # Strimzi: a node pool, topic or user names its Kafka cluster by this label
CONTROLLER_VOLUME_GB = 20  # KRaft metadata log: small (Strimzi examples use 100Gi with metadata shared)
LISTENER_PORT = 9092  # Strimzi's internal listener port (listeners[].port, 9092 is the examples' plain port)
#: Strimzi's Kafka pods serve the JMX exporter on port 9404, named tcp-prometheus (strimzi-kafka-operator
#: packaging/examples/metrics/prometheus-install/pod-monitors/kafka-resources-metrics.yaml scrapes that port), and
#: carry strimzi.io/name=<cluster>-kafka whatever their node pool (the same examples' dashboards select on it).
METRICS_PORT = {"name": "tcp-prometheus", "port": 9404}
METRICS = f"{CLUSTER}-metrics"  # the ConfigMap, the Service (the job label) and the ServiceMonitor
METRICS_KEY = "kafka-metrics-config.yml"
CONSUMERS = f"{CLUSTER}-consumers"  # the PodMonitor of the training pods that consume the stream
#: What a training pod that consumes the stream carries: this label, and a container port of this name serving
#: kiln.stream's registry (prometheus_client.start_http_server(port, registry=stream.registry), docs/kafka.md).
CONSUMER_LABEL = "kiln.io/token-stream"
CONSUMER_PORT = "kiln-stream"


def token_stream(c: Ctx) -> list[Obj]:
    """The Strimzi resources of the plan's token stream; nothing unless the stream runs on Kubernetes."""
    k = c.plan.kafka
    if k is None or k.mode != "strimzi":
        return []
    ns = k.namespace
    out: list[Obj] = [
        obj("v1", "Namespace", c.meta(TOKEN_STREAM, ns)),
        helm_source(c, TOKEN_STREAM, "strimzi_operator"),
        helm_release(c, TOKEN_STREAM, "strimzi_operator", {"watchNamespaces": []}, namespace=ns),
        _node_pool(c, k, name=CONTROLLER_POOL, role="controller", replicas=k.controllers,
                   size_GB=CONTROLLER_VOLUME_GB),
        _node_pool(c, k, name=BROKER_POOL, role="broker", replicas=k.brokers, size_GB=k.storage_GB_per_broker),
        _kafka(c, k),
        *_metrics(c, k),
    ]
    out += [_topic(c, k, t) for t in k.topics]
    if k.auth != "none":
        out += [_user(c, k, pool) for pool in sorted({t.pool for t in k.topics})]
    return out


def _node_pool(c: Ctx, k: KafkaPlan, *, name: str, role: str, replicas: int, size_GB: float) -> Obj:
    heap = jvm_size(k.broker_heap_GB)
    volume: Obj = {"id": 0, "type": "persistent-claim", "size": f"{size_GB:g}G", "deleteClaim": False,
                   "kraftMetadata": "shared"}
    spec: Obj = {"replicas": replicas, "roles": [role], "storage": {"type": "jbod", "volumes": [volume]}}
    if role == "broker":
        spec["jvmOptions"] = {"-Xms": heap, "-Xmx": heap}
    meta = c.meta(TOKEN_STREAM, name, k.namespace, labels={CLUSTER_LABEL: CLUSTER})
    return obj(STRIMZI_API, "KafkaNodePool", meta, spec=spec)


def _config(settings: tuple[KafkaSetting, ...]) -> Obj:
    """Kafka properties as Strimzi wants them: numbers and booleans typed, the rest strings."""
    out: Obj = {}
    for s in settings:
        if s.name in BROKER_ENVIRONMENT:
            continue
        out[s.name] = True if s.value == "true" else False if s.value == "false" else (
            int(s.value) if s.value.isdigit() else s.value)
    return out


def _kafka(c: Ctx, k: KafkaPlan) -> Obj:
    listener: Obj = {"name": "plain" if k.auth == "none" else "tls", "port": LISTENER_PORT, "type": "internal",
                     "tls": k.auth != "none"}
    if k.auth != "none":
        listener["authentication"] = {"type": k.auth}
    config = _config(k.broker)
    config["min.insync.replicas"] = min(t.min_insync_replicas for t in k.topics)
    metrics: Obj = {"type": "jmxPrometheusExporter",
                    "valueFrom": {"configMapKeyRef": {"name": METRICS, "key": METRICS_KEY}}}
    spec: Obj = {
        "kafka": {"version": k.version, "listeners": [listener], "config": config, "metricsConfig": metrics},
        "entityOperator": {"topicOperator": {}, "userOperator": {}},
    }
    return obj(STRIMZI_API, "Kafka", c.meta(TOKEN_STREAM, CLUSTER, k.namespace), spec=spec)


def _metrics(c: Ctx, k: KafkaPlan) -> list[Obj]:
    """The exporter's rules, and a Service on every Kafka pod's metrics port with the ServiceMonitor that has
    Prometheus scrape it (the node as `host`, as every kiln ServiceMonitor). Strimzi's own NetworkPolicy admits the
    metrics port once metricsConfig is set. A PodMonitor scrapes the consuming training pods' stream gauges."""
    pods = {CLUSTER_LABEL: CLUSTER, "strimzi.io/name": f"{CLUSTER}-kafka"}
    labels = {"app.kubernetes.io/name": METRICS}
    port = {**METRICS_PORT, "targetPort": METRICS_PORT["name"], "protocol": "TCP"}
    every = f"{c.plan.monitoring.scrape_interval_s}s"
    return [
        obj("v1", "ConfigMap", c.meta(TOKEN_STREAM, METRICS, k.namespace),
            data={METRICS_KEY: yaml.safe_dump(JMX_RULES, sort_keys=False, width=120)}),
        obj("v1", "Service", c.meta(TOKEN_STREAM, METRICS, k.namespace, labels=labels),
            spec={"clusterIP": "None", "selector": pods, "ports": [port]}),
        obj(MONITORING_API, "ServiceMonitor", c.meta(TOKEN_STREAM, METRICS, k.namespace), spec={
            "selector": {"matchLabels": labels},
            "endpoints": [{"port": METRICS_PORT["name"], "interval": every, "relabelings": [HOST_RELABEL]}]}),
        # The training jobs run in their own namespaces: every namespace's consuming pods, by label.
        obj(MONITORING_API, "PodMonitor", c.meta(TOKEN_STREAM, CONSUMERS, k.namespace), spec={
            "namespaceSelector": {"any": True},
            "selector": {"matchLabels": {CONSUMER_LABEL: CLUSTER}},
            "podMetricsEndpoints": [{"port": CONSUMER_PORT, "interval": every, "relabelings": [HOST_RELABEL]}]}),
    ]


def _topic(c: Ctx, k: KafkaPlan, t: KafkaTopicPlan) -> Obj:
    meta = c.meta(TOKEN_STREAM, t.name, k.namespace, labels={CLUSTER_LABEL: CLUSTER})
    spec: Obj = {"partitions": t.partitions, "replicas": t.replication, "config": _config(t.settings)}
    return obj(STRIMZI_API, "KafkaTopic", meta, spec=spec)


def _user(c: Ctx, k: KafkaPlan, pool: str) -> Obj:
    """The consuming pool's user: read and describe on its topics, its consumer group for lag reports."""
    topics = [t.name for t in k.topics if t.pool == pool]
    acls: list[Obj] = [{"resource": {"type": "topic", "name": t, "patternType": "literal"},
                        "operations": ["Read", "Describe"]} for t in topics]
    acls.append({"resource": {"type": "group", "name": f"kiln-{pool}", "patternType": "prefix"},
                 "operations": ["Read", "Describe"]})
    meta = c.meta(TOKEN_STREAM, f"kiln-{pool}", k.namespace, labels={CLUSTER_LABEL: CLUSTER})
    spec: Obj = {"authentication": {"type": k.auth}, "authorization": {"type": "simple", "acls": acls}}
    return obj(STRIMZI_API, "KafkaUser", meta, spec=spec)
