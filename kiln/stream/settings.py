"""The plan's client settings as confluent-kafka (librdkafka) configuration."""

from __future__ import annotations

from kiln.plan.model import KafkaPlan

#: Java client names the plan uses whose librdkafka name differs (librdkafka CONFIGURATION.md).
LIBRDKAFKA_NAMES = {"fetch.max.wait.ms": "fetch.wait.max.ms"}


def client_config(plan: KafkaPlan, role: str, bootstrap: str) -> dict[str, str]:
    """librdkafka configuration of a producer or consumer: the plan's settings and the bootstrap servers."""
    settings = {"producer": plan.producer, "consumer": plan.consumer}[role]
    out = {"bootstrap.servers": bootstrap}
    out.update({LIBRDKAFKA_NAMES.get(s.name, s.name): s.value for s in settings})
    return out
