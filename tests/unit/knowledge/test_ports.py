"""One table of ports (kiln/knowledge/ports.yaml): every port the firewall, the manifests and the checks use is
read from it, and the copies that must stand alone (a role's default, the standalone exporter) match it."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from kiln import knowledge
from kiln.node.exporters.lustre import DEFAULT_PORT
from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import load_stack
from kiln.yamlio import load_inventory

ROOT = Path(__file__).resolve().parents[3]


def test_every_port_is_a_port_and_the_ports_are_distinct() -> None:
    ports = knowledge.load().ports
    numbers = [e.value for e in ports.entries() if e is not ports.seaweedfs.grpc_offset]
    assert all(0 < n < 65536 for n in numbers)
    grpc = [http + ports.seaweedfs.grpc_offset.value for http in ports.seaweedfs.http().values()]
    assert len(set(numbers + grpc)) == len(numbers) + len(grpc)


def test_the_standalone_copies_match_the_table() -> None:
    metrics = knowledge.load().ports.metrics
    assert metrics.lustre.value == DEFAULT_PORT
    defaults = yaml.safe_load((ROOT / "roles" / "monitoring" / "defaults" / "main.yml").read_text())
    assert defaults["monitoring_lustre_exporter_port"] == metrics.lustre.value


def test_the_firewall_opens_the_ports_of_the_table() -> None:
    spec = load_stack("lab")
    files = render_inventory(build_plan(spec, "lab"))
    ports = knowledge.load().ports
    compute = next(h for h in build_plan(spec, "lab").hosts if h.role == "compute")
    rules = {r["name"]: r["ports"] for r in load_inventory(files[f"host_vars/{compute.name}.yml"])["firewall_rules"]}
    assert rules["ssh"] == [ports.host.ssh.value]
    assert rules["iperf3"] == [ports.acceptance.iperf3.value]
    assert rules["perftest"] == [ports.acceptance.perftest.value]
    # the training ranks' stream gauges (bare-metal stream, two ranks per lab node): local rank i on base + i
    base = ports.metrics.kiln_stream.value
    assert {base, base + 1} <= set(rules["metrics"]) and base + 2 not in rules["metrics"]


def test_render_reads_no_port_from_verify() -> None:
    """The firewall's ports come from the table, not from the acceptance checks' run options."""
    for path in (ROOT / "kiln" / "render").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("kiln.verify"), f"{path.relative_to(ROOT)} imports {node.module}"
