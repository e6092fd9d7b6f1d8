"""The Plan: frozen, pure data derived from a spec. Adapters read it; nothing writes back."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from kiln.plan.groups import LUSTRE_CLIENTS
from kiln.spec.errors import SpecIssue
from kiln.spec.models import Acceptance

if TYPE_CHECKING:
    from kiln.plan.monitoring import MonitoringPlan

PLAN_SCHEMA = "kiln.plan/v2"

Role = Literal["compute", "mgs", "mds", "oss", "router", "objectstore", "kafka"]
Side = Literal["client", "mds", "oss", "mgs", "lnet", "nccl", "host"]
Scope = Literal["host", "pair", "aggregate", "node"]
TargetKind = Literal["mgt", "mdt", "ost"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Nic:
    role: Literal["compute", "storage", "shared"]  # shared: a compute-rail port that also carries storage (LNet)
    model: str
    interface: str
    device: str | None
    address: str | None  # storage and shared ports: storage subnet; RoCE compute rails: networks.roce_rails
    nid: str | None  # LNet NID for storage and shared ports
    link_Gbps: float

    @property
    def carries_storage(self) -> bool:
        """The port carries Lustre (LNet) traffic: a storage NIC or a rail port shared with storage."""
        return self.role != "compute"

    @property
    def is_rail(self) -> bool:
        """The port is a compute rail (NCCL): a compute NIC or a rail port shared with storage."""
        return self.role != "storage"


@dataclass(frozen=True, slots=True, kw_only=True)
class Host:
    name: str
    role: Role
    pool: str | None
    management_address: str
    groups: tuple[str, ...]
    nics: tuple[Nic, ...]
    gpus: int = 0
    gpu_model: str | None = None
    ram_GiB: int = 0
    cpu_cores: int = 0
    failover_partner: str | None = None

    @property
    def nids(self) -> tuple[str, ...]:
        return tuple(n.nid for n in self.nics if n.nid)

    @property
    def lustre_client(self) -> bool:
        """Whether the plan mounts Lustre on this host (the Lustre clients' inventory group)."""
        return LUSTRE_CLIENTS in self.groups


@dataclass(frozen=True, slots=True, kw_only=True)
class LnetNet:
    name: str
    lnd: Literal["o2ib", "tcp"]
    multi_rail: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class LnetRoute:
    """One gateway of a route: hosts of `side` on network `via` reach network `net` through `gateway`."""

    side: Literal["clients", "servers"]
    net: str  # the remote network
    via: str  # the local network the gateway's NID is on
    gateway: str  # the router's NID on `via`
    router: str  # the router host


@dataclass(frozen=True, slots=True, kw_only=True)
class LustreTarget:
    name: str  # lab-OST0003, lab-MDT0000, MGS
    kind: TargetKind
    index: int
    host: str
    device: str
    mount_point: str
    servicenodes: tuple[tuple[str, ...], ...]  # one NID list per server that may mount it
    failover_host: str | None
    vdevs: tuple[str, ...] = ()  # zfs: the `zpool create` vdev words (mirror a b ...) of the target's pool
    protection: str = "none"  # ProtectionLevel behind the target (kiln/knowledge/protection.yaml)
    drives: tuple[str, ...] = ()  # the physical drives behind the target (zpool vdevs or md members)
    mkfs_options: tuple[str, ...] = ()  # extra mkfs.lustre words the layout needs (ldiskfs RAID geometry)
    raid_chunk_KiB: int = 0  # ldiskfs on md RAID: mdadm --chunk; 0 when there is no md array
    ashift: int = 0  # zfs: pool ashift; 0 on ldiskfs
    # How the drives reach the servers (spec attachment): internal, shared-enclosure, san or nvmeof. Failover pairs
    # have a shared kind (kiln.spec.checks refuses internal); the HA manager acts on it (md arrays or pools to move).
    attachment: str = "internal"


@dataclass(frozen=True, slots=True, kw_only=True)
class Tunable:
    id: str  # stable id used by overrides, e.g. client.osc.max_rpcs_in_flight
    param: str  # lctl parameter, module option or NCCL variable
    value: int | float | str
    side: Side
    apply: str  # set_param | set_param_persistent | module_param | module_option | env | sysctl | host
    reason: str
    source: str
    overridden: bool = False
    pool: str | None = None  # NCCL values are per compute pool


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutComponent:
    extent_end: str  # "64M", "4G" or "EOF"
    stripe_count: int  # -1 = all OSTs
    stripe_size: str
    overstripe: bool = False
    dom: bool = False
    pool: str | None = None

    def layout_args(self) -> dict[str, object]:
        """The component as the lustre_layout module's `layout` argument (inventory) and
        kiln.lustre.lustre_layout.layout_from_spec() (conformance) take it."""
        return {
            "extent_end": self.extent_end,
            "stripe_count": self.stripe_count,
            "stripe_size": self.stripe_size,
            "overstripe_count": self.stripe_count if self.overstripe else None,
            "pool": self.pool,
            "dom": self.dom,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class DirStripe:
    """A directory's default directory layout (DNE): what `lfs setdirstripe -D` gives new subdirectories."""

    mdt_count: int  # MDTs each new subdirectory is striped over (1: one MDT, chosen per subdirectory)
    mdt_index: int = -1  # -1: the MDS picks (round-robin while MDTs are balanced, else by free space)
    max_inherit: int | None = None  # subdirectory levels that inherit it (-1 all); None: lfs's default

    def args(self) -> list[str]:
        """`lfs setdirstripe` options (without the directory)."""
        out = ["-D", "-c", str(self.mdt_count), "-i", str(self.mdt_index)]
        if self.max_inherit is not None:
            out += ["-X", str(self.max_inherit)]
        return out

    def module_args(self) -> dict[str, object]:
        """As the lustre_layout module's `dir_default` argument (inventory) takes it."""
        return {"mdt_count": self.mdt_count, "mdt_index": self.mdt_index, "max_inherit": self.max_inherit}


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    path: str  # in-filesystem path (/datasets)
    mount_path: str  # on clients (/lustre/datasets)
    purpose: str
    kind: Literal["pfl", "wide", "overstripe", "dom", "plain"]
    components: tuple[LayoutComponent, ...]
    setstripe: str  # the lfs setstripe arguments
    reason: str
    dirstripe: DirStripe | None = None  # None: new subdirectories inherit the parent's default
    dirstripe_reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaDefault:
    """Default quota of one type: what `lfs setquota -U|-G|-P` gives every ID without its own limits."""

    type: Literal["user", "group", "project"]
    block_soft_KiB: int  # 0 = no limit
    block_hard_KiB: int
    inode_soft: int
    inode_hard: int

    @property
    def flag(self) -> str:
        return {"user": "-U", "group": "-G", "project": "-P"}[self.type]

    def args(self) -> list[str]:
        """`lfs setquota` options (without the mount point); bare block numbers are KiB to lfs."""
        return [
            self.flag, "-b", str(self.block_soft_KiB), "-B", str(self.block_hard_KiB),
            "-i", str(self.inode_soft), "-I", str(self.inode_hard),
        ]  # fmt: skip

    def module_args(self) -> dict[str, object]:
        """As the lustre_quota module takes it (inventory)."""
        return {
            "type": self.type,
            "block_soft_KiB": self.block_soft_KiB,
            "block_hard_KiB": self.block_hard_KiB,
            "inode_soft": self.inode_soft,
            "inode_hard": self.inode_hard,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclPool:
    pool: str
    env: dict[str, str]
    hcas: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Bucket:
    name: str
    purpose: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectStorePlan:
    backend: str
    endpoint: str
    hosts: tuple[str, ...]
    masters: tuple[str, ...]  # SeaweedFS masters: an odd quorum (3) when there are enough hosts
    buckets: tuple[Bucket, ...]
    raw_capacity_TB: float
    usable_capacity_TB: float
    capacity_TB: float
    replication: str
    access_key_id: str
    credentials_secret: str
    s3_port: int
    version: str
    volume_size_limit_MB: int  # SeaweedFS master -volumeSizeLimitMB
    volumes_per_server: int  # SeaweedFS volume -max


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    name: str
    kind: Literal["demand", "supply"]
    read_GBps: float
    write_GBps: float
    formula: str
    factors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Term:
    """One term of a time sum: what it is, how long (seconds) and how it was found."""

    name: str
    seconds: float
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    bytes: int
    bytes_per_param: float
    save_s: float  # the storage write alone (bytes ÷ aggregate write)
    restore_s: float
    budget_s: float
    required_write_GBps: float
    meets_budget: bool  # save_total_s ≤ budget_s
    why: str
    terms: tuple[Term, ...] = ()  # device-to-host copies, file creates, storage write (kiln.plan.checkpoint)
    save_total_s: float = 0.0  # the sum of the terms
    lower_bound: bool = True  # some cost of a real save is not in the terms (serialisation): a lower bound


@dataclass(frozen=True, slots=True, kw_only=True)
class Amount:
    """One term of a capacity sum: what it is, how much (TB, 10^12 bytes) and how it was found."""

    name: str
    TB: float
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Capacity:
    """Usable OST capacity after protection and filesystem overhead, the demand on it, and the MDT/OST inodes."""

    raw_TB: float  # OST drives
    usable_TB: float  # raw − every overhead
    overheads: tuple[Amount, ...]  # protection, reserved blocks, journals, inode tables, slop, padding
    demand: tuple[Amount, ...]  # dataset, checkpoints × kept, scratch
    demand_TB: float
    fill_percent: float  # demand ÷ usable
    fill_warn_percent: float  # the monitoring alerts' thresholds the plan is judged against
    fill_critical_percent: float
    files: int  # files the demand holds (dataset + checkpoint files)
    mdt_inodes: int  # inodes the MDTs can hold
    ost_objects: int  # objects the OSTs can hold (one per file stripe)
    why: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Degraded:
    """The plan with one server down: its failover partner serves the partner's targets on one server."""

    failover: str  # lustre.failover: pairs, or none (a down server's targets are unreachable)
    read_GBps: float  # aggregate read with one OSS down
    write_GBps: float
    read_bound: str  # how the degraded figure was found
    create_ops: float  # MDT creates/s with one MDS down
    gpus_fed: int  # with one OSS down (and one MDS down, where file opens bound reads)
    checkpoint_save_s: float  # storage write of one checkpoint with one OSS down
    holds: bool  # the read demand and the checkpoint budget still hold
    why: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizing:
    layers: tuple[Layer, ...]
    read_bottleneck: str
    write_bottleneck: str
    aggregate_read_GBps: float
    aggregate_write_GBps: float
    demand_read_GBps: float
    per_client_read_GBps: float
    per_client_write_GBps: float
    single_client_read_GBps: float
    single_client_write_GBps: float
    gpus_total: int
    gpus_fed: int
    read_per_gpu_GBps: float
    single_node_demand_read_GBps: float
    read_demand_source: str
    metadata_create_ops: float
    checkpoint: Checkpoint
    stage_in_s: float
    stage_in_GBps: float
    stage_in_bottleneck: str
    objectstore_GBps: float
    recommended_oss_nodes: int
    headroom_read: float
    notes: tuple[str, ...]
    gpus_fed_bound: str = ""  # "bandwidth (<layer>)" or "file rate (<layer>)": what set gpus_fed


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptanceTarget:
    check: str  # check id the acceptance suite runs, e.g. storage.fio_lustre_read
    metric: str
    unit: str
    expected: float
    warn: float
    fail: float
    why: str
    scope: Scope
    higher_is_better: bool = True
    group: str | None = None  # inventory group the check runs on
    requires: tuple[str, ...] = ()  # what the host must have: gpu, rdma, lustre, nvme, objectstore
    env: tuple[tuple[str, str], ...] = ()  # environment the check sets so its figure is comparable (NCCL_ALGO)
    # A sign-off needs this check's evidence (kiln/plan/signoff.py sets both): why it is required, or why not.
    required: bool = True
    required_why: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataLinkPlan:
    name: str
    bucket: str
    prefix: str
    path: str  # in-filesystem
    mount_path: str  # on clients
    directory: str  # the planned directory it lies under (its layout applies before any byte lands)
    setstripe: str  # that directory's layout
    import_policy: str
    import_trigger: str
    schedule: str | None
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    export_policy: str
    conflict: str  # fail | skip | overwrite-if-dirty | overwrite
    deletions: str  # keep | propagate
    max_delete_fraction: float
    posix_metadata: bool
    note: str  # what the platform cannot do (on-access without HSM), '' when nothing


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointFlowPlan:
    path: str
    mount_path: str
    bucket: str
    prefix: str
    commit_marker: str
    write_back: str
    part_size_MiB: int
    keep_resident: int
    release_after_verify: bool
    bytes: int
    write_s: float  # fast tier write (the sizing's checkpoint save)
    export_s: float  # upload to the lake
    export_GBps: float
    export_bottleneck: str
    blocked_s: float  # what the training job waits for
    blocked_sync_s: float  # write + upload, the naive way
    restore_fast_s: float
    restore_lake_s: float
    interval_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFlowPlan:
    bucket: str
    prefix: str
    pool: str
    target: str
    events: str
    fanout: str
    receivers: int  # receiver directories in all: len(hosts) × len(targets)
    lake_bytes_factor: float  # lake bytes served ÷ model bytes
    hosts: tuple[str, ...] = ()  # nodes that receive (and run the model service)
    targets: tuple[str, ...] = ()  # receiver directories on each of those nodes
    filer_access: bool = False  # the firewall opens the filer's gRPC port to `hosts` (spec filer_access)


@dataclass(frozen=True, slots=True, kw_only=True)
class DataflowPlan:
    engine: str  # the transfer tool the mover drives
    mover_hosts: tuple[str, ...]
    mover_group: str
    host_GBps: float  # one mover host's storage NICs × tcp_payload
    stream_GBps: float
    concurrency: int  # parallel transfers per mover host
    part_size_MiB: int
    multipart_cutoff_MiB: int
    poll_s: int
    lake_get_GBps: float
    lake_put_GBps: float
    stage_GBps: float
    stage_bottleneck: str
    dataset_bytes: int
    stage_in_s: float
    naive_stage_in_s: float  # one sequential stream
    links: tuple[DataLinkPlan, ...]
    checkpoints: CheckpointFlowPlan | None
    models: tuple[ModelFlowPlan, ...]
    why: tuple[str, ...]
    # Acceptance targets of the dataflow.* checks (also in Plan.targets, which kiln verify runs; kept here so the
    # data-flow section reads on its own).
    targets: tuple[AcceptanceTarget, ...] = ()

    @property
    def filer_subscribers(self) -> tuple[str, ...]:
        """Hosts the plan lets reach the SeaweedFS filer's gRPC port: the receivers of model entries with
        events filer-subscribe and filer_access (the firewall opens it to them and to no other compute host)."""
        return tuple(sorted({h for m in self.models if m.filer_access and m.events == "filer-subscribe"
                             for h in m.hosts}))


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworksPlan:
    """The environment's subnets (spec `networks`): host interfaces, firewall sources, the lab's networks."""

    management: str  # CIDR
    storage: str  # CIDR: storage NICs, LNet NIDs, the object store (routed: sliced per LNet network)
    roce_rails: str | None  # CIDR of the RoCE compute rails' addresses; None without RoCE rails
    lnet: dict[str, str] = field(default_factory=dict)  # LNet network → the CIDR of its NIDs' addresses
    # Storage CIDR → addresses its hosts take from offset 2 on, the reserves (networks.reserve) included
    storage_planned: dict[str, int] = field(default_factory=dict)

    def subnet_of(self, nid: str | None) -> str:
        """The CIDR of a storage port's address, by the LNet network of its NID (networks.storage without one)."""
        net = nid.split("@", 1)[1] if nid else ""
        return self.lnet.get(net, self.storage)

    def storage_sources(self) -> list[str]:
        """Every subnet storage addresses come from, as firewall sources: networks.storage and any LNet network's
        subnet outside it (a routed filesystem's default slices lie inside it)."""
        storage = ipaddress.ip_network(self.storage)
        outside = {c for c in self.lnet.values() if not _inside(ipaddress.ip_network(c), storage)}
        return [self.storage, *sorted(outside)]


def _inside(net: ipaddress.IPv4Network | ipaddress.IPv6Network,
            outer: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    if isinstance(net, ipaddress.IPv4Network) and isinstance(outer, ipaddress.IPv4Network):
        return net.subnet_of(outer)
    if isinstance(net, ipaddress.IPv6Network) and isinstance(outer, ipaddress.IPv6Network):
        return net.subnet_of(outer)
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class InventoryPlan:
    """How Ansible reaches the hosts (spec `inventory`)."""

    connection: Literal["ssh", "podman"]
    address_by: Literal["management_ip", "hostname"]
    ansible_user: str | None  # None: Ansible's default user


@dataclass(frozen=True, slots=True, kw_only=True)
class RdmaPlan:
    """Link settings the rdma role applies to storage and rail interfaces."""

    mtu: int  # fabric.mtu or the fabric's default (IB MTU 4096, RoCE netdev MTU 9000): RoCE (Ethernet) interfaces
    ipoib_mtu: int  # InfiniBand: IPoIB interfaces, the IB MTU less the IPoIB header
    roce_dscp: int  # DSCP of RoCE traffic (fabric.roce_dscp)
    roce_tos: int  # its IP traffic-class byte: the DSCP in the upper six bits, ECT(0) in the ECN bits
    stack: str  # fabric.rdma_stack: inbox (the distribution's) or doca (NVIDIA's DOCA-Host repository)


@dataclass(frozen=True, slots=True, kw_only=True)
class FencingPlan:
    """How Pacemaker powers off a failed server of a failover pair (spec lustre.ha.fencing); no secret."""

    agent: str
    address: str | None  # BMC address; {host} stands for the server name
    username: str | None
    options: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class HaLnetCheck:
    """ocf:lustre:healthLNET on one server of a pair. ping_update() reads the carrier of one device, then counts the
    NIDs of host_list that answer lctl ping (lctl_check()); one agent instance runs per device."""

    devices: tuple[str, ...]  # the server's storage interfaces (LNet), one healthLNET instance each
    host_list: tuple[str, ...]  # NIDs of hosts outside the pair: other servers, routers, then clients
    threshold: int  # fewest answering NIDs for the node's LNet to count as good (a majority of host_list)


@dataclass(frozen=True, slots=True, kw_only=True)
class HaNode:
    """One server of a failover pair."""

    name: str
    links: tuple[str, ...]  # Corosync knet link addresses, link 0 first: management, then storage where separate
    lnet: HaLnetCheck | None  # None: no host outside the pair has a NID to ping
    fence_delay_s: int  # pcmk_delay_base of the fence device that targets this node (0: none)


@dataclass(frozen=True, slots=True, kw_only=True)
class HaResource:
    """One Lustre target under Pacemaker, with what must start before it on the same node."""

    name: str  # the target name: the resource id
    kind: TargetKind
    tier: int  # 0 MGS, 1 MDT, 2 OST: start order
    node: str  # preferred node (the target's primary server)
    device: str
    mount_point: str
    md_device: str = ""  # ldiskfs on md RAID: the array (ocf:heartbeat:mdraid) assembled before the mount
    md_members: tuple[str, ...] = ()  # its member drives (the md superblocks that name the array)
    zpool: str = ""  # zfs: the pool (ocf:heartbeat:ZFS) imported before the mount


@dataclass(frozen=True, slots=True, kw_only=True)
class HaPair:
    cluster: str  # Corosync cluster name (at most 32 characters)
    nodes: tuple[HaNode, ...]  # the two servers, sorted by name
    resources: tuple[HaResource, ...]  # every target either server may run, MGS, MDTs, OSTs

    def node(self, name: str) -> HaNode:
        return next(n for n in self.nodes if n.name == name)


@dataclass(frozen=True, slots=True, kw_only=True)
class HaTimingPlan:
    """The timing every pair runs with (kiln/knowledge/tuning.yaml `ha`) and the takeover bounds derived from it."""

    token_ms: int
    consensus_ms: int
    fence_delay_s: int
    lnet_monitor_s: int
    lnet_dampen_s: int
    lnet_ping_timeout_s: int
    partner_loss_bound_s: float  # worst case over both nodes: detection + fence delay + fencing + starts
    lnet_loss_bound_s: float  # a monitor interval + dampening + stop and start of the node's targets


@dataclass(frozen=True, slots=True, kw_only=True)
class HaPlan:
    """Failover pairs under Pacemaker (role lustre_ha); no pairs with failover none."""

    pairs: tuple[HaPair, ...]
    timing: HaTimingPlan

    def pair_of(self, host: str) -> HaPair | None:
        return next((p for p in self.pairs if any(n.name == host for n in p.nodes)), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class LustrePlan:
    """Lustre settings the servers, their HA and the node health checks apply as the spec gives them."""

    backend: Literal["ldiskfs", "zfs"]
    failover: Literal["none", "pairs"]
    fencing: FencingPlan | None  # failover pairs: None only where the spec names none
    scheduler: Literal["slurm", "kubernetes", "none"]  # who drains a node the health check takes out
    ost_usable_capacity_TB: float  # after protection, before the backend: kiln.plan.capacity.ost_protected_TB


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputePoolPlan:
    """One compute pool as its nodes' group, GPU and NCCL settings, acceptance Jobs and lab volumes need it."""

    name: str
    nodes: int
    gpus_per_node: int  # 0: a storage-only client pool
    gpu_model: str | None
    gpu_nvswitch: bool
    ram_GiB: int
    topology_file: str | None  # NCCL topology XML on the node
    local_nvme_mount: str | None  # where the local NVMe scratch is mounted; None without one


@dataclass(frozen=True, slots=True, kw_only=True)
class KubernetesPlan:
    """Namespaces and cluster settings of the Kubernetes side (spec `kubernetes`)."""

    gpu_node_label: str
    system_namespace: str
    storage_namespace: str
    training_namespace: str
    health_namespace: str
    models_namespace: str
    storage_class: str  # "": the cluster's default StorageClass
    mover_image: str  # kiln's images as the cluster pulls them: the spec's, else kiln/knowledge/kubernetes.yaml's
    health_image: str
    # The stack's spec as JSON data (fields as the stack file sets them), less the fields that look like
    # credentials: the stack file the in-cluster data mover loads.
    mover_spec: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class LustreRelease:
    """The Whamcloud point release a Lustre line installs (kiln/knowledge/compat.yaml lustre_releases)."""

    release: str  # Whamcloud's lustre-<release>/ directory, e.g. 2.16.1
    el: dict[str, str]  # EL major version -> the EL minor release of its el<minor>/ directory
    ubuntu: dict[str, str]  # Ubuntu release -> the kernel its prebuilt client modules are for (clients only)


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionsPlan:
    """The versions the nodes run (spec `versions`, lustre.version), checked against kiln/knowledge/compat.yaml."""

    lustre_server: str
    lustre_client: str
    lustre_server_release: LustreRelease  # the server packages of the lustre_server line
    lustre_client_release: LustreRelease  # the client packages of the lustre_client line
    gpu_driver: int  # NVIDIA driver branch
    gpu_kernel_modules: str  # open or proprietary: the flavor of its kernel modules
    cuda: str
    nccl: str
    doca: str  # DOCA-Host line on hosts with RDMA ports (fabric.rdma_stack: doca)
    doca_release: str  # its point release: the repository the rdma role adds ("" for a line compat.yaml lacks)
    kernel: str  # kernel series
    seaweedfs: str  # the object store's SeaweedFS release


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaSetting:
    """One Kafka configuration value the plan sets, with why and where that comes from."""

    name: str  # the Kafka property (producer, consumer, topic or broker config)
    value: str
    reason: str
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaTopicPlan:
    """One token topic, sized from the job that consumes it (kiln.plan.kafka, docs/kafka.md)."""

    name: str
    pool: str  # the consuming compute pool
    nodes: int
    ranks_per_node: int
    consumers: int  # nodes × ranks_per_node: one rank reads partitions / consumers partitions
    partitions: int
    replication: int
    min_insync_replicas: int
    compression: str
    dtype: str
    tokens_per_message: int
    message_bytes: int  # uncompressed payload
    bytes_per_token: float  # after the codec
    tokens_per_s_node: float
    tokens_per_s_how: str  # given, or the derivation with its figures
    consume_MBps: float  # the whole job, after the codec
    ingress_MBps: float  # consume × replay headroom
    retention_hours: float
    retention_needed_hours: float  # oldest kept checkpoint's age + restart time
    retained_GB: float  # every replica of the retention window
    settings: tuple[KafkaSetting, ...]  # topic configs (KafkaTopic spec.config)


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaNode:
    """One bare-metal KRaft node: its host, node.id and process.roles."""

    host: str
    node_id: int
    roles: tuple[str, ...]  # broker, controller


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaPlan:
    """A KRaft Kafka cluster that streams token ids to training (spec pipeline.kafka)."""

    mode: str  # strimzi | baremetal
    version: str
    strimzi_release: str  # the release whose CRDs the rendered resources follow
    namespace: str
    auth: str
    controllers: int
    brokers: int
    brokers_by: dict[str, int]  # what each constraint needs: replication, retention, ingress, partitions
    storage_GB_per_broker: float
    broker_heap_GB: float  # the JVM heap of each broker (-Xms = -Xmx); the rest of memory is page cache
    runway_min_s: float  # seconds of tokens a rank holds ahead of training, at least (KafkaRunwayLow)
    latency_p99_ms: float  # end-to-end bound the acceptance check holds the cluster to
    topics: tuple[KafkaTopicPlan, ...]
    producer: tuple[KafkaSetting, ...]
    consumer: tuple[KafkaSetting, ...]
    broker: tuple[KafkaSetting, ...]
    # baremetal: the KRaft cluster id every node is formatted with, and the nodes (host → node id and roles)
    cluster_id: str = ""
    nodes: tuple[KafkaNode, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    schema: str
    stack: str
    description: str
    fabric: str
    fsname: str
    mount_point: str
    hosts: tuple[Host, ...]
    groups: dict[str, tuple[str, ...]]
    lnet: tuple[LnetNet, ...]
    lnet_routes: tuple[LnetRoute, ...]
    mgs_nids: tuple[tuple[str, ...], ...]
    lustre_targets: tuple[LustreTarget, ...]
    tunables: tuple[Tunable, ...]
    layouts: tuple[Layout, ...]
    ost_pools: dict[str, tuple[int, ...]]
    nccl: tuple[NcclPool, ...]
    objectstore: ObjectStorePlan
    sizing: Sizing
    targets: tuple[AcceptanceTarget, ...]
    acceptance: Acceptance  # the stack's acceptance block, as validated
    kubernetes_version: str
    spec_digest: str
    monitoring: MonitoringPlan  # Prometheus, scrape targets, alert rules, snapshots
    warnings: tuple[SpecIssue, ...] = field(default=())  # issues of severity warning
    dataflow: DataflowPlan | None = None  # lake <-> fast tier data flow (kiln.plan.dataflow)
    quota_defaults: tuple[QuotaDefault, ...] = ()  # lfs setquota -U/-G/-P (lustre.quotas.defaults)
    capacity: Capacity | None = None  # usable space and inodes against the workload's (kiln.plan.capacity)
    degraded: Degraded | None = None  # one OSS / one MDS down (kiln.plan.degraded)
    kafka: KafkaPlan | None = None  # the token stream (kiln.plan.kafka)
    # What the adapters (inventory, firewall, manifests, lab, verify) take as the spec gives it: their only input
    # is the plan (kiln/plan/settings.py builds these).
    networks: NetworksPlan
    inventory: InventoryPlan
    rdma: RdmaPlan
    lustre: LustrePlan
    compute_pools: tuple[ComputePoolPlan, ...]
    kubernetes: KubernetesPlan
    ha: HaPlan  # failover pairs (kiln/plan/ha.py)
    versions: VersionsPlan

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def routes_for(self, host: Host) -> tuple[LnetRoute, ...]:
        """The routes a Lustre client or server needs: gateways on its own networks to networks it is not on
        (none for routers and object-store hosts, which run no Lustre)."""
        side = {"compute": "clients", "mgs": "servers", "mds": "servers", "oss": "servers"}.get(host.role)
        own = {nid.split("@", 1)[1] for nid in host.nids}
        return tuple(r for r in self.lnet_routes if r.side == side and r.via in own and r.net not in own)

    def compute_pool(self, name: str) -> ComputePoolPlan:
        for p in self.compute_pools:
            if p.name == name:
                return p
        raise KeyError(name)

    def local_nvme_mount(self, pool: str | None) -> str | None:
        """Where a compute pool's local NVMe scratch is mounted; None for a pool without one (or no pool)."""
        return next((p.local_nvme_mount for p in self.compute_pools if p.name == pool), None)

    def tunable(self, tid: str) -> Tunable:
        for t in self.tunables:
            if t.id == tid:
                return t
        raise KeyError(tid)
