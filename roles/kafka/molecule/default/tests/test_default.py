"""Testinfra checks for the kafka role; `host` is the converged container (a combined broker and controller).

Kafka's own tools run in the container with the role's tool logging (warnings to stderr), as the role runs them.
"""

from __future__ import annotations

import os
import pathlib
import re

import pytest

VERSION = "4.3.1"
CLUSTER_ID = "a2lsbi1tb2xlY3VsZS1rZg"  # molecule.yml kafka_cluster_id
TOPIC = "pretrain-tokens"
TOPIC_CONFIGS = {"compression.type": "producer", "max.message.bytes": "1048588", "retention.ms": "86400000"}
PORTS = {"client": 9092, "controller": 9093, "exporter": 9404}
JAVA = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
TOOL = f"{JAVA} -Xmx256m -Dlog4j2.configurationFile=/etc/kafka/tools-log4j2.properties -cp '/opt/kafka/current/libs/*'"


def _ephemeral() -> pathlib.Path:
    return pathlib.Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])


@pytest.fixture(scope="module")
def addr(host) -> str:
    """The instance's address: molecule.yml makes it kafka_listen_address."""
    out = host.check_output("ip -4 -o route get 1.1.1.1")
    return out.split(" src ", 1)[1].split()[0]


def _listening(host) -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket, as `ss` prints them (IPv4-mapped addresses unwrapped)."""
    out = []
    for line in host.check_output("ss -Hltn").splitlines():
        local = line.split()[3]
        address, port = local.rsplit(":", 1)
        out.append((address.strip("[]").removeprefix("::ffff:"), int(port)))
    return out


def test_systemd_is_running(host):
    # The base image boots to `running`; a role that breaks a unit shows here.
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


def test_service_active_enabled_and_hardened(host):
    svc = host.service("kafka")
    assert svc.is_enabled
    assert svc.is_running
    props = dict(
        line.split("=", 1)
        for line in host.check_output(
            "systemctl show kafka -p User -p NoNewPrivileges -p ProtectSystem -p PrivateTmp -p MainPID -p LimitNOFILE"
            " -p Restart -p ReadWritePaths"
        ).splitlines()
    )
    assert props["User"] == "kafka"
    assert (props["NoNewPrivileges"], props["ProtectSystem"], props["PrivateTmp"]) == ("yes", "strict", "yes")
    assert props["Restart"] == "on-failure"
    assert props["ReadWritePaths"] == "/var/lib/kafka/data"
    assert host.check_output(f"ps -o user= -p {props['MainPID']}").strip() == "kafka"
    cmdline = host.check_output(f"tr '\\0' ' ' < /proc/{props['MainPID']}/cmdline")
    assert "-Xms384m -Xmx384m" in cmdline  # kafka_heap_GB 0.375
    assert "-javaagent:/opt/kafka/jmx_exporter/jmx_prometheus_javaagent.jar=" in cmdline


def test_listeners_bind_the_listen_address_only(host, addr):
    sockets = _listening(host)
    for name, port in PORTS.items():
        bound = {a for a, p in sockets if p == port}
        assert bound == {addr}, f"{name} port {port} is bound to {bound}, not only {addr}"
    props = host.file("/etc/kafka/server.properties").content_string
    assert f"listeners=PLAINTEXT://{addr}:9092,CONTROLLER://{addr}:9093\n" in props
    assert f"advertised.listeners=PLAINTEXT://{addr}:9092\n" in props
    assert f"controller.quorum.voters=1@{addr}:9093\n" in props
    assert "0.0.0.0" not in props


def test_broker_settings_follow_the_role_keys_sorted(host):
    props = host.file("/etc/kafka/server.properties").content_string
    plan = props.split("# The plan's broker settings (kafka_broker_settings), sorted.\n", 1)[1].splitlines()
    assert plan == sorted(plan) and "unclean.leader.election.enable=false" in plan
    assert "log.retention.check.interval.ms" not in props  # the older plan's key is gone


def test_release_is_verified_and_current(host):
    assert host.file("/opt/kafka/current").linked_to == f"/opt/kafka/{VERSION}"
    assert host.run(f"cd /opt/kafka/{VERSION} && sha256sum --quiet --strict -c SHA256SUMS").rc == 0
    assert host.file(f"/opt/kafka/{VERSION}/.kiln-installed").content_string.startswith("jars sha256:")
    assert not host.file(f"/opt/kafka/.staging/{VERSION}").exists
    assert host.check_output("sha256sum /opt/kafka/jmx_exporter/jmx_prometheus_javaagent.jar").split()[0] == (
        "7d61f737fd661610ccc14aea79764faa1ea94a340cbc8f0029b3d2edea3d80c1"
    )


def test_data_directory_is_formatted_for_this_cluster(host):
    meta = host.file("/var/lib/kafka/data/meta.properties")
    assert meta.user == "kafka"
    assert f"cluster.id={CLUSTER_ID}\n" in meta.content_string
    assert "node.id=1\n" in meta.content_string


def test_topic_exists_with_its_partitions_and_configs(host, addr):
    described = host.check_output(
        f"{TOOL} org.apache.kafka.tools.TopicCommand --bootstrap-server {addr}:9092 --describe --topic {TOPIC}"
    )
    assert re.search(rf"^Topic: {TOPIC}\tTopicId: \S+\tPartitionCount: 6\tReplicationFactor: 1\t", described, re.M)
    configs = host.check_output(
        f"{TOOL} kafka.admin.ConfigCommand --bootstrap-server {addr}:9092 --describe --entity-type topics"
        f" --entity-name {TOPIC}"
    )
    found = dict(re.findall(r"(?m)^  (\S+?)=(.*?) sensitive=", configs))
    assert found == TOPIC_CONFIGS


def test_no_partition_is_under_replicated(host, addr):
    out = host.check_output(
        f"{TOOL} org.apache.kafka.tools.TopicCommand --bootstrap-server {addr}:9092 --describe"
        " --under-replicated-partitions"
    )
    assert out.strip() == ""


def test_jmx_exporter_serves_kafka_metrics(host, addr):
    url = f"http://{addr}:9404/metrics"
    script = f"import urllib.request; print(urllib.request.urlopen('{url}', timeout=20).read().decode())"
    metrics = host.check_output(f'python3 -c "{script}"')
    names = {line.split("{")[0].split()[0] for line in metrics.splitlines() if line.startswith("kafka_")}
    # The gauges kiln's alerts read (kiln/plan/monitoring.py, _kafka_rules).
    assert "kafka_server_replicamanager_underminisrpartitioncount" in names
    assert "kafka_controller_kafkacontroller_activecontrollercount" in names
    assert "kafka_controller_kafkacontroller_offlinepartitionscount" in names
    assert "kafka_log_log_logstartoffset" in names


def test_format_guard_left_foreign_directories_alone(host):
    assert host.file("/srv/kafka-foreign/stray/data/lost-segment.log").content_string == "not Kafka's\n"
    meta = host.file("/srv/kafka-foreign/other-cluster/data/meta.properties").content_string
    assert "cluster.id=b3RoZXItY2x1c3Rlci1pZA" in meta
    assert not host.file("/srv/kafka-foreign/stray/data/meta.properties").exists


def test_converges_refused_and_restarted_as_planned():
    log = (_ephemeral() / "ansible.log").read_text(errors="replace")
    assert "kafka_tarball_sha512 is unset" in log
    assert "It was NOT formatted and nothing was changed" in log
    # The older plan's node was running: the real plan restarted it through the rolling restart and updated the
    # topic's retention.
    assert "Restart Kafka on the node" in log
    assert "Wait until no partition is under-replicated" in log
    assert re.search(r"changed: .*pretrain-tokens: retention\.ms=86400000", log), "the topic config was not updated"
    # The older plan installed from the release tarball (converge.yml checks its marker); the real plan's jars
    # replaced it (test_release_is_verified_and_current reads the marker now).
    assert "Check the release came from the tarball, verified by its SHA-512" in log
