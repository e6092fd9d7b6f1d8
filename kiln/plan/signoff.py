"""Which acceptance checks a sign-off needs: the evidence the plan says must exist.

A check is *required* when the plan has what it measures: a pool with GPUs requires the GPU and NCCL rows, the
Lustre clients require the storage rows, a SeaweedFS object store requires the object-store rows. A check about a
part the plan has none of (RDMA on a tcp fabric, local NVMe on a pool without drives) is *optional*: NOT
APPLICABLE there is what the plan expects, not missing evidence. `kiln verify` says INCOMPLETE while a required
check has no measurement (kiln/verify/verdict.py).

What a check is about is its target's `requires` (the parts a host must have: gpu, rdma, lustre, nvme,
objectstore, clock); a check that requires nothing is about what every cluster of the kit has, and is required.
"""

from __future__ import annotations

import dataclasses

from kiln.plan.groups import pool_group
from kiln.plan.model import AcceptanceTarget
from kiln.spec.models import ClusterSpec, ComputePool

#: Why a check that requires no part is still required, by its area (the check id's first word).
AREA_WHY = {
    "conformance": "the hosts must hold the planned state",
    "security": "the planned exposure of the object store must hold",
    "network": "the storage network carries the Lustre and S3 traffic",
    "monitoring": "the plan deploys monitoring",
    "health": "every compute host runs kiln-health",
}


def _pools(spec: ClusterSpec, by_group: dict[str, ComputePool], group: str | None) -> list[ComputePool]:
    """The compute pools a target's group covers: its pool, or every pool."""
    mine = by_group.get(group or "")
    return [mine] if mine is not None else list(spec.compute.pools)


def _listed(items: list[str], most: int = 3) -> str:
    return "; ".join(items[:most]) + (f"; … {len(items) - most} more pools" if len(items) > most else "")


def _gpu(spec: ClusterSpec, pools: list[ComputePool]) -> tuple[bool, str]:
    have = [f"pool {p.name}: {p.nodes} nodes × {p.gpu.count} {p.gpu.model}" for p in pools if p.gpu and p.gpu.count]
    return (True, _listed(have)) if have else (False, "the plan has no GPUs here (storage-only pools)")


def _rdma(spec: ClusterSpec, pools: list[ComputePool]) -> tuple[bool, str]:
    if spec.fabric.kind == "tcp":
        return False, "the fabric is tcp: the plan has no RDMA device"
    return True, f"the fabric is {spec.fabric.kind}: its RDMA ports carry NCCL and LNet"


def _lustre(spec: ClusterSpec, pools: list[ComputePool]) -> tuple[bool, str]:
    clients = sum(p.nodes for p in spec.compute.pools)
    return True, f"{clients} Lustre clients mount {spec.lustre.fsname} at {spec.lustre.mount_point}"


def _nvme(spec: ClusterSpec, pools: list[ComputePool]) -> tuple[bool, str]:
    have = [f"pool {p.name}: {p.local_nvme.count} × {p.local_nvme.device}" for p in pools
            if p.local_nvme and p.local_nvme.count]
    return (True, _listed(have)) if have else (False, "the plan has no local NVMe here")


def _objectstore(spec: ClusterSpec, pools: list[ComputePool]) -> tuple[bool, str]:
    store = spec.objectstore
    if store.backend == "seaweedfs":
        return True, f"kiln deploys the data lake: SeaweedFS on {store.nodes} host{'s' if store.nodes != 1 else ''}"
    return True, f"the data lake is the external S3 endpoint {store.endpoint}"


def _clock(spec: ClusterSpec, pools: list[ComputePool]) -> tuple[bool, str]:
    return True, "every host keeps its own synchronised time (logs, leases, checkpoints)"


#: The parts a target can require, and whether (and why) the plan has each for the target's pools.
PARTS = {"gpu": _gpu, "rdma": _rdma, "lustre": _lustre, "nvme": _nvme, "objectstore": _objectstore, "clock": _clock}


def sign_off_need(spec: ClusterSpec, target: AcceptanceTarget,
                  by_group: dict[str, ComputePool] | None = None) -> tuple[bool, str]:
    """Whether a sign-off needs `target`'s evidence, and why (or why not)."""
    if not target.requires:
        return True, AREA_WHY.get(target.check.split(".", 1)[0], "the plan includes this check")
    pools = _pools(spec, by_group if by_group is not None else _by_group(spec), target.group)
    found = [PARTS[p](spec, pools) if p in PARTS else (True, f"the plan needs {p}") for p in target.requires]
    missing = [why for have, why in found if not have]
    if missing:
        return False, "; ".join(missing)
    return True, "; ".join(why for _, why in found)


def _by_group(spec: ClusterSpec) -> dict[str, ComputePool]:
    return {pool_group(p.name): p for p in spec.compute.pools}


def mark_required(spec: ClusterSpec, targets: tuple[AcceptanceTarget, ...]) -> tuple[AcceptanceTarget, ...]:
    """The targets with `required` and `required_why` set from the plan."""
    by_group = _by_group(spec)
    out = []
    for t in targets:
        required, why = sign_off_need(spec, t, by_group)
        out.append(dataclasses.replace(t, required=required, required_why=why))
    return tuple(out)
