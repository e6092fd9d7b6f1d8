"""GpuNodeStack: the kit's namespaces, the NVIDIA GPU Operator and (RDMA fabrics) the Network Operator."""

from __future__ import annotations

from kiln.knowledge.kubernetes import kubernetes
from kiln.plan.model import Plan
from kiln.render.manifests.context import GPU_NODE_STACK, Ctx, Obj, obj, rdma_enabled
from kiln.render.manifests.dataflow import models_namespace
from kiln.render.manifests.helm import helm_release, helm_source
from kiln.render.manifests.network import network_operator


def _namespaces(c: Ctx) -> list[Obj]:
    privileged = {"pod-security.kubernetes.io/enforce": "privileged"}
    out = []
    for ns, extra in ((c.system, privileged), (c.storage, privileged), (c.training, {})):
        out.append(obj("v1", "Namespace", c.meta(GPU_NODE_STACK, ns, labels=extra)))
    models = models_namespace(c)
    if models is not None:
        # No Pod Security level admits a hostPath short of privileged (baseline forbids them): the policy pack's
        # hostPathNamespaces confines this namespace to the planned receiver directories instead (policy_config).
        out.append(obj("v1", "Namespace", c.meta(GPU_NODE_STACK, models, labels=privileged)))
    return out


def gpu_operator_values(plan: Plan) -> Obj:
    """GPU Operator chart values from the plan: driver, GPUDirect RDMA, GDS, DCGM exporter."""
    rdma = rdma_enabled(plan)
    g = kubernetes().gpu_operator
    return {
        "nfd": {"enabled": g.nfd.value},
        "driver": {
            "enabled": g.driver_enabled.value,
            "rdma": {"enabled": rdma, "useHostMofed": g.use_host_mofed.value},
        },
        "gds": {"enabled": rdma and g.gds_on_rdma.value},
        "dcgmExporter": {"enabled": g.dcgm_exporter.value},
    }


def gpu_node_stack(c: Ctx) -> list[Obj]:
    objs = _namespaces(c)
    objs.append(helm_source(c, GPU_NODE_STACK, "gpu_operator"))
    objs.append(helm_release(c, GPU_NODE_STACK, "gpu_operator", gpu_operator_values(c.plan)))
    if rdma_enabled(c.plan):
        objs.extend(network_operator(c))
    return objs
