"""The acceptance checks, one class per plan target check id (importing this package registers them)."""

from __future__ import annotations

from kiln.verify.checks import (
    conformance,
    dataflow,
    dataflow_models,
    fabric,
    gpu,
    ha,
    monitoring,
    network,
    objectstore,
    objectstore_rolling,
    security,
    storage,
    stream,
)
from kiln.verify.checks.check import REGISTRY

__all__ = [
    "REGISTRY", "conformance", "dataflow", "dataflow_models", "fabric", "gpu", "ha", "monitoring", "network",
    "objectstore", "objectstore_rolling", "security", "storage", "stream",
]
