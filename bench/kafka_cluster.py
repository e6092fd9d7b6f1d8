"""KRaft nodes on 127.0.0.1 for the token-stream benchmarks: combined controller and broker each, a static quorum.

The jars come from scripts/build-kafka.sh (needs maven and a JRE 17). Node n listens for clients on
19092 + 100 × (n - 1) and for the quorum on the port after it; its logs live under the work directory.
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE_PORT = 19092
#: Heap per node: three nodes and the clients share two cores and a few GiB here.
HEAP = "-Xmx512m"


def port(node: int) -> int:
    return BASE_PORT + 100 * (node - 1)


@dataclass
class Cluster:
    """Running nodes by id; `bootstrap` names every node's client listener."""

    nodes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        """The client listeners of the nodes still running."""
        return ",".join(f"127.0.0.1:{port(n)}" for n, p in sorted(self.nodes.items()) if p.poll() is None)

    def kill(self, node: int) -> None:
        """SIGKILL, as a crash or a power loss: nothing is flushed or handed over."""
        self.nodes[node].kill()
        self.nodes[node].wait(30)

    def stop(self) -> None:
        for proc in self.nodes.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.nodes.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


def kafka_home(version: str) -> Path:
    out = subprocess.run([str(ROOT / "scripts" / "build-kafka.sh"), version], check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()[-1]
    return Path(out)


def _props(work: Path, node: int, count: int) -> Path:
    voters = ",".join(f"{n}@127.0.0.1:{port(n) + 1}" for n in range(1, count + 1))
    replicas = min(3, count)
    path = work / f"node{node}.properties"
    path.write_text("\n".join([
        "process.roles=broker,controller", f"node.id={node}", f"controller.quorum.voters={voters}",
        f"listeners=PLAINTEXT://127.0.0.1:{port(node)},CONTROLLER://127.0.0.1:{port(node) + 1}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port(node)}", "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", f"log.dirs={work / f'log{node}'}",
        f"offsets.topic.replication.factor={replicas}", f"transaction.state.log.replication.factor={replicas}",
        f"transaction.state.log.min.isr={min(2, replicas)}", "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=false", "unclean.leader.election.enable=false",
    ]) + "\n")
    return path


def start(version: str, work: Path, count: int = 1) -> Cluster:
    """Format and start `count` nodes of one cluster; returns when every node takes client connections."""
    cp = f"{kafka_home(version)}/libs/*"
    uuid = subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "random-uuid"], check=True,
                          capture_output=True, text=True).stdout.split()[-1]
    cluster = Cluster()
    for node in range(1, count + 1):
        props = _props(work, node, count)
        subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "format", "-t", uuid, "-c", str(props)],
                       check=True, capture_output=True)
        log = (work / f"node{node}.out").open("wb")
        cluster.nodes[node] = subprocess.Popen(["java", HEAP, "-cp", cp, "kafka.Kafka", str(props)],
                                               stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 240
    waiting = set(cluster.nodes)
    while waiting and time.monotonic() < deadline:
        for node in sorted(waiting):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port(node))) == 0:
                    waiting.discard(node)
        time.sleep(1)
    if waiting:
        cluster.stop()
        raise SystemExit(f"nodes {sorted(waiting)} did not listen within 240 s (logs: {work}/node*.out)")
    return cluster
