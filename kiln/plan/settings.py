"""The spec's settings the adapters apply as given: networks, Ansible access, link settings, Lustre service
settings, compute pools and the Kubernetes side. Carried in the plan so that the adapters (inventory, firewall,
manifests, the Pulumi program, the lab, verify) read the plan alone."""

from __future__ import annotations

from typing import Any

from kiln import knowledge
from kiln.knowledge.kubernetes import kubernetes
from kiln.plan.capacity import ost_protected_TB
from kiln.plan.model import (
    ComputePoolPlan,
    FencingPlan,
    InventoryPlan,
    KubernetesPlan,
    LustrePlan,
    NetworksPlan,
    RdmaPlan,
)
from kiln.plan.tuning import roce_traffic_class
from kiln.spec import catalog
from kiln.spec.addressing import lnet_subnets, ports_per_net
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, ComputePool

# Spec fields left out of the mover's copy of the spec (KubernetesPlan.mover_spec): names that look like credentials
# to the policy checks, and that the pods take from the S3 Secret instead (KILN_S3_ACCESS_KEY).
_LEFT_OUT = {"objectstore": {"access_key_id", "credentials_secret"}}


def build_networks(spec: ClusterSpec) -> NetworksPlan:
    n = spec.networks
    subnets, need = lnet_subnets(spec), ports_per_net(spec)
    planned: dict[str, int] = {}
    for net, cidr in subnets.items():
        planned[cidr] = planned.get(cidr, 0) + need[net]
    return NetworksPlan(management=n.management, storage=n.storage, roce_rails=n.roce_rails, lnet=subnets,
                        storage_planned=planned)


def build_inventory(spec: ClusterSpec) -> InventoryPlan:
    inv = spec.inventory
    return InventoryPlan(connection=inv.connection, address_by=inv.address_by, ansible_user=inv.ansible_user)


def link_mtu(spec: ClusterSpec) -> int:
    """The storage network's link MTU: fabric.mtu, else the fabric's default (kiln/knowledge/tuning.yaml protocol)."""
    return spec.fabric.mtu or knowledge.load().tuning.protocol.default_mtu(spec.fabric.kind)


def link_mtu_issues(spec: ClusterSpec) -> list[SpecIssue]:
    """A warning when a RoCE netdev MTU gives an RDMA path MTU below 4096 (iboe_get_mtu() in include/rdma/ib_addr.h
    subtracts the RoCE headers first): RDMA then moves half-size packets or less."""
    if spec.fabric.kind != "roce":
        return []
    proto = knowledge.load().tuning.protocol
    mtu = link_mtu(spec)
    path = proto.roce_path_mtu(mtu)
    if path >= 4096:
        return []
    need = 4096 + proto.roce_header_bytes.value
    return [SpecIssue(
        "fabric.mtu", mtu,
        f"a RoCE netdev MTU of {mtu} gives an RDMA path MTU of {path}: the kernel subtracts "
        f"{proto.roce_header_bytes.value} bytes of RoCE headers before it picks the IB MTU (iboe_get_mtu())",
        f"use at least {need} (9000 where the switches carry jumbo frames end to end)",
        "warning",
    )]


def build_rdma(spec: ClusterSpec) -> RdmaPlan:
    ipoib_header = knowledge.load().tuning.protocol.ipoib_header_bytes.value
    mtu = link_mtu(spec)
    return RdmaPlan(mtu=mtu, ipoib_mtu=mtu - ipoib_header, roce_dscp=spec.fabric.roce_dscp,
                    roce_tos=roce_traffic_class(spec), stack=spec.fabric.rdma_stack)


def build_lustre(spec: ClusterSpec) -> LustrePlan:
    lu = spec.lustre
    f = lu.ha.fencing
    fencing = None if f is None else FencingPlan(agent=f.agent, address=f.address, username=f.username,
                                                 options=dict(f.options))
    return LustrePlan(backend=lu.backend, failover=lu.failover, fencing=fencing, scheduler=lu.scheduler,
                      ost_usable_capacity_TB=ost_protected_TB(spec))


def _pool(spec: ClusterSpec, pool: ComputePool) -> ComputePoolPlan:
    gpu = catalog.gpus(spec)[pool.gpu.model] if pool.gpu is not None else None
    nvme = pool.local_nvme
    return ComputePoolPlan(
        name=pool.name,
        nodes=pool.nodes,
        gpus_per_node=pool.gpus_per_node,
        gpu_model=pool.gpu.model if pool.gpu is not None else None,
        gpu_nvswitch=gpu.nvswitch if gpu is not None else False,
        ram_GiB=pool.ram_GiB,
        topology_file=pool.topology_file,
        local_nvme_mount=nvme.mount_point if nvme is not None and nvme.count else None,
    )


def build_compute_pools(spec: ClusterSpec) -> tuple[ComputePoolPlan, ...]:
    return tuple(_pool(spec, p) for p in spec.compute.pools)


def mover_spec(spec: ClusterSpec) -> dict[str, Any]:
    """The spec as the stack file sets it (JSON data), less the fields that look like credentials."""
    return spec.model_dump(mode="json", exclude_unset=True, exclude=_LEFT_OUT)


def build_kubernetes(spec: ClusterSpec) -> KubernetesPlan:
    k = spec.kubernetes
    return KubernetesPlan(
        gpu_node_label=k.gpu_node_label,
        system_namespace=k.system_namespace,
        storage_namespace=k.storage_namespace,
        training_namespace=k.training_namespace,
        health_namespace=k.health_namespace,
        models_namespace=k.models_namespace,
        storage_class=k.storage_class,
        mover_image=k.images.datamover or kubernetes().dataflow.mover_image.value,
        health_image=k.images.health or kubernetes().health.image.value,
        mover_spec=mover_spec(spec),
    )
