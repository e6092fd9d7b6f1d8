"""The IP subnet of each LNet network and how many storage addresses each network needs.

Each network of `lustre.lnet` takes its addresses from its `subnet`, else from `networks.storage`: the whole of it
while every network has `hosts: all` (one fabric), and on a routed filesystem (networks of one side only) a slice
of it per network, so the fabrics the LNet routers join are separate IP networks. The spec's checks count addresses
per subnet with these functions and the planner hands them out from the same subnets (kiln/plan/topology.py); the
spec layer holds them because kiln.spec does not import kiln.plan.
"""

from __future__ import annotations

import ipaddress
from collections import Counter

from kiln.spec.models import ClusterSpec, NicGroup

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: The smallest slice worth handing out: a network address, the gateway (.1) and at least two hosts.
MIN_SLICE_ADDRESSES = 4


def storage_slices(storage: IPNetwork, count: int) -> list[IPNetwork]:
    """`storage` split into the next power of two at or above `count` equal subnets, in address order; [] when
    the slices would be smaller than MIN_SLICE_ADDRESSES."""
    bits = (count - 1).bit_length()
    if storage.num_addresses >> bits < MIN_SLICE_ADDRESSES:
        return []
    return list(storage.subnets(prefixlen_diff=bits))


def lnet_subnets(spec: ClusterSpec) -> dict[str, str]:
    """LNet network name → the CIDR its addresses come from (lustre.lnet[].subnet, or derived: module docstring)."""
    lu = spec.lustre
    storage = ipaddress.ip_network(spec.networks.storage)
    slices = storage_slices(storage, len(lu.lnet)) if lu.routed else []
    return {n.name: n.subnet or str(slices[i] if slices else storage) for i, n in enumerate(lu.lnet)}


def reserved(spec: ClusterSpec, family: str, hosts: int) -> int:
    """Hosts' addresses a family takes: its hosts, or its networks.reserve where that is larger."""
    return max(hosts, spec.networks.reserve.get(family, 0))


def address_families(spec: ClusterSpec) -> list[tuple[str, int]]:
    """Each host family a reserve may name, with its host count, in the order the planner addresses them. A list,
    not a mapping: a compute pool may be named like a server family (a pool called mds), and both count."""
    lu = spec.lustre
    out = [(p.name, p.nodes) for p in spec.compute.pools]
    if lu.mgs.mode == "standalone":
        out.append(("mgs", 1))
    if not lu.mds.colocated_with_oss:
        out.append(("mds", lu.mds.nodes))
    out.append(("oss", lu.oss.nodes))
    out += [(rg.name, rg.count) for rg in lu.routers]
    if spec.objectstore.backend == "seaweedfs" and spec.objectstore.nics is not None:
        out.append(("objectstore", spec.objectstore.nodes))
    return out


def _spread(group_ports: int, nets: list[str], hosts: int, out: Counter[str]) -> None:
    """Port j of each of `hosts` hosts goes on nets[j mod len(nets)], as kiln/plan/topology.py assigns NIDs."""
    for j in range(group_ports if nets else 0):
        out[nets[j % len(nets)]] += hosts


def ports_per_net(spec: ClusterSpec) -> Counter[str]:
    """Storage addresses each LNet network needs: every host's storage ports (storage NICs and rail ports shared
    with storage) on the networks of its side, for the hosts each family reserves (networks.reserve)."""
    lu = spec.lustre
    out: Counter[str] = Counter()
    clients, servers = lu.lnet_names("clients"), lu.lnet_names("servers")
    for p in spec.compute.pools:
        _spread(p.storage_nics.count + len(p.shared_storage_rails), clients, reserved(spec, p.name, p.nodes), out)
    server_groups: list[tuple[NicGroup, int]] = [(lu.oss.nics, reserved(spec, "oss", lu.oss.nodes))]
    if not lu.mds.colocated_with_oss:
        server_groups.append((lu.mds.nics, reserved(spec, "mds", lu.mds.nodes)))
    if lu.mgs.mode == "standalone":
        server_groups.append((lu.mds.nics, reserved(spec, "mgs", 1)))
    os_ = spec.objectstore
    if os_.backend == "seaweedfs" and os_.nics is not None:
        server_groups.append((os_.nics, reserved(spec, "objectstore", os_.nodes)))
    for group, hosts in server_groups:
        _spread(group.count, servers, hosts, out)
    for rg in lu.routers:
        _spread(rg.client_nics.count, [rg.client_net], reserved(spec, rg.name, rg.count), out)
        _spread(rg.server_nics.count, [rg.server_net], reserved(spec, rg.name, rg.count), out)
    return out
