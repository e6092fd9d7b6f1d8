"""The NVIDIA Network Operator (RDMA fabrics): chart values, the NicClusterPolicy and secondary networks."""

from __future__ import annotations

import ipaddress
import json

from kiln.knowledge.kubernetes import Image, kubernetes
from kiln.plan.model import Plan
from kiln.render.manifests.context import (
    GPU_NODE_STACK,
    Ctx,
    Obj,
    affinity_exists,
    obj,
    rail_interfaces,
    rail_network_name,
    rail_resource_name,
    storage_interfaces,
)
from kiln.render.manifests.helm import helm_release
from kiln.spec.types import dns_name


def network_operator_values() -> Obj:
    return {
        "deployCR": False,  # the NicClusterPolicy is built below from the plan
        "nfd": {"enabled": not kubernetes().gpu_operator.nfd.value},
        "sriovNetworkOperator": {"enabled": False},
    }


def rdma_device_plugin_config(plan: Plan) -> Obj:
    """rdmaSharedDevicePlugin config: one shared-device resource per compute rail, selected by ifName."""
    hca_max = kubernetes().network_operator.rdma_hca_max.value
    return {"configList": [
        {"resourceName": rail_resource_name(i), "rdmaHcaMax": hca_max, "selectors": {"ifNames": ifaces}}
        for i, ifaces in sorted(rail_interfaces(plan).items())
    ]}


def _image(ref: Image) -> Obj:
    return {"image": ref.image, "repository": ref.repository, "version": ref.version}


def _nic_cluster_policy(c: Ctx) -> Obj:
    no = kubernetes().network_operator
    imgs = no.images
    secondary: Obj = {"multus": _image(imgs.multus), "cniPlugins": _image(imgs.cni_plugins)}
    if c.plan.fabric == "infiniband":
        secondary["ipoib"] = _image(imgs.ipoib)
    secondary["ipamPlugin"] = _image(imgs.whereabouts)
    spec: Obj = {"nodeAffinity": affinity_exists(c.plan.kubernetes.gpu_node_label)["nodeAffinity"]}
    config = rdma_device_plugin_config(c.plan)
    if config["configList"]:
        spec["rdmaSharedDevicePlugin"] = {**_image(imgs.rdma_shared_device_plugin),
                                          "config": json.dumps(config, indent=2)}
    spec["secondaryNetwork"] = secondary
    return obj("mellanox.com/v1alpha1", "NicClusterPolicy", c.meta(GPU_NODE_STACK, no.nic_cluster_policy_name.value),
               spec=spec)


def _storage_ipam(c: Ctx) -> Obj:
    """Whereabouts range on the GPU nodes' storage subnet (on a routed filesystem their LNet network's), above
    every address the plan gave a host in it and every address a family reserves there (networks.reserve), so
    hosts added later never meet a pod's address."""
    client_nid = next((n.nid for h in c.plan.hosts if h.role == "compute" for n in h.nics if n.nid), None)
    cidr = c.plan.networks.subnet_of(client_nid)
    net = ipaddress.ip_network(cidr)
    used = [int(ipaddress.ip_address(n.address)) for h in c.plan.hosts for n in h.nics
            if n.address and ipaddress.ip_address(n.address) in net]
    start = max([*(u + 1 for u in used), int(net[2]) + c.plan.networks.storage_planned.get(cidr, 0)])
    end = int(net[-2])
    if start > end:
        raise ValueError(f"storage subnet {net} has no addresses left for pods after the planned hosts")
    addr = type(net.network_address)
    return {"type": "whereabouts", "range": str(net), "range_start": str(addr(start)), "range_end": str(addr(end))}


def _nad(c: Ctx, name: str, master: str, ipam: Obj | None) -> Obj:
    kind = "ipoib" if c.plan.fabric == "infiniband" else "macvlan"
    config: Obj = {"cniVersion": kubernetes().network_operator.cni_version.value, "name": name, "type": kind,
                   "master": master}
    if kind == "macvlan":
        config["mode"] = "bridge"
    if ipam is not None:
        config["ipam"] = ipam
    return obj("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", c.meta(GPU_NODE_STACK, name, c.training),
               spec={"config": json.dumps(config, indent=2)})


def _networks(c: Ctx) -> list[Obj]:
    """Secondary networks: one per storage interface (addresses on the storage subnet), one per rail.

    Rails carry no addresses in the plan: their NADs have no IPAM (IB verbs need none); RoCE users add
    one (docs/pulumi.md).
    """
    out = []
    ipam = _storage_ipam(c)
    for iface in storage_interfaces(c.plan):
        out.append(_nad(c, f"kiln-storage-{dns_name(iface)}", iface, ipam))
    for i, ifaces in sorted(rail_interfaces(c.plan).items()):
        out.append(_nad(c, rail_network_name(i), ifaces[0], None))
    return out


def network_operator(c: Ctx) -> list[Obj]:
    """The Network Operator chart (its repository is the GPU Operator's), the NicClusterPolicy and the NADs."""
    return [helm_release(c, GPU_NODE_STACK, "network_operator", network_operator_values()),
            _nic_cluster_policy(c), *_networks(c)]
