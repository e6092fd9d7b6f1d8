"""Upstream Helm charts as Flux objects: a HelmRelease and its source (HelmRepository or GitRepository).

Chart, version and source are pins in kiln/knowledge/kubernetes.yaml; the component modules give the
values. The Pulumi program reads the same objects back with `helm_chart()` and installs the chart as a
`kubernetes.helm.v3.Release`, so `kiln render` (GitOps) and `pulumi up` install the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kiln.knowledge.kubernetes import kubernetes
from kiln.render.manifests.context import ComponentKind, Ctx, Obj, obj

HELM_REPOSITORY = "HelmRepository"
GIT_REPOSITORY = "GitRepository"
SOURCE_KINDS = frozenset({HELM_REPOSITORY, GIT_REPOSITORY})


@dataclass(frozen=True, slots=True)
class HelmChart:
    """What a Flux HelmRelease (with its source) says about a chart: the Pulumi Release's inputs.

    A chart from a Helm repository has `repository_url` and `version`; a chart from a git repository has
    `git_url`, `git_tag` and `chart` is its path in that repository (its version is the one at the tag).
    """

    release_name: str
    namespace: str
    chart: str
    version: str | None
    repository_url: str | None
    values: Obj
    git_url: str | None = None
    git_tag: str | None = None


def _source(c: Ctx, component: ComponentKind, chart_key: str) -> Obj:
    k = kubernetes()
    chart = k.charts[chart_key]
    meta_ns = c.system
    if chart.repository is not None:
        spec: Obj = {"interval": k.flux.repository_interval, "url": k.helm_repositories[chart.repository].url}
        return obj(k.flux.helm_repository_api, HELM_REPOSITORY, c.meta(component, dns(chart.repository), meta_ns),
                   spec=spec)
    assert chart.git_repository is not None
    git = k.git_repositories[chart.git_repository]
    spec = {"interval": k.flux.repository_interval, "url": git.url, "ref": {"tag": git.tag}}
    return obj(k.flux.git_repository_api, GIT_REPOSITORY, c.meta(component, dns(chart.git_repository), meta_ns),
               spec=spec)


def dns(key: str) -> str:
    return key.replace("_", "-")


def helm_source(c: Ctx, component: ComponentKind, chart_key: str) -> Obj:
    """The Flux source object (HelmRepository or GitRepository) a chart pin names, in the system namespace."""
    return _source(c, component, chart_key)


def helm_release(c: Ctx, component: ComponentKind, chart_key: str, values: Obj, namespace: str | None = None) -> Obj:
    """A Flux HelmRelease of a pinned chart; it lives in the system namespace and installs into `namespace`."""
    k = kubernetes()
    chart = k.charts[chart_key]
    if chart.repository is not None:
        chart_spec: Obj = {"chart": chart.chart, "version": chart.version,
                           "sourceRef": {"kind": HELM_REPOSITORY, "name": dns(chart.repository),
                                         "namespace": c.system}}
    else:
        assert chart.git_repository is not None and chart.path is not None
        # NOTE: Flux takes a GitRepository chart's version from the Chart.yaml at the tag.
        chart_spec = {"chart": chart.path,
                      "sourceRef": {"kind": GIT_REPOSITORY, "name": dns(chart.git_repository), "namespace": c.system}}
    spec: Obj = {"interval": k.flux.interval, "releaseName": chart.release}
    if namespace is not None and namespace != c.system:
        spec["targetNamespace"] = namespace
    spec.update({
        "chart": {"spec": chart_spec},
        "install": {"crds": "CreateReplace"},
        "upgrade": {"crds": "CreateReplace"},
        "values": values,
    })
    return obj(k.flux.helm_release_api, "HelmRelease", c.meta(component, chart.release, c.system), spec=spec)


def helm_chart(release: Obj, objects: Sequence[Obj]) -> HelmChart:
    """The chart a Flux HelmRelease installs, resolved against its source among `objects`."""
    spec = release["spec"]
    chart = spec["chart"]["spec"]
    ref = chart["sourceRef"]
    ns = release["metadata"]["namespace"]
    src = next(o for o in objects if o["kind"] == ref["kind"] and o["metadata"]["name"] == ref["name"]
               and o["metadata"].get("namespace") == ref.get("namespace", ns))
    name = str(spec.get("releaseName", release["metadata"]["name"]))
    target = str(spec.get("targetNamespace", ns))
    values = dict(spec.get("values", {}))
    if ref["kind"] == GIT_REPOSITORY:
        return HelmChart(release_name=name, namespace=target, chart=str(chart["chart"]), version=None,
                         repository_url=None, values=values, git_url=str(src["spec"]["url"]),
                         git_tag=str(src["spec"]["ref"]["tag"]))
    return HelmChart(
        release_name=name, namespace=target, chart=str(chart["chart"]), version=str(chart["version"]),
        repository_url=str(src["spec"]["url"]), values=values,
    )
