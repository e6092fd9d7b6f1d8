"""The kit's knowledge base: hardware catalog, efficiency factors, workload figures, tuning rules,
object-store figures and network ports as data.

Every figure is read from the YAML files beside this module, where each value sits next to its source
(and, where the data explains a choice, its reason). Each file is validated into typed, frozen pydantic
models once per process; a malformed file stops the kit with the file, the path inside it and the
problem. Code asks for figures by name; it never carries its own copy of a number.

kubernetes.yaml (chart and image pins) is read by kiln.render.manifests, not here.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kiln import yamlio

T = TypeVar("T")

#: A reason or a source: one or more words (a missing or empty one is an error, not a blank cell in the docs).
Words = Annotated[str, Field(min_length=1)]
Constant = int | float | str
#: A figure kept as written (10 stays 10, so the plan JSON shows what the catalog says).
Number = int | float


class KnowledgeError(Exception):
    """A knowledge file is missing, not YAML, or does not match its model."""

    def __init__(self, file: str, problems: list[tuple[str, str]]) -> None:
        self.file = file
        self.problems = problems
        lines = [f"kiln/knowledge/{file}: {len(problems)} problem{'s' if len(problems) != 1 else ''}"]
        lines += [f"  - {path or '(top level)'}: {problem}" for path, problem in problems]
        lines.append("    fix: correct the file (every entry carries its value, reason and source as the others do)")
        super().__init__("\n".join(lines))


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Sourced(Entry, Generic[T]):
    """A value with the reason it has that value and where it comes from."""

    value: T
    reason: Words
    source: Words


class _Named(Entry):
    """A catalog entry; `name` is its key in the file."""

    name: str
    description: Words
    source: Words


class GpuModel(_Named):
    """A GPU and its own acceptance figures: `figures_source` names where they were measured or gated, on this GPU.
    A null all-reduce or host-link figure is derived by the plan from the PCIe link × pcie_h2d; an all-reduce figure
    may be null only for a GPU without NVLink, whose ring crosses that PCIe link."""

    memory_GB: Number = Field(gt=0)
    pcie_gen: int = Field(ge=3, le=6)
    nvswitch: bool
    nvlink_GBps: Number = Field(ge=0)
    nccl_intra_busbw_GBps: Number | None = Field(gt=0)
    nccl_intra_gate_GBps: Number | None = Field(gt=0)
    h2d_GBps: Number | None = Field(gt=0)
    h2d_gate_GBps: Number | None = Field(gt=0)
    #: The GPU runs only the open kernel modules of the driver (its `source` says whose statement).
    open_modules_only: bool = False
    figures_source: Words

    @model_validator(mode="after")
    def _measured_over_nvlink(self) -> GpuModel:
        if self.nccl_intra_busbw_GBps is None and self.nvlink_GBps:
            raise ValueError(
                "nccl_intra_busbw_GBps is null on a GPU with NVLink (only a PCIe-only GPU's is derived from its "
                "link); give the all_reduce_perf busbw measured on this GPU"
            )
        return self


class NicModel(_Named):
    link_Gbps: Number = Field(gt=0)
    fabrics: tuple[Literal["infiniband", "roce", "tcp"], ...] = Field(min_length=1)
    pcie_gen: int = Field(ge=0, le=6)

    @property
    def link_GBps(self) -> float:
        return self.link_Gbps / 8.0


class NvmeModel(_Named):
    read_GBps: Number = Field(gt=0)
    write_GBps: Number = Field(gt=0)
    capacity_TB: Number = Field(gt=0)


class ReadProfile(Entry):
    name: str
    GBps_per_gpu: Number = Field(gt=0)
    single_node_GBps: Number = Field(gt=0)
    reason: Words
    source: Words


def _name_entries(data: Any, *sections: str) -> Any:
    """Copy each entry's key into its `name` field (the files name entries by key only)."""
    if isinstance(data, dict):
        data = dict(data)
        for section in sections:
            entries = data.get(section)
            if isinstance(entries, dict):
                data[section] = {k: {**v, "name": k} if isinstance(v, dict) else v for k, v in entries.items()}
    return data


class _File(Entry):
    schema_: Literal[1] = Field(alias="schema")


class HardwareFile(_File):
    gpus: dict[str, GpuModel]
    nics: dict[str, NicModel]
    nvme: dict[str, NvmeModel]

    @model_validator(mode="before")
    @classmethod
    def _names(cls, data: Any) -> Any:
        return _name_entries(data, "gpus", "nics", "nvme")

    @model_validator(mode="after")
    def _own_figures(self) -> HardwareFile:
        """Every GPU's acceptance figures are its own: refuse one whose figures_source borrows another's."""
        for name, g in self.gpus.items():
            if borrowed := borrowed_figures(name, g.figures_source, self.gpus):
                raise ValueError(f"gpus.{name}.figures_source: {borrowed}; give figures measured on {name}")
        return self


def borrowed_figures(name: str, figures_source: str, gpus: dict[str, GpuModel]) -> str:
    """Why `figures_source` of GPU `name` borrows another GPU's figures ("" when it does not): it names another
    catalog GPU or says "as for", or it is word for word another GPU's figures_source."""
    text = " ".join(figures_source.lower().split())
    others = [n for n in gpus if n != name]
    named = [n for n in others if n in text]
    if named or "as for" in text:
        return f"it refers to another GPU's figures ({', '.join(named) or 'as for'})"
    same = [n for n in others if " ".join(gpus[n].figures_source.lower().split()) == text]
    return f"it is the figures_source of {', '.join(same)}" if same else ""


class EfficiencyFile(_File):
    factors: dict[str, Sourced[float]]


class Checkpoint(Entry):
    bytes_per_param: Sourced[float]


class MdtCreateRates(Entry):
    """A rate by media class: file creates or opens per second one MDT sustains, or an OST drive's kIOPS."""

    nvme: float = Field(gt=0)
    ssd: float = Field(gt=0)
    hdd: float = Field(gt=0)
    reason: Words
    source: Words

    def by_media(self) -> dict[str, float]:
        return {"nvme": self.nvme, "ssd": self.ssd, "hdd": self.hdd}


class Metadata(Entry):
    mdt_create_ops_per_s: MdtCreateRates
    mdt_open_ops_per_s: MdtCreateRates
    ost_read_kiops_per_device: MdtCreateRates


class PcieRates(Entry):
    """PCIe x16 GB/s per direction by generation."""

    rates: dict[int, float]
    source: Words

    @model_validator(mode="before")
    @classmethod
    def _split(cls, data: Any) -> Any:
        if isinstance(data, dict) and "rates" not in data:
            rest = {k: v for k, v in data.items() if k != "source"}
            return {"rates": rest, "source": data.get("source")}
        return data


class Reader(Entry):
    """The data-loader pipeline's concurrency and per-file latency (kiln/plan/reader.py), and what one
    streaming process moves (the storage.fio checks' job count)."""

    readers_per_gpu: Sourced[int]
    small_file_s: Sourced[float]
    stream_process_GBps: Sourced[float]


class WorkloadFile(_File):
    read_profiles: dict[str, ReadProfile]
    checkpoint: Checkpoint
    metadata: Metadata
    reader: Reader
    pcie_GBps_per_direction: PcieRates

    @model_validator(mode="before")
    @classmethod
    def _names(cls, data: Any) -> Any:
        return _name_entries(data, "read_profiles")


class Rule(Entry):
    """A tuning rule of tuning.yaml: the constants its derivation uses, why, and the source."""

    param: str | None = None
    side: Literal["client", "mds", "oss", "mgs"] | None = None
    apply: Literal["set_param", "set_param_persistent", "module_param", "mount"] | None = None
    unit: str | None = None
    module: str | None = None
    option: str | None = None
    constants: dict[str, Constant] = Field(default_factory=dict)
    reason: Words
    source: Words

    def constant(self, key: str) -> Constant:
        try:
            return self.constants[key]
        except KeyError:
            raise KeyError(f"tuning rule has no constant {key!r} (constants: {', '.join(self.constants)})") from None

    def integer(self, key: str) -> int:
        value = self.constant(key)
        if not isinstance(value, int):
            raise TypeError(f"tuning constant {key!r} = {value!r} must be an integer")
        return value

    def number(self, key: str) -> float:
        value = self.constant(key)
        if isinstance(value, str):
            raise TypeError(f"tuning constant {key!r} = {value!r} must be a number")
        return value


class Sysctl(Entry):
    value: int | str
    namespaced: bool
    reason: Words
    source: Words


class HostSettings(Entry):
    sysctls: dict[str, Sysctl]
    memlock: Sourced[str]
    transparent_hugepages: Sourced[str]
    cpu_governor: Sourced[str]

    def others(self) -> dict[str, Sourced[str]]:
        """The host settings that are not sysctls, by name."""
        return {"memlock": self.memlock, "transparent_hugepages": self.transparent_hugepages,
                "cpu_governor": self.cpu_governor}


class Protocol(Entry):
    ipoib_header_bytes: Sourced[int]
    roce_header_bytes: Sourced[int]
    mtu_infiniband: Sourced[int]
    mtu_roce: Sourced[int]
    mtu_tcp: Sourced[int]

    def default_mtu(self, fabric: str) -> int:
        """The storage network's link MTU when the spec gives none (fabric.mtu)."""
        return {"infiniband": self.mtu_infiniband, "roce": self.mtu_roce, "tcp": self.mtu_tcp}[fabric].value

    def roce_path_mtu(self, netdev_mtu: int) -> int:
        """The RDMA path MTU of a RoCE port with this netdev MTU (0: none fits), as iboe_get_mtu() picks it."""
        room = netdev_mtu - self.roce_header_bytes.value
        return next((m for m in (4096, 2048, 1024, 512, 256) if m <= room), 0)


class Layouts(Entry):
    stripe_size_small: Sourced[str]
    stripe_size_large: Sourced[str]
    stripe_size_checkpoint_single: Sourced[str]
    dataset_first_extent: Sourced[str]
    dataset_middle_extent: Sourced[str]
    dataset_middle_stripes: Sourced[int]
    checkpoint_shard_first_extent: Sourced[str]
    checkpoint_shard_stripes: Sourced[int]
    dom_size: Sourced[str]
    smallfile_stripes: Sourced[int]


class HaTiming(Entry):
    corosync_token_ms: Sourced[int]
    corosync_consensus_factor: Sourced[float]
    fence_delay_s: Sourced[int]
    fence_action_s: Sourced[int]
    lnet_monitor_s: Sourced[int]
    lnet_dampen_s: Sourced[int]
    lnet_ping_timeout_s: Sourced[int]
    lnet_ping_hosts: Sourced[int]
    resource_start_s: Sourced[int]


class TuningFile(_File):
    lustre: dict[str, Rule]
    lnet: dict[str, Rule]
    nccl: dict[str, Rule]
    layouts: Layouts
    host: HostSettings
    protocol: Protocol
    ha: HaTiming


class SeaweedFs(Entry):
    default_volume_size_limit_MB: Sourced[int]
    min_volume_size_limit_MB: Sourced[int]
    volume_growth_per_collection: Sourced[int]
    extra_collections: Sourced[int]


class ObjectStoreFile(_File):
    seaweedfs: SeaweedFs


class HostPorts(Entry):
    ssh: Sourced[int]
    lnet_acceptor: Sourced[int]
    corosync_knet: Sourced[int]


class AcceptancePorts(Entry):
    iperf3: Sourced[int]
    perftest: Sourced[int]


class MetricsPorts(Entry):
    """The port of each scrape job (kiln.plan.monitoring's job names, `_` for `-`)."""

    prometheus: Sourced[int]
    alertmanager: Sourced[int]
    node: Sourced[int]
    dcgm: Sourced[int]
    lustre: Sourced[int]
    seaweedfs_master: Sourced[int]
    seaweedfs_volume: Sourced[int]
    seaweedfs_filer: Sourced[int]
    seaweedfs_s3: Sourced[int]
    kafka: Sourced[int]
    kiln_stream: Sourced[int]  # local rank 0's; local rank i serves kiln_stream + i

    def by_job(self) -> dict[str, int]:
        """Scrape job name → port, in file order (seaweedfs_master is job seaweedfs-master)."""
        return {name.replace("_", "-"): entry.value for name, entry in self}


class SeaweedFsPorts(Entry):
    """SeaweedFS's HTTP ports (each server also serves gRPC on its HTTP port + grpc_offset) and S3 gateway."""

    master: Sourced[int]
    volume: Sourced[int]
    filer: Sourced[int]
    s3: Sourced[int]
    grpc_offset: Sourced[int]

    def http(self) -> dict[str, int]:
        """The backend servers' HTTP ports by server: master, volume, filer."""
        return {"master": self.master.value, "volume": self.volume.value, "filer": self.filer.value}

    def backend(self) -> list[int]:
        """HTTP and gRPC ports of master, volume and filer, in that order: what only SeaweedFS itself may reach."""
        return [p for http in self.http().values() for p in (http, http + self.grpc_offset.value)]

    @property
    def filer_grpc(self) -> int:
        """The filer's gRPC port (what `weed filer.meta.tail -filer=host:port.grpcPort` dials)."""
        return self.filer.value + self.grpc_offset.value


class KafkaPorts(Entry):
    """A bare-metal KRaft node's client and controller listeners."""

    client: Sourced[int]
    controller: Sourced[int]


class ClusterPorts(Entry):
    datamover_metrics: Sourced[int]
    dns: Sourced[int]


class PortsFile(_File):
    """Every port the kit listens on, opens or dials (ports.yaml)."""

    host: HostPorts
    acceptance: AcceptancePorts
    metrics: MetricsPorts
    seaweedfs: SeaweedFsPorts
    kafka: KafkaPorts
    kubernetes: ClusterPorts

    def entries(self) -> list[Sourced[int]]:
        """Every entry of the file, section by section."""
        sections: list[Entry] = [self.host, self.acceptance, self.metrics, self.seaweedfs, self.kafka,
                                 self.kubernetes]
        return [entry for section in sections for _, entry in section]


M = TypeVar("M", bound=BaseModel)


def parse(name: str, text: str, model: type[M]) -> M:
    """Validate one knowledge file's text into its model; KnowledgeError names the file, path and problem."""
    try:
        data = yamlio.load(text)
    except Exception as e:  # yaml.YAMLError and its subclasses carry the line
        raise KnowledgeError(name, [("", f"not valid YAML: {e}")]) from None
    if not isinstance(data, dict):
        raise KnowledgeError(name, [("", f"must hold a mapping, not {type(data).__name__}")])
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = [(".".join(str(p) for p in err["loc"]), err["msg"]) for err in e.errors()]
        raise KnowledgeError(name, problems) from None


def _read(name: str, model: type[M]) -> M:
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return parse(name, text, model)


class ProtectionLevel(Entry):
    """A data protection level behind one Lustre target (kiln/knowledge/protection.yaml)."""

    backends: tuple[Literal["zfs", "ldiskfs"], ...]
    parity: int = Field(ge=0)
    copies: int | Literal["all"]
    min_devices: int = Field(ge=1)
    max_devices: int | None = None
    even: bool = False
    reason: Words
    source: Words


class ProtectionFile(Entry):
    schema_: Literal[1] = Field(alias="schema")
    levels: dict[str, ProtectionLevel]


class Cited(Entry):
    """A rule of the plan, not a number: why it holds and where it is stated."""

    reason: Words
    source: Words


class InodeSteps(Entry):
    """mkfs.lustre's bytes per inode of an OST by its size: the first step the OST is larger than applies."""

    steps_TiB: tuple[float, ...] = Field(min_length=1)
    bytes: tuple[int, ...] = Field(min_length=1)
    reason: Words
    source: Words

    def at(self, size_bytes: float) -> int:
        for step, per in zip(self.steps_TiB, self.bytes, strict=True):
            if size_bytes > step * 2**40:
                return per
        return self.bytes[-1]


class Ldiskfs(Entry):
    reserved_percent: Sourced[float]
    journal_percent_max: Sourced[float]
    ost_journal_MB_max: Sourced[int]
    mdt_journal_MB_max: Sourced[int]
    ost_inode_bytes: Sourced[int]
    mdt_bytes_per_inode: Sourced[int]
    ost_bytes_per_inode: InodeSteps


class Zfs(Entry):
    slop_shift: Sourced[int]
    slop_min_bytes: Sourced[int]
    slop_max_bytes: Sourced[int]
    recordsize_bytes: Sourced[int]
    bytes_per_inode: Sourced[int]
    raidz_rounding: Cited
    draid_padding: Cited


class Files(Entry):
    default_file_bytes: Sourced[int]
    inode_growth: Sourced[float]
    checkpoints_kept: Sourced[int]
    checkpoint_files_per_rank: Sourced[int]


class CapacityFile(_File):
    """What a Lustre target keeps for itself and what the capacity plan assumes of files (capacity.yaml)."""

    ldiskfs: Ldiskfs
    zfs: Zfs
    files: Files


class StrimziRelease(Entry):
    """The Strimzi release kiln renders for and the Kafka versions it runs (kafka.yaml)."""

    release: Words
    kafka_versions: tuple[str, ...] = Field(min_length=1)
    source: Words


Codec = Literal["zstd", "lz4", "gzip", "snappy", "none"]
TokenDtype = Literal["uint16", "uint32"]


class KafkaFile(_File):
    """What sizes a Kafka cluster that feeds training (kafka.yaml)."""

    strimzi: StrimziRelease
    baremetal_versions: Sourced[tuple[str, ...]]
    flops_per_token_per_param: Sourced[float]
    mfu: Sourced[float]
    gpu_peak_bf16_tflops: dict[str, Sourced[float]]
    codec_ratio: dict[TokenDtype, dict[Codec, Sourced[float]]]
    replay_headroom: Sourced[float]
    retention_safety: Sourced[float]
    broker_disk_fill: Sourced[float]
    runway_min_s: Sourced[float]
    latency_p99_ms: Sourced[float]
    broker_write_MBps: Sourced[float]
    partitions_per_broker_max: Sourced[int]
    controllers: Sourced[int]
    broker_heap_GB: Sourced[float]
    max_message_overhead_bytes: Sourced[int]
    highly_composite: Sourced[tuple[int, ...]]


class Knowledge(Entry):
    """Every knowledge file, validated."""

    hardware: HardwareFile
    efficiency: EfficiencyFile
    workload: WorkloadFile
    tuning: TuningFile
    objectstore: ObjectStoreFile
    protection: ProtectionFile
    ports: PortsFile
    capacity: CapacityFile
    kafka: KafkaFile

    # Shortcuts for the figures most code asks for.
    @property
    def gpus(self) -> dict[str, GpuModel]:
        return self.hardware.gpus

    @property
    def nics(self) -> dict[str, NicModel]:
        return self.hardware.nics

    @property
    def nvme(self) -> dict[str, NvmeModel]:
        return self.hardware.nvme

    @property
    def factors(self) -> dict[str, Sourced[float]]:
        return self.efficiency.factors

    @property
    def read_profiles(self) -> dict[str, ReadProfile]:
        return self.workload.read_profiles

    @property
    def bytes_per_param(self) -> Sourced[float]:
        return self.workload.checkpoint.bytes_per_param

    @property
    def mdt_rates(self) -> MdtCreateRates:
        return self.workload.metadata.mdt_create_ops_per_s

    @property
    def pcie(self) -> PcieRates:
        return self.workload.pcie_GBps_per_direction

    @property
    def seaweedfs(self) -> SeaweedFs:
        return self.objectstore.seaweedfs

    def factor(self, name: str) -> float:
        return self.factors[name].value


@cache
def load() -> Knowledge:
    """Load and validate the knowledge base once per process."""
    return Knowledge(
        hardware=_read("hardware.yaml", HardwareFile),
        efficiency=_read("efficiency.yaml", EfficiencyFile),
        workload=_read("workload.yaml", WorkloadFile),
        tuning=_read("tuning.yaml", TuningFile),
        objectstore=_read("objectstore.yaml", ObjectStoreFile),
        protection=_read("protection.yaml", ProtectionFile),
        ports=_read("ports.yaml", PortsFile),
        capacity=_read("capacity.yaml", CapacityFile),
        kafka=_read("kafka.yaml", KafkaFile),
    )


FILES: dict[str, type[BaseModel]] = {
    "hardware.yaml": HardwareFile,
    "efficiency.yaml": EfficiencyFile,
    "workload.yaml": WorkloadFile,
    "tuning.yaml": TuningFile,
    "objectstore.yaml": ObjectStoreFile,
    "protection.yaml": ProtectionFile,
    "ports.yaml": PortsFile,
    "capacity.yaml": CapacityFile,
    "kafka.yaml": KafkaFile,
}
