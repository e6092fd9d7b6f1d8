"""Pydantic models of one environment's spec: the `kiln:cluster` object of a Pulumi stack file.

Field descriptions are the stack reference (docs/stack-reference.md is generated from them).
Models check single fields; cross-field rules live in kiln.spec.checks so their errors can name
the exact path, the value and the fix.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kiln.spec.types import Name, Url

FSNAME_RE = r"^[A-Za-z][A-Za-z0-9_]{0,7}$"
IFACE_RE = r"^[A-Za-z0-9_.:-]{1,15}$"


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


Positive = Annotated[float, Field(gt=0)]


class NicGroup(Model):
    """A set of identical NICs in one host."""

    count: int = Field(ge=0, le=32, description="How many NICs of this model the host has.")
    nic: str = Field(description="NIC model from the hardware catalog (kiln/knowledge/hardware.yaml).")
    devices: list[str] | None = Field(
        default=None,
        description="RDMA device names (e.g. mlx5_0); default mlx5_<n> numbered after the rails before.",
    )
    interfaces: list[Annotated[str, Field(pattern=IFACE_RE)]] | None = Field(
        default=None, description="Network interface names (e.g. ib0); default derived per fabric."
    )


class Gpus(Model):
    model: str = Field(description="GPU model from the hardware catalog.")
    count: int = Field(ge=1, le=16, description="GPUs per node.")


class LocalNvme(Model):
    count: int = Field(ge=0, le=32, description="Local NVMe drives per node (scratch, stage-in cache).")
    device: str = Field(description="NVMe model from the hardware catalog.")
    mount_point: str = Field(
        default="/mnt/local-nvme",
        pattern=r"^/[^\s]*$",
        description="Where the drives (one filesystem, e.g. RAID0 as on DGX /raid) are mounted; fio tests it.",
    )


class ComputePool(Model):
    name: Name = Field(description="Pool name; also the Ansible group kiln_pool_<name>.")
    nodes: int = Field(ge=1, le=65536, description="Number of GPU nodes in the pool.")
    hostname_prefix: Name | None = Field(
        default=None, description="Host names are <prefix><NNN>; default the pool name."
    )
    gpu: Gpus = Field(description="GPU model and GPUs per node.")
    compute_rails: NicGroup = Field(description="NICs for GPU-to-GPU traffic (NCCL), one per rail.")
    storage_nics: NicGroup = Field(description="NICs that carry storage (LNet) traffic.")
    ram_GiB: int = Field(ge=1, le=65536, description="Host RAM per node, GiB.")
    cpu_cores: int = Field(default=64, ge=1, le=4096, description="CPU cores per node (lru_size, ksocklnd credits).")
    local_nvme: LocalNvme | None = Field(default=None, description="Local NVMe drives.")
    management_interface: Annotated[str, Field(pattern=IFACE_RE)] = Field(
        default="eth0", description="Interface for bootstrap/socket traffic (NCCL_SOCKET_IFNAME)."
    )
    nccl_hcas: list[str] | None = Field(
        default=None, description="HCAs NCCL may use; default every compute-rail device. Must be rail devices."
    )
    topology_file: str | None = Field(default=None, description="NCCL topology XML path on the node (VMs).")


class Compute(Model):
    pools: list[ComputePool] = Field(min_length=1, description="GPU node pools.")


class Fabric(Model):
    kind: Literal["infiniband", "roce", "tcp"] = Field(description="Transport of compute and storage fabrics.")
    topology: Literal["rail-optimized", "single-switch", "fat-tree"] = Field(
        default="rail-optimized", description="Compute fabric topology (NCCL_CROSS_NIC)."
    )
    oversubscription: float = Field(
        default=1.0,
        ge=1.0,
        le=16.0,
        description="Storage-fabric oversubscription on the compute side (e.g. 1.33 for 4:3).",
    )
    roce_gid_index: int = Field(default=3, ge=-1, le=255, description="RoCE GID index for NCCL; -1 lets NCCL choose.")
    mtu: int = Field(
        default=4096,
        ge=1280,
        le=9000,
        description="Link MTU of the storage network (the IB MTU on InfiniBand: IPoIB interfaces get it less 4 bytes).",
    )


class Networks(Model):
    management: str = Field(description="Management subnet (CIDR); one address per host, used by Ansible.")
    storage: str = Field(description="Storage subnet (CIDR); one address per storage NIC (LNet NIDs).")

    @field_validator("management", "storage")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            ipaddress.ip_network(v, strict=True)
        except ValueError as exc:
            raise ValueError(f"not a network in CIDR form ({exc}); fix: write it like 10.10.0.0/16") from exc
        return v


class Device(Model):
    """A storage device: a catalog name, or explicit figures."""

    catalog: str | None = Field(default=None, description="Device model from the hardware catalog.")
    kind: Literal["nvme", "ssd", "hdd"] = Field(default="nvme", description="Media class (tuning, metadata rate).")
    read_GBps: Positive | None = Field(default=None, description="Per-device sequential read, GB/s.")
    write_GBps: Positive | None = Field(default=None, description="Per-device sequential write, GB/s.")
    capacity_TB: Positive | None = Field(default=None, description="Per-device capacity, TB.")


class TargetGroup(Model):
    """Targets (MDTs or OSTs) per server node."""

    per_node: int = Field(ge=1, le=64, description="Targets per server node.")
    devices_per_target: int = Field(default=1, ge=1, le=64, description="Drives behind one target (RAID or zpool).")
    device: Device = Field(description="The drive model behind each target.")
    paths: list[str] | None = Field(
        default=None,
        description="Block device (or zpool/dataset) per target on each node; default /dev/disk/by-id/kiln-<kind><n>.",
    )


class Mgs(Model):
    mode: Literal["combined", "standalone"] = Field(
        default="combined", description="MGS on the first MDS (combined) or on its own node(s)."
    )
    device: str | None = Field(default=None, description="MGT device path (standalone or separate MGT).")


class Mds(Model):
    nodes: int = Field(ge=1, le=256, description="MDS nodes.")
    nics: NicGroup = Field(description="Storage NICs per MDS.")
    mdts: TargetGroup = Field(description="MDTs per MDS node.")


class Oss(Model):
    nodes: int = Field(ge=1, le=4096, description="OSS nodes.")
    nics: NicGroup = Field(description="Storage NICs per OSS.")
    osts: TargetGroup = Field(description="OSTs per OSS node.")


class LnetNetwork(Model):
    name: str = Field(pattern=r"^(o2ib|tcp)\d{0,3}$", description="LNet network name, e.g. o2ib0 or tcp0.")


class OstPool(Model):
    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,15}$", description="OST pool name.")
    osts: list[int] = Field(min_length=1, description="OST indexes in the pool.")


class Directory(Model):
    path: str = Field(
        pattern=r"^/[^\s]*$", description="Directory under the Lustre mount point (absolute, in-filesystem)."
    )
    purpose: Literal["datasets", "checkpoints", "smallfiles", "scratch"] = Field(
        description="What lives there; the plan derives the layout from it."
    )
    stripe_count: int | None = Field(default=None, ge=-1, description="Override the derived stripe count (-1 = all).")
    pool: str | None = Field(default=None, description="OST pool to confine the directory to.")


class Lustre(Model):
    fsname: str = Field(pattern=FSNAME_RE, description="Filesystem name (1-8 characters).")
    backend: Literal["ldiskfs", "zfs"] = Field(default="ldiskfs", description="OSD backend.")
    mgs: Mgs = Field(default_factory=Mgs, description="Management server placement.")
    mds: Mds = Field(description="Metadata servers.")
    oss: Oss = Field(description="Object storage servers.")
    failover: Literal["none", "pairs"] = Field(default="pairs", description="HA pairs of servers.")
    lnet: list[LnetNetwork] = Field(min_length=1, description="LNet networks (multi-rail over all storage NICs).")
    mount_point: str = Field(default="/lustre", pattern=r"^/[^\s]*$", description="Client mount point.")
    pools: list[OstPool] = Field(default_factory=list, description="OST pools.")
    directories: list[Directory] = Field(default_factory=list, description="Directories and their layouts.")


class Bucket(Model):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]{2,62}$", description="S3 bucket name.")
    purpose: Literal["datasets", "checkpoints", "artifacts", "logs"] = Field(
        default="datasets", description="What the bucket holds."
    )


class ObjectStore(Model):
    backend: Literal["seaweedfs", "external"] = Field(
        description="seaweedfs: deployed by kiln; external: an S3 endpoint."
    )
    endpoint: str | None = Field(default=None, description="external only: the S3 endpoint URL.")
    throughput_GBps: Positive | None = Field(default=None, description="external only: the throughput you are sold.")
    nodes: int = Field(default=1, ge=0, le=1024, description="seaweedfs only: object-store nodes.")
    nics: NicGroup | None = Field(default=None, description="seaweedfs only: NICs per node.")
    disks: LocalNvme | None = Field(default=None, description="seaweedfs only: data disks per node.")
    capacity_TB: Positive = Field(description="Usable capacity to provide, TB.")
    replication: str = Field(default="000", pattern=r"^[0-9]{3}$", description="SeaweedFS replication code.")
    buckets: list[Bucket] = Field(min_length=1, description="Buckets kiln creates.")
    credentials_secret: str = Field(
        default="kiln:s3SecretKey",
        description="Name of the Pulumi secret config key (or env KILN_S3_SECRET_KEY) holding the S3 secret key.",
    )
    access_key_id: str = Field(
        default="kiln", pattern=r"^[A-Za-z0-9]{3,64}$", description="S3 access key id (not secret)."
    )


class Checkpoint(Model):
    interval_min: Positive = Field(description="Minutes between checkpoints.")
    budget_fraction: float = Field(gt=0, lt=1, description="Share of training time checkpoint saves may take.")
    sharded: bool = Field(default=True, description="One file per rank (DCP/FSDP) rather than one big file.")
    bytes_per_param: Positive | None = Field(default=None, description="Override the catalog's 14 B/param.")


class ReadDemand(Model):
    profile: str | None = Field(default=None, description="Named profile from kiln/knowledge/workload.yaml.")
    GBps_per_gpu: Positive | None = Field(default=None, description="Explicit per-GPU read demand, GB/s.")


class Workload(Model):
    model_params_B: Positive = Field(description="Model parameters, billions.")
    checkpoint: Checkpoint = Field(description="Checkpoint cadence and budget.")
    dataset_TB: Positive = Field(description="Training dataset size, TB.")
    read_demand: ReadDemand = Field(
        default_factory=lambda: ReadDemand(profile="llm-text"),
        description="Per-GPU read demand: a named profile or GBps_per_gpu.",
    )


class Kubernetes(Model):
    version: str = Field(default="1.31", pattern=r"^1\.\d{2}$", description="Kubernetes minor version (schemas).")
    gpu_node_label: str = Field(default="nvidia.com/gpu.present", description="Label selecting GPU nodes.")
    storage_namespace: Name = Field(default="kiln-storage", description="Namespace of the object store and Lustre CSI.")
    system_namespace: Name = Field(default="kiln-system", description="Namespace of the GPU and network operators.")
    training_namespace: Name = Field(default="training", description="Namespace of training jobs and acceptance Jobs.")
    storage_class: str = Field(default="", description="StorageClass for SeaweedFS volumes ('' = default).")


class Inventory(Model):
    connection: Literal["ssh", "podman"] = Field(default="ssh", description="How Ansible reaches the hosts.")
    ansible_user: str | None = Field(default=None, description="Remote user for ssh.")
    address_by: Literal["management_ip", "hostname"] = Field(
        default="management_ip", description="What ansible_host is set to."
    )


class Acceptance(Model):
    """How the acceptance suite (`kiln verify` and the acceptance Jobs) repeats and judges measurements."""

    repetitions: int = Field(default=5, ge=1, le=100, description="Measured repetitions after warm-up.")
    warmup: int = Field(default=1, ge=0, le=10, description="Unmeasured warm-up runs before the repetitions.")
    warn_fraction: float = Field(default=0.9, gt=0, le=1, description="Median below expected × this warns.")
    fail_fraction: float = Field(default=0.75, gt=0, le=1, description="Median below expected × this fails.")
    cv_limit: float = Field(default=0.1, gt=0, le=1, description="Coefficient of variation above this is unstable.")
    fio_size_factor: float = Field(
        default=2.0,
        ge=0.0,
        description="fio data per host as a multiple of its RAM, split over the jobs (defeats the page cache); "
        "0 = a small fixed size (the lab).",
    )


AlertSeverity = Literal["critical", "warning"]
ALERT_SEVERITIES: tuple[AlertSeverity, ...] = ("critical", "warning")


class AlertReceiver(Model):
    """Where Alertmanager sends alerts: a webhook (Alertmanager webhook_config)."""

    name: Name = Field(description="Receiver name (Alertmanager receiver).")
    webhook_url: Url = Field(
        description="http(s) URL Alertmanager POSTs alerts to. It is written into the rendered Alertmanager "
        "config: use a URL that carries no secret token."
    )
    severities: list[AlertSeverity] = Field(
        default_factory=lambda: list(ALERT_SEVERITIES), min_length=1,
        description="Alert severities routed to this receiver.",
    )
    send_resolved: bool = Field(default=True, description="Also notify when the alert clears.")


class SnapshotSchedule(Model):
    """A Lustre snapshot schedule (`lctl snapshot_create`); needs ZFS targets (lustre.backend: zfs)."""

    name: Name = Field(description="Schedule name; snapshots are named <fsname>-<name>-<UTC timestamp>.")
    every_hours: int = Field(ge=1, le=8760, description="Hours between snapshots.")
    keep: int = Field(ge=1, le=1000, description="Snapshots of this schedule kept; older ones are destroyed.")


class Monitoring(Model):
    """Prometheus, Alertmanager, exporters, alert thresholds and Lustre snapshots (docs/monitoring.md)."""

    hosts: list[Name] = Field(
        default_factory=list, max_length=3,
        description="Hosts of the plan that run Prometheus and Alertmanager; default the first object-store "
        "host, else the first MDS.",
    )
    retention_days: int = Field(default=15, ge=1, le=3650, description="Prometheus TSDB retention, days.")
    scrape_interval_s: int = Field(
        default=30, ge=5, le=600, description="Seconds between scrapes (also the rule evaluation interval)."
    )
    receivers: list[AlertReceiver] = Field(
        default_factory=list, description="Alert receivers; none = alerts are visible in Alertmanager only."
    )
    fill_warn_percent: float = Field(default=80, ge=10, le=99, description="OST/MDT space or inodes used: warn.")
    fill_critical_percent: float = Field(
        default=90, ge=10, le=99.9, description="OST/MDT space or inodes used: critical (above the warn level)."
    )
    gpu_temp_max_C: int = Field(default=85, ge=40, le=120, description="GPU core temperature that alerts, °C.")
    lustre_snapshots: list[SnapshotSchedule] = Field(
        default_factory=list, description="Lustre snapshot schedules (ZFS backend only)."
    )


class ClusterSpec(Model):
    """One environment: the `kiln:cluster` object of stacks/Pulumi.<env>.yaml."""

    name: Name = Field(description="Environment name.")
    description: str = Field(default="", description="Free text.")
    compute: Compute = Field(description="GPU nodes.")
    fabric: Fabric = Field(description="Compute and storage fabric.")
    networks: Networks = Field(description="IP subnets the plan hands addresses out of.")
    lustre: Lustre = Field(description="The Lustre filesystem.")
    objectstore: ObjectStore = Field(description="The S3 data lake.")
    workload: Workload = Field(description="What the cluster trains: sizes the plan's demand.")
    kubernetes: Kubernetes = Field(
        default_factory=Kubernetes, description="The Kubernetes side (Pulumi program, kiln render)."
    )
    inventory: Inventory = Field(default_factory=Inventory, description="How Ansible reaches hosts.")
    acceptance: Acceptance = Field(default_factory=Acceptance, description="How measurements are repeated and judged.")
    monitoring: Monitoring = Field(
        default_factory=Monitoring, description="Prometheus, alerts, exporters and Lustre snapshots."
    )
    overrides: dict[str, int | float | str] = Field(
        default_factory=dict, description="Replace any derived tuning value by its id (see docs/tuning.md)."
    )

    @field_validator("overrides")
    @classmethod
    def _override_keys(cls, v: dict[str, int | float | str]) -> dict[str, int | float | str]:
        for key in v:
            if not re.fullmatch(r"[A-Za-z0-9_.*-]+", key):
                raise ValueError(f"override id {key!r} has odd characters; fix: use an id from docs/tuning.md")
        return v
