"""One builder object (a plain dict) → one pulumi_kubernetes resource.

Typed classes where pulumi_kubernetes has them, `apiextensions.CustomResource` for custom resources,
`helm.v3.Release` for a Flux HelmRelease (chart, version, repository and values read from it with
kiln.render.manifests.helm_chart). A HelmRepository is only the HelmRelease's source: no resource.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kiln.render.manifests import Obj, helm_chart

# (apiVersion, kind) → typed resource class.
TYPED: dict[tuple[str, str], Callable[..., pulumi.CustomResource]] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "PersistentVolume"): k8s.core.v1.PersistentVolume,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("apps/v1", "StatefulSet"): k8s.apps.v1.StatefulSet,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("storage.k8s.io/v1", "CSIDriver"): k8s.storage.v1.CSIDriver,
}

HELM_RELEASE = "HelmRelease"
HELM_REPOSITORY = "HelmRepository"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def typed_kwargs(obj: Obj) -> dict[str, Any]:
    """Top-level fields of an object as keyword arguments of its typed class (stringData → string_data)."""
    return {_snake(k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def is_source_only(obj: Obj) -> bool:
    return obj["kind"] == HELM_REPOSITORY


def instantiate(
    name: str,
    obj: Obj,
    objects: Sequence[Obj],
    opts: pulumi.ResourceOptions,
    overrides: Mapping[str, Any] | None = None,
) -> pulumi.CustomResource:
    """Create the resource for `obj`; `overrides` replaces top-level fields (a Secret's stringData)."""
    if obj["kind"] == HELM_RELEASE:
        chart = helm_chart(obj, objects)
        return k8s.helm.v3.Release(
            name,
            name=chart.release_name,
            chart=chart.chart,
            version=chart.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository_url),
            namespace=chart.namespace,
            create_namespace=False,
            values=chart.values,
            opts=opts,
        )
    kwargs = typed_kwargs(obj)
    kwargs.update({_snake(k): v for k, v in (overrides or {}).items()})
    cls = TYPED.get((str(obj["apiVersion"]), str(obj["kind"])))
    if cls is not None:
        return cls(name, opts=opts, **kwargs)
    return k8s.apiextensions.CustomResource(
        name, api_version=str(obj["apiVersion"]), kind=str(obj["kind"]), opts=opts, **kwargs
    )
