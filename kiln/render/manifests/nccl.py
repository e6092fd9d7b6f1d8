"""NcclConfig: the plan's NCCL environment per pool, as ConfigMaps (envFrom keys and /etc/nccl.conf)."""

from __future__ import annotations

from kiln.render.manifests.context import NCCL_CONFIG, Ctx, Obj, obj, pool_label
from kiln.spec.types import dns_name


def nccl_configmap_name(pool: str) -> str:
    return f"kiln-nccl-{dns_name(pool)}"


def nccl_config(c: Ctx) -> list[Obj]:
    """One ConfigMap per pool: the plan's NCCL environment as keys (envFrom) and as /etc/nccl.conf."""
    out = []
    for pool in c.plan.nccl:
        data = dict(pool.env)
        data["nccl.conf"] = "".join(f"{k}={v}\n" for k, v in pool.env.items())
        meta = c.meta(NCCL_CONFIG, nccl_configmap_name(pool.pool), c.training, labels={pool_label(): pool.pool})
        out.append(obj("v1", "ConfigMap", meta, data=data))
    return out
