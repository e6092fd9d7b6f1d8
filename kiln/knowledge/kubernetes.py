"""kiln/knowledge/kubernetes.yaml as a typed model: the Kubernetes-side pins of the manifests builder.

Chart versions, images, label keys and the few rules that turn plan facts into chart values. Each entry
keeps its reason and source in the data; code reads `kubernetes().<section>.<entry>.value`.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Generic, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, model_validator

T = TypeVar("T")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Pin(_Model, Generic[T]):
    """One value with the reason it has that value and where it comes from."""

    value: T
    reason: str
    source: str


class Flux(_Model):
    helm_release_api: str
    helm_repository_api: str
    git_repository_api: str
    interval: str
    repository_interval: str
    source: str


class HelmRepository(_Model):
    url: str
    source: str


class GitRepository(_Model):
    """A chart that is published only in its project's git repository (Flux GitRepository source)."""

    url: str
    tag: str
    source: str


class Chart(_Model):
    """A pinned chart: from a Helm repository (`repository`) or from a git tag (`git_repository` + `path`)."""

    chart: str
    version: str  # the chart's own version (Chart.yaml `version`)
    release: str
    repository: str | None = None
    git_repository: str | None = None
    path: str | None = None
    values_file: str  # where the values the builder sets are defined, at the pinned version
    reason: str
    source: str

    @model_validator(mode="after")
    def _one_source(self) -> Chart:
        if (self.repository is None) == (self.git_repository is None):
            raise ValueError(f"chart {self.chart}: give exactly one of repository or git_repository")
        if self.git_repository is not None and not self.path:
            raise ValueError(f"chart {self.chart}: a git_repository chart needs its path in the repository")
        return self


class Image(_Model):
    repository: str
    image: str
    version: str


class Labels(_Model):
    pool: Pin[str]
    role: Pin[str]


class GpuOperator(_Model):
    driver_enabled: Pin[bool]
    use_host_mofed: Pin[bool]
    gds_on_rdma: Pin[bool]
    dcgm_exporter: Pin[bool]
    nfd: Pin[bool]


class NetworkOperatorImages(_Model):
    source: str
    rdma_shared_device_plugin: Image
    multus: Image
    cni_plugins: Image
    ipoib: Image
    whereabouts: Image


class NetworkOperator(_Model):
    nic_cluster_policy_name: Pin[str]
    rdma_hca_max: Pin[int]
    rdma_resource_prefix: Pin[str]
    rail_resource: Pin[str]
    images: NetworkOperatorImages
    cni_version: Pin[str]


class LustreCsi(_Model):
    driver: Pin[str]
    namespace: Pin[str]
    image: Pin[str]
    fstab_only_options: Pin[list[str]]


class SeaweedfsMasters(_Model):
    quorum_nodes: int
    single: int


class Seaweedfs(_Model):
    masters: Pin[SeaweedfsMasters]
    metadata_volume: Pin[str]
    data_dir: Pin[str]
    s3_config_secret: Pin[str]
    s3_config_key: Pin[str]
    s3_actions: Pin[list[str]]
    jwt_signing: Pin[dict[str, bool]]
    jwt_secret: Pin[str]
    jwt_config_key: Pin[str]
    bucket_image: Pin[str]


class Acceptance(_Model):
    nccl_tests_image: Pin[str]
    nccl_tests_args: Pin[str]
    fio_image: Pin[str]
    fio_numjobs: Pin[int]
    fio_block_size: Pin[str]
    fio_min_size_GiB: Pin[float]
    warp_image: Pin[str]
    warp_duration: Pin[str]
    mpi_operator: Pin[str]


class Dataflow(_Model):
    mover_image: Pin[str]


class Health(_Model):
    image: Pin[str]
    interval_s: Pin[int]
    gpu_runtime_class: Pin[str]
    gpu_node_taint: Pin[str]


class Resources(_Model):
    """A container's requests and limits (Kubernetes quantities). Requests below limits: the pod is Burstable, so
    the kubelet evicts BestEffort pods, never these, and these before Guaranteed training pods under pressure."""

    requests: dict[Literal["cpu", "memory"], str]
    limits: dict[Literal["cpu", "memory"], str]


class Workloads(_Model):
    """What kiln's own Jobs, Deployments and DaemonSets ask of a node, and how long a finished Job is kept."""

    mover: Pin[Resources]
    models: Pin[Resources]
    buckets: Pin[Resources]
    fio: Pin[Resources]
    warp: Pin[Resources]
    acceptance_ttl_s: Pin[int]
    job_ttl_s: Pin[int]
    cron_jobs_kept: Pin[int]


class KubernetesKnowledge(_Model):
    schema_: Literal[1]
    labels: Labels
    flux: Flux
    helm_repositories: dict[str, HelmRepository]
    git_repositories: dict[str, GitRepository]
    charts: dict[str, Chart]
    gpu_operator: GpuOperator
    network_operator: NetworkOperator
    lustre_csi: LustreCsi
    seaweedfs: Seaweedfs
    acceptance: Acceptance
    dataflow: Dataflow
    health: Health
    workloads: Workloads

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _schema_key(cls, data: object) -> object:
        if isinstance(data, dict) and "schema" in data:
            data = {("schema_" if k == "schema" else k): v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _sources_exist(self) -> KubernetesKnowledge:
        for key, chart in self.charts.items():
            if chart.repository is not None and chart.repository not in self.helm_repositories:
                raise ValueError(f"charts.{key}.repository: {chart.repository!r} is not in helm_repositories")
            if chart.git_repository is not None and chart.git_repository not in self.git_repositories:
                raise ValueError(f"charts.{key}.git_repository: {chart.git_repository!r} is not in git_repositories")
        return self


@cache
def kubernetes() -> KubernetesKnowledge:
    """kiln/knowledge/kubernetes.yaml, validated (a bad edit fails here, naming the field)."""
    text = resources.files("kiln.knowledge").joinpath("kubernetes.yaml").read_text(encoding="utf-8")
    return KubernetesKnowledge.model_validate(yaml.safe_load(text))
