"""The TLS and SCRAM-SHA-512 configurations the role renders, checked by Kafka itself.

The scenario runs with kafka_auth none. Here the role's own templates (server.properties.j2, admin.properties.j2) are
rendered with Ansible's templating, the role's defaults, vars/main.yml and vars/Debian.yml, for kafka_auth tls and
scram-sha-512 and for each node role (combined, broker only, controller only), with test passwords generated here.
Each server.properties is then parsed and validated by Kafka 4.3.1 in the container: `StorageTool format` builds a
KafkaConfig from it (KafkaConfig.validateValues: listeners, the protocol map, the inter-broker listener, SASL
mechanisms) and formats a scratch directory; a control case without sasl.enabled.mechanisms must be refused.
"""

from __future__ import annotations

import base64
import pathlib
import secrets
import shlex

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

ROLE = pathlib.Path(__file__).resolve().parents[3]
CLUSTER_ID = "a2lsbi1tb2xlY3VsZS1rZg"
SCRATCH = "/var/tmp/kiln-kafka-auth"
JAVA = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
STORAGE_TOOL = (f"{JAVA} -Xmx256m -Dlog4j2.configurationFile=/etc/kafka/tools-log4j2.properties"
                " -cp '/opt/kafka/current/libs/*' kafka.tools.StorageTool format")
CASES = [(auth, roles) for auth in ("tls", "scram-sha-512")
         for roles in (["broker", "controller"], ["broker"], ["controller"])]


def _trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def _load(rel: str) -> dict:
    return yaml.safe_load((ROLE / rel).read_text(encoding="utf-8")) or {}


@pytest.fixture(scope="module")
def secrets_():
    return {
        "kafka_tls_keystore_password": secrets.token_urlsafe(12),
        "kafka_tls_truststore_password": secrets.token_urlsafe(12),
        "kafka_scram_users": [{"name": "kiln-broker", "password": secrets.token_hex(12)},
                              {"name": "trainer", "password": secrets.token_hex(12)}],
    }


def render(auth: str, roles: list[str], base: str, addr: str, secret: dict) -> dict[str, str]:
    """server.properties and admin.properties as the role writes them for a node of a three-controller cluster."""
    init_plugin_loader([])
    variables = dict(_trusted(_load("defaults/main.yml")))
    variables.update({
        # the plan (group_vars/all) and the node (host_vars)
        "kafka_version": "4.3.1", "kafka_cluster_id": CLUSTER_ID, "kafka_heap_GB": 0.375,
        "kafka_voters": [{"node_id": 1, "host": "kafka-instance", "address": addr},
                         {"node_id": 2, "host": "kafka-2", "address": "192.0.2.2"},
                         {"node_id": 3, "host": "kafka-3", "address": "192.0.2.3"}],
        "kafka_node_id": 1 if "controller" in roles else 4, "kafka_process_roles": roles, "kafka_listen_address": addr,
        "kafka_broker_settings": {"unclean.leader.election.enable": "false", "min.insync.replicas": "2"},
        "kafka_jmx_exporter_config": {}, "kafka_auth": auth,
        # the operator's
        "kafka_config_dir": f"{base}/etc", "kafka_data_dir": f"{base}/data", **secret,
        "inventory_hostname": "kafka-instance", "ansible_facts": {"architecture": "x86_64"},
    })
    variables.update(_trusted(_load("vars/main.yml")))
    variables.update(_trusted(_load("vars/Debian.yml")))
    templar = Templar(loader=DataLoader(), variables=variables)
    return {name: templar.template(trust_as_template((ROLE / "templates" / f"{name}.j2").read_text(encoding="utf-8")))
            for name in ("server.properties", "admin.properties")}


@pytest.fixture(scope="module")
def addr(host) -> str:
    out = host.check_output("ip -4 -o route get 1.1.1.1")
    return out.split(" src ", 1)[1].split()[0]


def _put(host, path: str, text: str) -> None:
    data = base64.b64encode(text.encode()).decode()
    host.check_output(f"mkdir -p {shlex.quote(str(pathlib.PurePosixPath(path).parent))}"
                      f" && echo {data} | base64 -d > {shlex.quote(path)} && chmod 0600 {shlex.quote(path)}")


def _format(host, props: str, scram: list[dict]) -> tuple[int, str]:
    credentials = ["SCRAM-SHA-512=[name={name},password={password}]".format(**user) for user in scram]
    args = "".join(f" --add-scram {shlex.quote(c)}" for c in credentials)
    cmd = host.run(f"{STORAGE_TOOL} --cluster-id {CLUSTER_ID} --config {props}{args} 2>&1")
    return cmd.rc, cmd.stdout


@pytest.mark.parametrize(("auth", "roles"), CASES, ids=[f"{a}-{'+'.join(r)}" for a, r in CASES])
def test_kafka_accepts_the_rendered_configuration(host, addr, secrets_, auth, roles):
    base = f"{SCRATCH}/{auth}-{'-'.join(roles)}"
    host.run(f"rm -rf {base}")
    files = render(auth, roles, base, addr, secrets_)
    props = files["server.properties"]
    _put(host, f"{base}/etc/server.properties", props)
    rc, out = _format(host, f"{base}/etc/server.properties",
                      secrets_["kafka_scram_users"] if auth == "scram-sha-512" else [])
    host.run(f"rm -rf {base}")
    assert rc == 0 and "Formatting metadata directory" in out, out[-2000:]

    lines = props.splitlines()
    listener = "SSL" if auth == "tls" else "SASL_SSL"
    expected = ([f"{listener}://{addr}:9092"] if "broker" in roles else []) + (
        [f"CONTROLLER://{addr}:9093"] if "controller" in roles else [])
    assert f"listeners={','.join(expected)}" in lines
    assert f"listener.security.protocol.map=CONTROLLER:SSL,{listener}:{listener}" in lines
    assert f"controller.quorum.voters=1@{addr}:9093,2@192.0.2.2:9093,3@192.0.2.3:9093" in lines
    assert ("advertised.listeners=" + expected[0] in lines) == ("broker" in roles)
    assert f"ssl.keystore.password={secrets_['kafka_tls_keystore_password']}" in lines
    assert f"ssl.truststore.location={base}/etc/tls/truststore.p12" in lines
    assert "0.0.0.0" not in props
    if auth == "tls":
        assert "ssl.client.auth=required" in lines and "sasl" not in props
    else:
        assert "listener.name.controller.ssl.client.auth=required" in lines
        password = secrets_["kafka_scram_users"][0]["password"]
        jaas = ("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram."
                f'ScramLoginModule required username="kiln-broker" password="{password}";')
        assert (jaas in lines) == ("broker" in roles)
    admin = files["admin.properties"].splitlines()
    assert f"security.protocol={listener}" in admin
    assert ("sasl.mechanism=SCRAM-SHA-512" in admin) == (auth == "scram-sha-512")
    assert (f"ssl.keystore.location={base}/etc/tls/keystore.p12" in admin) == (auth == "tls")


def test_kafka_refuses_a_broken_scram_configuration(host, addr, secrets_):
    """The control case: the same SCRAM broker without sasl.enabled.mechanisms is refused, so the check above bites."""
    base = f"{SCRATCH}/control"
    host.run(f"rm -rf {base}")
    props = render("scram-sha-512", ["broker"], base, addr, secrets_)["server.properties"]
    broken = "\n".join(line for line in props.splitlines() if not line.startswith("sasl.enabled.mechanisms="))
    _put(host, f"{base}/etc/server.properties", broken + "\n")
    rc, out = _format(host, f"{base}/etc/server.properties", secrets_["kafka_scram_users"])
    host.run(f"rm -rf {base}")
    assert rc != 0
    assert "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms" in out
