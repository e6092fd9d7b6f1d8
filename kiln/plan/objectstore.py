"""The object store's plan: hosts, endpoint, buckets, capacity."""

from __future__ import annotations

from kiln import knowledge
from kiln.plan.model import Bucket, Host, ObjectStorePlan
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec

SEAWEEDFS_VERSION = "3.39"  # pinned: scripts/build-tools.sh builds this release (see its header for why)
S3_PORT = 8333  # SeaweedFS S3 gateway default port


def _copies(replication: str) -> int:
    """SeaweedFS replication 'xyz' keeps 1 + x + y + z copies of each volume."""
    return 1 + sum(int(c) for c in replication)


def build_objectstore(spec: ClusterSpec, hosts: tuple[Host, ...]) -> tuple[ObjectStorePlan, list[SpecIssue]]:
    os_ = spec.objectstore
    issues: list[SpecIssue] = []
    buckets = tuple(Bucket(b.name, b.purpose) for b in os_.buckets)
    if os_.backend == "external":
        assert os_.endpoint is not None
        return ObjectStorePlan(
            "external",
            os_.endpoint,
            (),
            (),
            buckets,
            0.0,
            os_.capacity_TB,
            os_.capacity_TB,
            "",
            os_.access_key_id,
            os_.credentials_secret,
            0,
            "",
        ), issues
    assert os_.disks is not None
    names = tuple(h.name for h in hosts if h.role == "objectstore")
    raw = os_.nodes * os_.disks.count * knowledge.load().nvme[os_.disks.device].capacity_TB
    copies = _copies(os_.replication)
    usable = raw / copies
    if usable < os_.capacity_TB:
        issues.append(
            SpecIssue(
                "objectstore.capacity_TB",
                os_.capacity_TB,
                f"{os_.nodes} nodes × {os_.disks.count} × {os_.disks.device} give {raw:.3f} TB raw, "
                f"{usable:.3f} TB usable "
                f"with replication {os_.replication} ({copies} copies)",
                "add nodes or disks, or lower capacity_TB",
            )
        )
    endpoint = f"http://{names[0]}:{S3_PORT}"
    # Raft needs a majority: three masters survive one loss; two would not survive any.
    masters = names[:3] if len(names) >= 3 else names[:1]
    return ObjectStorePlan(
        "seaweedfs",
        endpoint,
        names,
        masters,
        buckets,
        raw,
        usable,
        os_.capacity_TB,
        os_.replication,
        os_.access_key_id,
        os_.credentials_secret,
        S3_PORT,
        SEAWEEDFS_VERSION,
    ), issues
