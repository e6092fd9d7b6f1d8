"""Ansible inventory group names: the one place kiln spells them.

The plan puts each host in its groups (kiln.plan.topology); the inventory, the acceptance targets, the firewall
rules, the manifests and the checks select hosts by these names. The playbooks and roles (ansible/, roles/)
name the same groups; docs/inventory-contract.md lists them.
"""

from __future__ import annotations

COMPUTE = "kiln_compute"  # every compute host (GPU and storage-only pools)
LUSTRE_CLIENTS = "kiln_lustre_clients"
LUSTRE_SERVERS = "kiln_lustre_servers"  # MGS, MDS and OSS hosts
LUSTRE_MGS = "kiln_lustre_mgs"
LUSTRE_MDS = "kiln_lustre_mds"
LUSTRE_OSS = "kiln_lustre_oss"
LNET_ROUTERS = "kiln_lnet_routers"
OBJECTSTORE = "kiln_objectstore"  # SeaweedFS hosts kiln deploys
KAFKA = "kiln_kafka"  # bare-metal KRaft nodes (pipeline.kafka, mode baremetal)

POOL_PREFIX = "kiln_pool_"
ROUTER_PREFIX = "kiln_lnet_router_"

_LUSTRE_ROLES = {"mgs": LUSTRE_MGS, "mds": LUSTRE_MDS, "oss": LUSTRE_OSS}


def _identifier(name: str) -> str:
    """A spec name as part of a group name: Ansible group names are identifiers, so '-' becomes '_'."""
    return name.replace("-", "_")


def pool_group(pool: str) -> str:
    """The group of compute pool `pool`: kiln_pool_<name>."""
    return f"{POOL_PREFIX}{_identifier(pool)}"


def router_group(name: str) -> str:
    """The group of LNet router group `name`: kiln_lnet_router_<name>."""
    return f"{ROUTER_PREFIX}{_identifier(name)}"


def lustre_group(role: str) -> str:
    """The group of the Lustre servers of one role: mgs, mds or oss."""
    return _LUSTRE_ROLES[role]
