"""The object store's plan: hosts, masters, endpoint, buckets, capacity and volume sizing."""

from __future__ import annotations

from kiln import knowledge
from kiln.plan.model import Bucket, Host, ObjectStorePlan
from kiln.plan.sizing import replica_count
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec


def seaweedfs() -> knowledge.SeaweedFs:
    """The SeaweedFS figures of kiln/knowledge/objectstore.yaml."""
    return knowledge.load().seaweedfs


def volume_sizing(node_capacity_TB: float, collections: int) -> tuple[int, int]:
    """(volume size limit MB, volumes per server): enough slots for every collection to grow."""
    slots = seaweedfs().volume_growth_per_collection.value * collections
    capacity_MB = node_capacity_TB * 1e6
    size = int(capacity_MB // slots)
    size = max(seaweedfs().min_volume_size_limit_MB.value, min(seaweedfs().default_volume_size_limit_MB.value, size))
    return size, max(slots, int(capacity_MB // size))


def build_objectstore(spec: ClusterSpec, hosts: tuple[Host, ...]) -> tuple[ObjectStorePlan, list[SpecIssue]]:
    os_ = spec.objectstore
    issues: list[SpecIssue] = []
    buckets = tuple(Bucket(name=b.name, purpose=b.purpose) for b in os_.buckets)
    if os_.backend == "external":
        assert os_.endpoint is not None
        return ObjectStorePlan(
            backend="external",
            endpoint=os_.endpoint,
            hosts=(),
            masters=(),
            buckets=buckets,
            raw_capacity_TB=0.0,
            usable_capacity_TB=os_.capacity_TB,
            capacity_TB=os_.capacity_TB,
            replication="",
            access_key_id=os_.access_key_id,
            credentials_secret=os_.credentials_secret,
            s3_port=0,
            version="",
            volume_size_limit_MB=0,
            volumes_per_server=0,
        ), issues
    assert os_.disks is not None
    servers = [h for h in hosts if h.role == "objectstore"]
    names = tuple(h.name for h in servers)
    node_TB = os_.disks.count * knowledge.load().nvme[os_.disks.device].capacity_TB
    raw = os_.nodes * node_TB
    copies = replica_count(os_.replication)
    usable = raw / copies
    if usable < os_.capacity_TB:
        issues.append(
            SpecIssue(
                "objectstore.capacity_TB",
                os_.capacity_TB,
                f"{os_.nodes} nodes × {os_.disks.count} × {os_.disks.device} give {raw:.3f} TB raw, "
                f"{usable:.3f} TB usable with replication {os_.replication} ({copies} copies)",
                "add nodes or disks, or lower capacity_TB",
            )
        )
    port = knowledge.load().ports.seaweedfs.s3.value
    # The gateway listens on the storage network; the endpoint names that address, not a host name
    # that may resolve to the management network.
    storage = next((n.address for n in servers[0].nics if n.role == "storage" and n.address), names[0])
    # Raft needs a majority: three masters survive one loss; two would not survive any.
    masters = names[:3] if len(names) >= 3 else names[:1]
    size, count = volume_sizing(node_TB, len(buckets) + seaweedfs().extra_collections.value)
    return ObjectStorePlan(
        backend="seaweedfs",
        endpoint=f"http://{storage}:{port}",
        hosts=names,
        masters=masters,
        buckets=buckets,
        raw_capacity_TB=raw,
        usable_capacity_TB=usable,
        capacity_TB=os_.capacity_TB,
        replication=os_.replication,
        access_key_id=os_.access_key_id,
        credentials_secret=os_.credentials_secret,
        s3_port=port,
        version=spec.versions.seaweedfs,
        volume_size_limit_MB=size,
        volumes_per_server=count,
    ), issues
