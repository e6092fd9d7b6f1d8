"""The Pulumi program: stack config `kiln:cluster` → spec → plan → the seven components.

`__main__.py` calls `main()`; tests call it under `pulumi.runtime.set_mocks` (a callable entry point,
so nothing depends on module import order or caching). The program holds no sizing logic: every
value comes from the plan, through the builder in kiln.render.manifests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from kiln.infra.components import (
    AcceptanceSuite,
    DataMover,
    GpuNodeStack,
    KilnComponent,
    LustreClient,
    Monitoring,
    NcclConfig,
    ObjectStore,
    TokenStream,
)
from kiln.plan import build_plan
from kiln.plan.model import Plan
from kiln.plan.serialize import target_dict
from kiln.render.inventory import render_inventory
from kiln.render.manifests import (
    ACCEPTANCE,
    DATAFLOW,
    GPU_NODE_STACK,
    LUSTRE_CLIENT,
    MONITORING,
    NCCL_CONFIG,
    OBJECT_STORE,
    TOKEN_STREAM,
    build_manifests,
    credentials_config_key,
    jwt_config_key,
    mgs_spec,
    node_labels,
    s3_endpoint,
)
from kiln.spec import SpecError, validate

CONFIG_NAMESPACE = "kiln"
CLUSTER_KEY = "cluster"


def load(config: pulumi.Config | None = None) -> Plan:
    """The stack's plan (from its validated spec); a bad spec stops the program with the field path and the fix."""
    cfg = config or pulumi.Config(CONFIG_NAMESPACE)
    source = f"stack {pulumi.get_stack()} ({CONFIG_NAMESPACE}:{CLUSTER_KEY})"
    try:
        return build_plan(validate(cfg.require_object(CLUSTER_KEY), source), source=source)
    except SpecError as exc:
        raise pulumi.RunError(exc.render()) from None


def plan_summary(plan: Plan) -> dict[str, Any]:
    s = plan.sizing
    return {
        "stack": plan.stack,
        "plan_digest": plan.spec_digest,
        "bottleneck": {"read": s.read_bottleneck, "write": s.write_bottleneck},
        "aggregate_GBps": {"read": round(s.aggregate_read_GBps, 3), "write": round(s.aggregate_write_GBps, 3)},
        "gpus": {"total": s.gpus_total, "fed": s.gpus_fed},
        "checkpoint": {"save_s": round(s.checkpoint.save_s, 2), "budget_s": round(s.checkpoint.budget_s, 2),
                       "meets_budget": s.checkpoint.meets_budget},
        "targets": [target_dict(t) for t in plan.targets],
        "warnings": [w.line() for w in plan.warnings],
    }


@dataclass(frozen=True, slots=True)
class Program:
    """What one run built: the components by module (gpu, nccl, ...) and the stack outputs."""

    plan: Plan
    components: dict[str, KilnComponent]
    outputs: dict[str, Any]


def main() -> Program:
    """Build the stack: components from the plan, stack outputs exported (and returned, for tests)."""
    plan = load()
    ns, key = credentials_config_key(plan)
    secret_key = pulumi.Config(ns).require_secret(key)
    comps = {c.kind: c.objects for c in build_manifests(plan)}
    name = plan.stack

    gpu = GpuNodeStack(f"{name}-gpu", comps[GPU_NODE_STACK])
    base: list[pulumi.Resource] = list(gpu.namespaces)
    nccl = NcclConfig(f"{name}-nccl", comps[NCCL_CONFIG], depends_on=base)
    lustre = LustreClient(f"{name}-lustre", comps[LUSTRE_CLIENT], depends_on=base)
    jwt_key = None
    if plan.objectstore.backend == "seaweedfs":
        jwt_ns, jwt_name = jwt_config_key()
        jwt_key = pulumi.Config(jwt_ns).require_secret(jwt_name)
    store = ObjectStore(f"{name}-objectstore", comps[OBJECT_STORE], plan, secret_key, depends_on=base,
                        jwt_key=jwt_key)
    monitoring = Monitoring(f"{name}-monitoring", comps[MONITORING], depends_on=[*base, store])
    acceptance = AcceptanceSuite(f"{name}-acceptance", comps[ACCEPTANCE],
                                 depends_on=[*base, nccl, lustre, store, monitoring])
    mover = DataMover(f"{name}-dataflow", comps[DATAFLOW], depends_on=[*base, lustre, store, monitoring])
    stream = TokenStream(f"{name}-kafka", comps[TOKEN_STREAM], depends_on=[*base, monitoring])

    outputs: dict[str, Any] = {
        "endpoints": {
            "s3": s3_endpoint(plan),
            "s3_hosts": plan.objectstore.endpoint,
            "lustre_mgs": mgs_spec(plan),
            "lustre_mount": f"{mgs_spec(plan)}:/{plan.fsname} {plan.mount_point}",
        },
        "inventory": render_inventory(plan),
        "plan": plan_summary(plan),
        "node_labels": node_labels(plan),
    }
    for k, v in outputs.items():
        pulumi.export(k, v)
    built: list[KilnComponent] = [gpu, nccl, lustre, store, monitoring, acceptance, mover, stream]
    return Program(plan, {c.kind.module: c for c in built}, outputs)
