"""Properties of the sizing model and the loader, over many generated specs (hypothesis)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln import knowledge
from kiln.plan import build_plan
from kiln.spec import SpecError, parse_stack_text, validate

ROOT = Path(__file__).resolve().parents[3]
BASE = {
    n: yaml.safe_load((ROOT / "stacks" / f"Pulumi.{n}.yaml").read_text())["config"]["kiln:cluster"]
    for n in ("lab", "dev", "prod-h100")
}

sizes = st.fixed_dictionaries(
    {
        "stack": st.sampled_from(sorted(BASE)),
        "oss_pairs": st.integers(1, 40),
        "osts": st.integers(1, 16),
        "devs": st.integers(1, 6),
        "nics": st.integers(1, 4),
        "nodes": st.integers(1, 512),
        "oversub": st.floats(1.0, 4.0),
    }
)


def _variant(p: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(BASE[p["stack"]])
    data["lustre"]["failover"] = "pairs"  # on drives both servers of a pair reach
    data["lustre"]["oss"]["osts"]["attachment"] = data["lustre"]["mds"]["mdts"]["attachment"] = "shared-enclosure"
    data["lustre"]["mds"]["nodes"] = 2
    data["lustre"]["oss"]["nodes"] = 2 * p["oss_pairs"]
    data["lustre"]["oss"]["osts"]["per_node"] = p["osts"]
    data["lustre"]["oss"]["osts"]["devices_per_target"] = p["devs"]
    data["lustre"]["oss"]["nics"] = {"count": p["nics"], "nic": data["lustre"]["oss"]["nics"]["nic"]}  # default names
    data["lustre"]["oss"]["osts"].pop("paths", None)
    # The protection level is held fixed (none for one drive, raid1 otherwise): the invariants compare
    # fleets of one layout; the default level changes with the drive count (raid1 → raid6 at four
    # drives trades read rate for redundancy). Fencing: the lab value (the plan warns).
    data["lustre"]["oss"]["osts"]["protection"] = "none" if p["devs"] == 1 else "raid1"
    data["lustre"]["ha"] = {"fencing": {"agent": "none-lab"}}
    data["lustre"]["pools"] = []
    data["lustre"]["directories"] = [d for d in data["lustre"]["directories"] if "stripe_count" not in d]
    data["compute"]["pools"][0]["nodes"] = p["nodes"]
    data.pop("pipeline", None)  # the token stream sizes its brokers from the pool: not what these invariants vary
    data["fabric"]["oversubscription"] = p["oversub"]
    data["networks"] = {"management": "10.0.0.0/16", "storage": "10.1.0.0/16", "management_link_Gbps": 100}
    data["workload"]["checkpoint"]["budget_fraction"] = 0.5
    data["objectstore"]["capacity_TB"] = 0.0001
    # Bandwidth properties over fleet shapes: the capacity plan (tests/unit/plan/test_capacity.py) is held out of
    # them, so no generated fleet is refused for holding too little data.
    data["workload"]["dataset_TB"] = 1e-6
    data["workload"]["checkpoint"]["keep"] = 1
    return data


def _plan(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "prop"), "prop")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes)
def test_no_prediction_exceeds_a_physical_limit(p: dict[str, Any]) -> None:
    plan = _plan(_variant(p))
    s = plan.sizing
    kb = knowledge.load()
    for layer in s.layers:
        if layer.kind == "supply":
            assert s.aggregate_read_GBps <= layer.read_GBps + 1e-9
            assert s.aggregate_write_GBps <= layer.write_GBps + 1e-9
    pool = plan.hosts[0]
    node_link = sum(n.link_Gbps / 8 for n in pool.nics if n.role == "storage")
    assert s.single_client_read_GBps <= node_link + 1e-9
    assert s.per_client_read_GBps <= s.single_client_read_GBps + 1e-9
    oss_link = sum(n.link_Gbps / 8 for h in plan.hosts if h.role == "oss" for n in h.nics)
    assert s.aggregate_read_GBps <= oss_link + 1e-9
    client_link = sum(n.link_Gbps / 8 for h in plan.hosts if h.role == "compute" for n in h.nics if n.role == "storage")
    assert s.checkpoint.save_s >= s.checkpoint.bytes / (client_link * 1e9) - 1e-9
    assert s.gpus_fed * s.read_per_gpu_GBps <= s.aggregate_read_GBps + 1e-6
    assert s.stage_in_GBps <= s.objectstore_GBps + 1e-9
    for t in plan.targets:
        if t.check == "storage.fio_local_read":
            assert t.expected <= max(d.read_GBps for d in kb.nvme.values()) * 32
        if t.unit == "GB/s" and t.check.startswith("fabric.ib_"):
            assert t.expected <= 400 / 8


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes, st.sampled_from(["oss", "ost", "dev", "nic"]))
def test_more_servers_never_lower_bandwidth(p: dict[str, Any], grow: str) -> None:
    before = _plan(_variant(p)).sizing
    q = dict(p)
    key = {"oss": "oss_pairs", "ost": "osts", "dev": "devs", "nic": "nics"}[grow]
    q[key] = p[key] + 1
    after = _plan(_variant(q)).sizing
    assert after.aggregate_read_GBps >= before.aggregate_read_GBps - 1e-9
    assert after.aggregate_write_GBps >= before.aggregate_write_GBps - 1e-9
    assert after.gpus_fed >= before.gpus_fed


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True), st.text(max_size=12)
)
junk = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(BASE)), st.data(), junk, st.sampled_from(["replace", "delete", "add"]))
def test_loader_never_crashes_on_malformed_specs(name: str, data: Any, value: Any, op: str) -> None:
    spec = copy.deepcopy(BASE[name])
    paths = [p for p in _paths(spec) if p]
    path = data.draw(st.sampled_from(paths))
    parent: Any = spec
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if op == "replace":
        parent[last] = value
    elif op == "delete":
        del parent[last]
    elif isinstance(parent, dict):
        parent[f"x{len(parent)}"] = value
    else:
        parent.append(value)
    try:
        build_plan(validate(spec, "fuzz"), "fuzz")
    except SpecError as exc:
        assert exc.issues and all(i.path and i.fix for i in exc.issues)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_a_spec_or_a_spec_error(text: str) -> None:
    try:
        parse_stack_text(text)
    except SpecError as exc:
        assert exc.issues


@settings(max_examples=100, deadline=None)
@given(junk)
def test_any_yaml_value_as_cluster_is_handled(value: Any) -> None:
    text = yaml.safe_dump({"config": {"kiln:cluster": value}})
    try:
        parse_stack_text(text)
    except SpecError as exc:
        assert exc.issues
