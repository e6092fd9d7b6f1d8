"""The Pulumi program under Pulumi's mocks, for every stack: what it asks the engine to create.

The mocks (tests/infra/conftest.py, TEST DOUBLE) record each registration with its parent and its
inputs exactly as the engine would receive them, secret wrappers included.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from pulumi.runtime import rpc

from kiln.infra.resources import chart_checkout_dir, is_source_only
from kiln.plan import build_plan
from kiln.plan.serialize import target_dict
from kiln.render.inventory import render_inventory
from kiln.render.manifests import (
    COMPONENT_KINDS,
    Ctx,
    build_manifests,
    helm_chart,
    object_role,
    s3_endpoint,
    seaweedfs_jwt_string_data,
)
from kiln.render.manifests.dataflow import models_namespace
from kiln.spec import validate
from tests.conftest import STACKS, stack_data
from tests.infra.conftest import JWT_SECRET, SECRET, Run, run_program, walk

RELEASE = "kubernetes:helm.sh/v3:Release"


def _type_token(obj: dict[str, Any]) -> str:
    if obj["kind"] == "HelmRelease":
        return RELEASE
    api = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    return f"kubernetes:{api}:{obj['kind']}"


def _expected(stack: str) -> tuple[Any, dict[str, tuple[dict[str, Any], ...]]]:
    spec = validate(stack_data(stack), stack)
    plan = build_plan(spec, stack)
    return (spec, plan), {c.kind.module: c.objects for c in build_manifests(plan)}


def _norm(value: Any) -> Any:
    """Struct values come back as floats; compare numbers by value."""
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return float(value)


@pytest.fixture(params=STACKS)
def run(request: pytest.FixtureRequest, runs: dict[str, Run]) -> Run:
    r = runs[request.param]
    assert r.error is None, f"{request.param}: {r.error!r}"
    return r


def test_components_have_stable_type_tokens_and_children_are_parented(run: Run) -> None:
    (_, plan), objs = _expected(run.stack)
    stack_urn = f"urn:pulumi:{run.stack}::kiln::pulumi:pulumi:Stack::kiln-{run.stack}"
    for kind in COMPONENT_KINDS:
        comp = run.component(kind.token)
        assert comp.name == f"{plan.stack}-{kind.module}"
        assert comp.parent == stack_urn and not comp.custom
        children = run.by_parent(comp.urn)
        expected = [o for o in objs[kind.module] if not is_source_only(o)]
        assert len(children) == len(expected), kind.token
        assert sorted(c.name for c in children) == sorted(f"{comp.name}-{object_role(o)}" for o in expected)
        assert sorted(c.type for c in children) == sorted(_type_token(o) for o in expected)
        assert all(c.custom for c in children)
    # nothing is registered outside the components (a component with nothing to build, e.g. the token stream of a
    # stack without one, has no children)
    parents = {r.parent for r in run.records if r.custom}
    assert parents == {run.component(k.token).urn for k in COMPONENT_KINDS
                       if any(not is_source_only(o) for o in objs[k.module])}


def test_resource_inputs_are_the_builder_objects(run: Run) -> None:
    """Builder and program cannot disagree: every input equals the rendered object (Secret data aside)."""
    _, objs = _expected(run.stack)
    for kind in COMPONENT_KINDS:
        comp = run.component(kind.token)
        by_name = {c.name: c for c in run.by_parent(comp.urn)}
        for obj in objs[kind.module]:
            if is_source_only(obj):
                continue
            rec = by_name[f"{comp.name}-{object_role(obj)}"]
            if rec.type == RELEASE:
                chart = helm_chart(obj, objs[kind.module])
                if chart.git_url is not None:  # a git-published chart, installed from its checkout at the tag
                    assert rec.inputs["chart"] == str(chart_checkout_dir(chart) / chart.chart)
                    assert "version" not in rec.inputs and "repositoryOpts" not in rec.inputs
                else:
                    assert rec.inputs["chart"] == chart.chart and rec.inputs["version"] == chart.version
                    assert rec.inputs["repositoryOpts"] == {"repo": chart.repository_url}
                assert rec.inputs["namespace"] == chart.namespace and rec.inputs["name"] == chart.release_name
                assert _norm(rec.inputs["values"]) == _norm(chart.values)
                continue
            inputs = {k: v for k, v in rec.inputs.items() if k != "stringData"}
            assert _norm(inputs) == _norm(obj), rec.name


def test_one_rdma_resource_per_rail(run: Run) -> None:
    (spec, plan), _ = _expected(run.stack)
    ncps = [r for r in run.records if r.type == "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"]
    if plan.fabric == "tcp":
        assert ncps == []
        return
    (ncp,) = ncps
    config = json.loads(ncp.inputs["spec"]["rdmaSharedDevicePlugin"]["config"])["configList"]
    rails = [n for n in plan.hosts[0].nics if n.role == "compute"]
    assert [c["resourceName"] for c in config] == [f"rdma_rail{i}" for i in range(len(rails))]
    assert [c["selectors"]["ifNames"] for c in config] == [[n.interface] for n in rails]
    assert len(config) == spec.compute.pools[0].compute_rails.count
    release = next(r for r in run.records if r.type == RELEASE and r.inputs["name"] == "network-operator")
    assert release.urn in ncp.dependencies  # the CRD comes with the chart


def test_persistent_volumes_carry_plan_capacity_and_nids(run: Run) -> None:
    (_, plan), objs = _expected(run.stack)
    pvs = [r for r in run.records if r.type == "kubernetes:core/v1:PersistentVolume"]
    models = models_namespace(Ctx(plan)) is not None  # the root again, for the models namespace
    assert len(pvs) == len(plan.layouts) + 1 + models
    want = {o["metadata"]["name"]: o["spec"]["capacity"]["storage"] for o in (*objs["lustre"], *objs["dataflow"])
            if o["kind"] == "PersistentVolume"}
    for pv in pvs:
        name = pv.inputs["metadata"]["name"]
        assert pv.inputs["spec"]["capacity"]["storage"] == want[name]
        attrs = pv.inputs["spec"]["csi"]["volumeAttributes"]
        assert attrs["mgsNids"].split(":") == [",".join(s) for s in plan.mgs_nids]
        assert attrs["fsName"] == plan.fsname


def test_secrets_are_secret_and_never_plaintext(run: Run) -> None:
    secrets = [r for r in run.records if r.type == "kubernetes:core/v1:Secret"]
    seaweedfs = run.result is not None and run.result.plan.objectstore.backend == "seaweedfs"
    (_, plan), _ = _expected(run.stack)
    assert len(secrets) == 2 + (models_namespace(Ctx(plan)) is not None) + 2 * seaweedfs
    for rec in secrets:
        assert rpc.is_rpc_secret(rec.inputs["stringData"]), rec.name
        data = rpc.unwrap_rpc_secret(rec.inputs["stringData"])
        if rec.inputs["metadata"]["name"] == "kiln-seaweedfs-jwt":
            assert data == seaweedfs_jwt_string_data(JWT_SECRET)
            assert set(data) == {"WEED_JWT_SIGNING_KEY", "WEED_JWT_FILER_SIGNING_KEY",
                                 "WEED_JWT_FILER_SIGNING_READ_KEY"}
        elif rec.inputs["metadata"]["name"] == "kiln-seaweedfs-s3-config":
            ident = json.loads(data["seaweedfs_s3_config"])["identities"][0]
            assert ident["credentials"][0]["secretKey"] == SECRET
        else:
            assert data["AWS_SECRET_ACCESS_KEY"] == SECRET
    assert run.secret_flags and all(run.secret_flags.values()), run.secret_flags  # Output.is_secret()
    jwt_keys = list(seaweedfs_jwt_string_data(JWT_SECRET).values())
    leaks = [(rec.name, path) for rec in run.records for path, leaf, secret in walk(rec.inputs)
             if isinstance(leaf, str) and any(s in leaf for s in [SECRET, JWT_SECRET, *jwt_keys]) and not secret]
    assert leaks == []
    assert run.result is not None
    assert SECRET not in json.dumps(run.result.outputs)
    assert not any(s in json.dumps(run.result.outputs) for s in [JWT_SECRET, *jwt_keys])


def test_dependencies_order_the_stack(run: Run) -> None:
    gpu = run.component("kiln:gpu:GpuNodeStack")
    namespaces = {r.urn for r in run.by_parent(gpu.urn) if r.type == "kubernetes:core/v1:Namespace"}
    (_, plan), _ = _expected(run.stack)
    # system, storage, training, and the models namespace where the stack distributes models by filer events
    assert len(namespaces) == 3 + (models_namespace(Ctx(plan)) is not None)
    for rec in run.records:
        if rec.custom and rec.type != "kubernetes:core/v1:Namespace":
            assert namespaces <= set(rec.dependencies), rec.name
    acceptance = run.component("kiln:acceptance:Acceptance")
    mover = run.component("kiln:dataflow:DataMover")
    # The token stream is not what the acceptance Jobs measure: they need not wait for it.
    stream = {r.urn for r in run.records if r.type == "kiln:kafka:TokenStream"}
    others = {r.urn for r in run.records
              if r.custom and r.parent not in (acceptance.urn, gpu.urn, mover.urn, *stream)}
    for rec in run.by_parent(acceptance.urn):
        assert others <= set(rec.dependencies), rec.name
    # The data mover needs the Lustre claims and the S3 Secret and endpoint before its pods start.
    lustre = run.component("kiln:lustre:LustreClient")
    store = run.component("kiln:objectstore:ObjectStore")
    needed = {r.urn for r in run.records if r.custom and r.parent in (lustre.urn, store.urn)}
    for rec in run.by_parent(mover.urn):
        assert needed <= set(rec.dependencies), rec.name
    # Its ServiceMonitor needs the CRD that the monitoring chart installs.
    monitoring = run.component("kiln:monitoring:Monitoring")
    releases = {r.urn for r in run.by_parent(monitoring.urn) if r.type == "kubernetes:helm.sh/v3:Release"}
    assert releases
    monitors = [r for r in run.by_parent(mover.urn) if r.type.endswith(":ServiceMonitor")]
    assert len(monitors) == 1
    assert releases <= set(monitors[0].dependencies)


def test_stack_outputs(run: Run) -> None:
    (_, plan), _ = _expected(run.stack)
    assert run.result is not None
    out = run.result.outputs
    assert out["endpoints"]["s3"] == s3_endpoint(plan)
    assert out["endpoints"]["lustre_mgs"] == ":".join(",".join(s) for s in plan.mgs_nids)
    assert out["inventory"] == render_inventory(plan)
    assert out["plan"]["bottleneck"] == {"read": plan.sizing.read_bottleneck, "write": plan.sizing.write_bottleneck}
    assert out["plan"]["targets"] == [target_dict(t) for t in plan.targets]
    compute = [h.name for h in plan.hosts if h.role == "compute"]
    assert all(out["node_labels"][h]["kiln.io/pool"] for h in compute)


def test_bad_spec_stops_the_program_with_the_field_path() -> None:
    data = stack_data("dev")
    data["lustre"]["oss"]["nodes"] = 0
    run = run_program("dev", data)
    assert isinstance(run.error, pulumi.RunError)
    assert "lustre.oss.nodes" in str(run.error) and "fix:" in str(run.error)
    assert not [r for r in run.records if r.custom]


def test_the_spec_names_the_secret_config_key() -> None:
    data = stack_data("lab")
    data["objectstore"]["credentials_secret"] = "kiln:labS3Key"
    run = run_program("lab", data)  # only kiln:s3SecretKey is set
    assert run.error is not None and "labS3Key" in str(run.error)
    other = "another-Secret-Value-0123456789abcdef"
    run = run_program("lab", data, secret="unused", extra_config={"kiln:labS3Key": other})
    assert run.error is None
    secret = next(r for r in run.records if r.type == "kubernetes:core/v1:Secret")
    assert rpc.unwrap_rpc_secret(secret.inputs["stringData"])["AWS_SECRET_ACCESS_KEY"] == other


def test_seaweedfs_needs_the_jwt_config_secret() -> None:
    """A seaweedfs stack whose kiln:seaweedfsJwtKey is too short stops with the key's name and the fix."""
    run = run_program("lab", stack_data("lab"), extra_config={"kiln:seaweedfsJwtKey": "short"})
    assert run.error is not None and "seaweedfsJwtKey" in str(run.error) and "32" in str(run.error)
    with pytest.raises(ValueError, match="seaweedfsJwtKey"):
        seaweedfs_jwt_string_data("short")
