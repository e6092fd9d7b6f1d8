"""One builder object (a plain dict) → one pulumi_kubernetes resource.

Typed classes where pulumi_kubernetes has them, `apiextensions.CustomResource` for custom resources,
`helm.v3.Release` for a Flux HelmRelease (chart, version, repository and values read from it with
kiln.render.manifests.helm_chart). A HelmRepository or GitRepository is only the HelmRelease's source: no
resource. A chart published only in a git repository (the HPE Lustre CSI driver) is checked out at its
pinned tag into a local cache (`checkout_chart`) and installed from that path.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kiln.render.manifests import SOURCE_KINDS, HelmChart, Obj, helm_chart

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
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("storage.k8s.io/v1", "CSIDriver"): k8s.storage.v1.CSIDriver,
}

HELM_RELEASE = "HelmRelease"
CHART_CACHE = Path.home() / ".cache" / "kiln" / "charts"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def typed_kwargs(obj: Obj) -> dict[str, Any]:
    """Top-level fields of an object as keyword arguments of its typed class (stringData → string_data)."""
    return {_snake(k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def is_source_only(obj: Obj) -> bool:
    return obj["kind"] in SOURCE_KINDS


def chart_checkout_dir(chart: HelmChart) -> Path:
    """Where `checkout_chart` keeps the clone of a git-published chart's pinned tag."""
    assert chart.git_url is not None and chart.git_tag is not None
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", chart.git_url.removeprefix("https://"))
    return CHART_CACHE / f"{slug}@{chart.git_tag}"


def checkout_chart(chart: HelmChart) -> str:
    """Local path of a git-published chart: a shallow clone of its pinned tag, made once per tag."""
    assert chart.git_url is not None and chart.git_tag is not None
    checkout = chart_checkout_dir(chart)
    if not (checkout / ".git").is_dir():
        checkout.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--branch", chart.git_tag, chart.git_url,
                               str(checkout)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise pulumi.RunError(f"cannot fetch chart {chart.chart} from {chart.git_url} at {chart.git_tag}: "
                                  f"{proc.stderr.strip()[-300:]}; clone it to {checkout} and run again")
    return str(checkout / chart.chart)


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
        if chart.git_url is not None:
            source: dict[str, Any] = {"chart": checkout_chart(chart)}
        else:
            source = {"chart": chart.chart, "version": chart.version,
                      "repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository_url)}
        return k8s.helm.v3.Release(
            name,
            name=chart.release_name,
            **source,
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
