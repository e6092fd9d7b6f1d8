"""Host names: the one rule by which the planner names the hosts it generates and the spec checks them.

A generated name is <prefix><number>: hosts of one family (a compute pool, the MDS, the OSS, a router group, ...)
share a prefix and are numbered from 1, each number zero-padded to the family's width. kiln.plan.topology names
every host through a HostFamily of this module and kiln.spec.checks compares the same families for collisions,
so the generator and the checker cannot drift (tests/unit/spec/test_naming.py). It lives in kiln.spec because the
spec layer may not import kiln.plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from kiln import knowledge
from kiln.spec.models import ClusterSpec, ComputePool, LnetRouterGroup

POOL_DIGITS = 3  # compute hosts: gpu001
SERVER_DIGITS = 2  # servers, routers and object-store hosts: oss01
OBJECTSTORE_PREFIX = "s3-"
#: Bare-metal KRaft nodes: brokers (and combined nodes) kafka-01, dedicated controllers kraft-01.
KAFKA_BROKER_PREFIX = "kafka-"
KAFKA_CONTROLLER_PREFIX = "kraft-"


@dataclass(frozen=True, slots=True, kw_only=True)
class HostFamily:
    """The names one part of the spec generates: prefix + 1..count, zero-padded to `width` digits."""

    path: str  # the spec field a collision is reported on (the prefix, or the count of a fixed prefix)
    prefix: str
    width: int
    count: int

    def name(self, number: int) -> str:
        return f"{self.prefix}{number:0{self.width}d}"

    def names(self) -> list[str]:
        return [self.name(i) for i in range(1, self.count + 1)]


def _width(count: int, digits: int) -> int:
    """At least `digits` digits, more when the family's count needs them."""
    return max(digits, len(str(count)))


def pool_prefix(pool: ComputePool) -> str:
    """Host-name prefix of a compute pool: its hostname_prefix, default its name."""
    return pool.hostname_prefix or pool.name


def router_prefix(group: LnetRouterGroup) -> str:
    """Host-name prefix of a router group: its hostname_prefix, default <name>-."""
    return group.hostname_prefix or f"{group.name}-"


def pool_family(index: int, pool: ComputePool) -> HostFamily:
    """The hosts of compute.pools[index]."""
    return HostFamily(path=f"compute.pools[{index}].hostname_prefix", prefix=pool_prefix(pool),
                      width=_width(pool.nodes, POOL_DIGITS), count=pool.nodes)


def server_family(role: str, count: int) -> HostFamily:
    """The Lustre servers of one role (mgs, mds, oss): mds01, mds02, ..."""
    path = "lustre.mgs.mode" if role == "mgs" else f"lustre.{role}.nodes"
    return HostFamily(path=path, prefix=role, width=_width(count, SERVER_DIGITS), count=count)


def router_family(index: int, group: LnetRouterGroup) -> HostFamily:
    """The routers of lustre.routers[index]."""
    return HostFamily(path=f"lustre.routers[{index}].hostname_prefix", prefix=router_prefix(group),
                      width=_width(group.count, SERVER_DIGITS), count=group.count)


def objectstore_family(count: int) -> HostFamily:
    """The SeaweedFS hosts kiln deploys: s3-01, s3-02, ..."""
    return HostFamily(path="objectstore.nodes", prefix=OBJECTSTORE_PREFIX, width=_width(count, SERVER_DIGITS),
                      count=count)


def kafka_families(spec: ClusterSpec) -> list[HostFamily]:
    """The bare-metal KRaft nodes (pipeline.kafka, mode baremetal, brokers given as a number): dedicated controllers
    kraft-NN then brokers kafka-NN, or combined nodes kafka-NN (as many as the larger of brokers and controllers)."""
    kc = spec.pipeline.kafka if spec.pipeline is not None else None
    if kc is None or kc.mode != "baremetal" or kc.brokers == "auto":
        return []
    controllers = knowledge.load().kafka.controllers.value if kc.controllers == "auto" else kc.controllers
    path = "pipeline.kafka.brokers"
    if kc.combined:
        count = max(kc.brokers, controllers)
        return [HostFamily(path=path, prefix=KAFKA_BROKER_PREFIX, width=_width(count, SERVER_DIGITS), count=count)]
    return [HostFamily(path="pipeline.kafka.controllers", prefix=KAFKA_CONTROLLER_PREFIX,
                       width=_width(controllers, SERVER_DIGITS), count=controllers),
            HostFamily(path=path, prefix=KAFKA_BROKER_PREFIX, width=_width(kc.brokers, SERVER_DIGITS),
                       count=kc.brokers)]


def host_families(spec: ClusterSpec) -> list[HostFamily]:
    """Every family of names the plan generates for `spec`: compute pools, a standalone MGS, the MDS (none when
    the MDTs live on OSS hosts), the OSS, SeaweedFS hosts, LNet routers (last: the order the spec checks report
    collisions in)."""
    lu = spec.lustre
    out = [pool_family(i, p) for i, p in enumerate(spec.compute.pools)]
    if lu.mgs.mode == "standalone":
        out.append(server_family("mgs", 1))
    if not lu.mds.colocated_with_oss:
        out.append(server_family("mds", lu.mds.nodes))
    out.append(server_family("oss", lu.oss.nodes))
    if spec.objectstore.backend == "seaweedfs":
        out.append(objectstore_family(spec.objectstore.nodes))
    return out + [router_family(i, rg) for i, rg in enumerate(lu.routers)] + kafka_families(spec)
