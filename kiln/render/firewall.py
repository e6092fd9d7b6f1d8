"""Plan → the `firewall` role's rules per host (host_vars firewall_rules): which ports, from which networks.

The role opens nothing by itself; every rule comes from here, derived from the plan, with the port numbers of
kiln/knowledge/ports.yaml:

- every host: SSH (22) from the management network (Ansible, `kiln verify`);
- object-store hosts (SeaweedFS deployed by kiln): the S3 port from the storage and management networks
  (clients reach the gateway by name, which may resolve to either); master, volume and filer ports and their
  gRPC ports (+10000) only from the object-store hosts' own storage addresses — the master hands out write
  tokens over HTTP, and the filer and volume servers serve data, so no client may reach them; the one
  exception is planned per model entry (`dataflow.models[].filer_access`): the filer's gRPC port, from the
  storage addresses of that entry's receivers, which subscribe to its change events;
- Lustre servers, clients and LNet routers on an LNet TCP network: the LNet acceptor port (988) from the
  storage network;
- bare-metal KRaft nodes: the Kafka client port from the management network; the controller port from the other
  KRaft nodes only;
- servers of a failover pair: Corosync's knet port (UDP) from the partner's link addresses (management and
  storage), nothing else;
- compute hosts: iperf3's port from the storage network (acceptance `network.iperf3` runs between them);
- compute hosts: every TCP port from the other compute hosts (MPI launchers and NCCL bootstrap use
  ephemeral ports) and perftest's port from the management network (`fabric.ib_*_bw` exchange);
- every host: the exporter ports of its planned scrape targets from the Prometheus hosts; Prometheus hosts:
  Prometheus and Alertmanager from the management network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kiln import knowledge
from kiln.plan.groups import COMPUTE, LNET_ROUTERS, LUSTRE_CLIENTS, LUSTRE_SERVERS
from kiln.plan.model import Host, Plan


def _rule(name: str, proto: str, ports: Sequence[int], sources: list[str], reason: str) -> dict[str, Any]:
    return {"name": name, "proto": proto, "ports": list(ports), "sources": sources, "reason": reason}


def _storage_addresses(h: Host) -> list[str]:
    return [n.address for n in h.nics if n.carries_storage and n.address]


def firewall_rules(plan: Plan, h: Host) -> list[dict[str, Any]]:
    """The `firewall` role's rules for host `h`, in a stable order."""
    ports = knowledge.load().ports  # kiln/knowledge/ports.yaml
    mgmt, storage = plan.networks.management, plan.networks.storage_sources()
    rules = [_rule("ssh", "tcp", [ports.host.ssh.value], [mgmt],
                   "Ansible and kiln verify from the management network")]
    os_ = plan.objectstore
    if os_.backend == "seaweedfs" and h.name in os_.hosts:
        rules.append(_rule("s3", "tcp", [os_.s3_port], [*storage, mgmt], "S3 gateway for clients"))
        peers = sorted({f"{a}/32" for name in os_.hosts for a in _storage_addresses(plan.host(name))})
        if peers:
            rules.append(_rule("seaweedfs", "tcp", ports.seaweedfs.backend(), peers,
                               "SeaweedFS master, volume and filer (HTTP and gRPC): object-store hosts only"))
        subscribers = plan.dataflow.filer_subscribers if plan.dataflow else ()
        sources = sorted({f"{a}/32" for name in subscribers for a in _storage_addresses(plan.host(name))})
        if sources:
            rules.append(_rule("seaweedfs-filer-subscribe", "tcp", [ports.seaweedfs.filer_grpc], sources,
                               "model distribution: the filer's metadata subscription (gRPC), to the receivers of "
                               "dataflow.models entries with filer_access only"))
    lustre = {
        *plan.groups.get(LUSTRE_SERVERS, ()),
        *plan.groups.get(LUSTRE_CLIENTS, ()),
        *plan.groups.get(LNET_ROUTERS, ()),
    }
    if any(n.lnd == "tcp" for n in plan.lnet) and h.name in lustre and _storage_addresses(h):
        rules.append(_rule("lnet", "tcp", [ports.host.lnet_acceptor.value], storage, "LNet TCP (socklnd) acceptor"))
    rules += _corosync_rules(plan, h)
    rules += _kafka_rules(plan, h)
    compute = plan.groups.get(COMPUTE, ())
    if h.name in compute and _storage_addresses(h):
        rules.append(_rule("iperf3", "tcp", [ports.acceptance.iperf3.value], storage, "acceptance network.iperf3"))
    if h.name in compute:
        peers = sorted({f"{plan.host(p).management_address}/32" for p in compute if p != h.name}
                       | {f"{a}/32" for p in compute if p != h.name for a in _storage_addresses(plan.host(p))})
        if peers:
            rules.append(_rule("compute-peers", "tcp", [], peers, "MPI and NCCL bootstrap between compute hosts"))
        rules.append(_rule("perftest", "tcp", [ports.acceptance.perftest.value], [mgmt],
                           "acceptance fabric.ib_*_bw exchange"))
    rules += _monitoring_rules(plan, h)
    return rules


def _kafka_rules(plan: Plan, h: Host) -> list[dict[str, Any]]:
    """A bare-metal KRaft node: its client listener from the management network (producers, training ranks, kiln
    verify); the controller listener, on a controller, from the other KRaft nodes only."""
    k = plan.kafka
    node = next((n for n in k.nodes if n.host == h.name), None) if k is not None else None
    if k is None or node is None:
        return []
    ports = knowledge.load().ports.kafka
    out = []
    if "broker" in node.roles:
        out.append(_rule("kafka", "tcp", [ports.client.value], [plan.networks.management],
                         "Kafka clients: producers, the training ranks and kiln verify"))
    peers = sorted(f"{plan.host(n.host).management_address}/32" for n in k.nodes if n.host != h.name)
    if "controller" in node.roles and peers:
        out.append(_rule("kraft", "tcp", [ports.controller.value], peers,
                         "the KRaft quorum and the brokers' metadata fetches: the other KRaft nodes only"))
    return out


def _corosync_rules(plan: Plan, h: Host) -> list[dict[str, Any]]:
    """A server of a failover pair: Corosync's knet links (UDP) from its partner's link addresses only."""
    pair = plan.ha.pair_of(h.name)
    if pair is None:
        return []
    partner = next(n for n in pair.nodes if n.name != h.name)
    return [_rule("corosync", "udp", [knowledge.load().ports.host.corosync_knet.value],
                  [f"{a}/32" for a in partner.links], f"Corosync knet links with the failover partner {partner.name}")]


def _monitoring_rules(plan: Plan, h: Host) -> list[dict[str, Any]]:
    """Exporter ports of this host's planned scrape targets, from the Prometheus hosts (their management and
    storage addresses: SeaweedFS serves metrics on its storage address); on a Prometheus host, the Prometheus
    and Alertmanager ports from the management network (operators, Grafana)."""
    metrics = knowledge.load().ports.metrics
    m = plan.monitoring
    out = []
    ports = sorted({int(t.address.rsplit(":", 1)[1]) for t in m.scrape_targets
                    if t.host == h.name and t.job not in ("prometheus", "alertmanager")})
    sources = sorted({f"{a}/32" for name in m.hosts
                      for a in (plan.host(name).management_address, *_storage_addresses(plan.host(name)))})
    if ports and sources:
        out.append(_rule("metrics", "tcp", list(ports), sources, "Prometheus scrapes the exporters"))
    if h.name in m.hosts:
        out.append(_rule("prometheus", "tcp", [metrics.prometheus.value, metrics.alertmanager.value],
                         [plan.networks.management], "Prometheus and Alertmanager APIs from the management network"))
    return out
