"""Which Kubernetes JSON schemas (shipped by kubernetes-validate) validate a stack's manifests.

Rule: the stack's minor version when the installed kubernetes-validate ships it; otherwise the newest
shipped minor below it (an object valid against an older API schema uses no field a newer server
lacks); a stack newer than every shipped schema uses the newest one; a stack older than every shipped
schema is an error (upgrade the spec or pin an older kubernetes-validate).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
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


def schema_dir(version: str) -> Path:
    """kubernetes-validate's strict schemas of one minor version (each refers to its `_definitions.json`)."""
    return Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{version}.0-local-strict"


def write_standalone(version: str, names: Iterable[str], out: Path) -> Path:
    """Write the named schemas (`deployment-apps-v1`, `configmap-v1`: kubeconform's file names) of one minor version
    with every `$ref` to `_definitions.json` inlined, as kubeconform reads them, under
    `out/v<version>.0-standalone-strict/`. kubeconform cannot follow the references kubernetes-validate's files make
    (`/api/_definitions.json#/$defs/...`); inlined, the schema is the same. Returns the directory."""
    src = schema_dir(version)
    defs = json.loads((src / "_definitions.json").read_text())["$defs"]
    target = out / f"v{version}.0-standalone-strict"
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        schema = json.loads((src / f"{name}.json").read_text())
        schema.pop("$id", None)  # the schema's URL is its file's
        (target / f"{name}.json").write_text(json.dumps(_inline(schema, defs, ())))
    return target


def _inline(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REFS):
            name = ref.rpartition("/")[2]
            # a definition inside itself (JSONSchemaProps) stays open: it cannot be written out
            return {} if name in seen else _inline(defs[name], defs, (*seen, name))
        return {k: _inline(v, defs, seen) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs, seen) for v in node]
    return node


_REFS = ("/api/_definitions.json#/$defs/", "#/$defs/")  # into _definitions.json, from a schema file or inside it
