"""Which Kubernetes JSON schemas (shipped by kubernetes-validate) validate a stack's manifests.

Rule: the stack's minor version when the installed kubernetes-validate ships it; otherwise the newest
shipped minor below it (an object valid against an older API schema uses no field a newer server
lacks); a stack newer than every shipped schema uses the newest one; a stack older than every shipped
schema is an error (upgrade the spec or pin an older kubernetes-validate).
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
from kubernetes_validate import utils as kv_utils  # type: ignore[import-untyped]


def _minor(v: str) -> tuple[int, int]:
    major, minor = v.split(".")[:2]
    return int(major), int(minor)


def shipped_versions() -> list[str]:
    return sorted({".".join(v.split(".")[:2]) for v in kv_utils.all_versions()}, key=_minor)


def schema_version(k8s_version: str, shipped: list[str] | None = None) -> str:
    versions = shipped if shipped is not None else shipped_versions()
    want = _minor(k8s_version)
    older = [v for v in versions if _minor(v) <= want]
    if not older:
        raise ValueError(f"kubernetes {k8s_version} is older than every schema kubernetes-validate ships "
                         f"({versions[0]}..{versions[-1]}); fix: raise kubernetes.version in the spec")
    return older[-1]


def validate(obj: dict[str, Any], k8s_version: str) -> str:
    """Validate one built-in object strictly (unknown fields fail); returns the schema version used."""
    version = schema_version(k8s_version)
    kubernetes_validate.validate(obj, f"{version}.0", strict=True)
    return version
