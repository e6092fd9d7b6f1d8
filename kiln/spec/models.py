"""Pydantic models of one environment's spec: the `kiln:cluster` object of a Pulumi stack file.

Field descriptions are the stack reference (docs/stack-reference.md is generated from them).
Models check single fields; cross-field rules live in kiln.spec.checks so their errors can name
the exact path, the value and the fix.
"""

from __future__ import annotations

import datetime
import ipaddress
import math
import typing
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kiln.spec.types import (
    AbsPath,
    BucketName,
    CatalogName,
    ImageRef,
    Interface,
    K8sName,
    KeyPrefix,
    LabelKey,
    MountPoint,
    Name,
    OverrideId,
    OverrideText,
    ProtectionLevel,
    RdmaDevice,
    SecretName,
    TargetDevice,
    Text,
    Url,
    UserName,
    check_plain,
)

CIDR_RE = r"^[0-9A-Fa-f.:/]{1,64}$"
FSNAME_RE = r"^[A-Za-z][A-Za-z0-9_]{0,7}$"
#: Lustre OST pool names (lustre/utils/lustre_cfg.c: pool names are at most LOV_MAXPOOLNAME = 15 characters).
OST_POOL_RE = r"^[A-Za-z][A-Za-z0-9_]{0,14}$"


def _walk_plain(value: Any) -> None:
    if isinstance(value, str):
        check_plain(value)
    elif isinstance(value, list | tuple):
        for item in value:
            _walk_plain(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk_plain(key)
            _walk_plain(item)


def _takes_bool(annotation: Any) -> bool:
    """Whether a field's type admits a boolean (bool itself, or inside a union, Annotated or container)."""
    return annotation is bool or any(_takes_bool(a) for a in typing.get_args(annotation))


class Model(BaseModel):
    """Base of every spec model: unknown fields, inf/NaN and strings longer than 4 KiB are refused."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False, str_max_length=4096
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic's lax mode reads true as 1 and false as 0 for a number: `nodes: true` would plan one node.
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and not _takes_bool(field.annotation):
            raise ValueError(f"{str(value).lower()} is a yes/no value, not a number; fix: write the number itself")
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _plain_strings(cls, value: Any) -> Any:
        # Second wall behind the per-field types: no control characters or template delimiters anywhere.
        _walk_plain(value)
        return value


# Positive floats with physical bounds (inf, NaN, denormals and absurd magnitudes are refused). The bounds are
# generous, not recommendations: they keep the sizing model's arithmetic finite (a rate of 5e-324 GB/s or a
# budget of 1e-300 would turn its divisions into infinity).
DeviceGBps = Annotated[float, Field(ge=1e-6, le=1000.0)]  # one drive's or one GPU's rate, GB/s
DeviceTB = Annotated[float, Field(ge=1e-6, le=10000.0)]  # one drive
CapacityTB = Annotated[float, Field(ge=1e-6, le=1e7)]  # 1 MB .. 10 EB
ThroughputGBps = Annotated[float, Field(ge=1e-6, le=1e6)]
Minutes = Annotated[float, Field(ge=0.01, le=525600.0)]  # 0.6 s .. a year
BytesPerParam = Annotated[float, Field(ge=0.1, le=1024.0)]
BillionParams = Annotated[float, Field(ge=1e-6, le=1e6)]  # a thousand parameters .. a quadrillion


class NicGroup(Model):
    """A set of identical NICs in one host."""

    count: int = Field(ge=0, le=32, description="How many NICs of this model the host has.")
    nic: CatalogName = Field(
        description="NIC model from the hardware catalog (kiln/knowledge/hardware.yaml) or the stack's hardware.nics."
    )
    devices: list[RdmaDevice] | None = Field(
        default=None,
        description="RDMA device names, one per NIC, as the host shows them (`rdma link`, `ibdev2netdev`; e.g. "
        "mlx5_0). Give them on InfiniBand and RoCE fabrics: the numbering depends on the machine (a DGX H100's "
        "compute rails are mlx5_0, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_9, mlx5_10, mlx5_11); the default, "
        "mlx5_<n> counted across the host's NIC groups, is a placeholder and the plan warns. Unused on tcp.",
    )
    interfaces: list[Interface] | None = Field(
        default=None,
        description="Network interface names, one per NIC, as the host shows them (`ip -br link`). Give them on "
        "InfiniBand and RoCE fabrics: EL9 and Ubuntu name ports predictably (ibp24s0, ens1f0np0), which no "
        "default matches; the defaults, counted across the host's NIC groups, are the kernel's traditional "
        "names (ib<n> on InfiniBand, eth<n> after the management eth0 otherwise: podman's names for a lab "
        "container's networks), and the plan warns where an InfiniBand or RoCE group relies on them.",
    )


class Gpus(Model):
    model: CatalogName = Field(description="GPU model from the hardware catalog or the stack's hardware.gpus.")
    count: int = Field(
        ge=1, le=64, description="GPUs per node (up to 64: one OS image over a large NVLink domain counts all)."
    )


class LocalNvme(Model):
    count: int = Field(ge=0, le=32, description="Local NVMe drives per node (scratch, stage-in cache).")
    device: CatalogName = Field(description="NVMe model from the hardware catalog.")
    mount_point: MountPoint = Field(
        default="/mnt/local-nvme",
        description="Where the drives (one filesystem, e.g. RAID0 as on DGX /raid) are mounted; fio tests it.",
    )


#: Host names are <prefix><zero-padded number> (kiln.plan.topology).
HostnamePrefix = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")]


class ComputePool(Model):
    name: Name = Field(description="Pool name; also the Ansible group kiln_pool_<name>.")
    nodes: int = Field(ge=1, le=65536, description="Number of nodes in the pool.")
    hostname_prefix: HostnamePrefix | None = Field(
        default=None,
        description="Host names are <prefix><NNN> (e.g. gpu-001 for gpu-); default the pool name. Generated names "
        "may not collide with another pool's or a server's.",
    )
    gpu: Gpus | None = Field(
        default=None,
        description="GPU model and GPUs per node. Omit it, with compute_rails, for storage-only client hosts "
        "(benchmark or data-preparation clients that mount Lustre but run no GPU work).",
    )
    compute_rails: NicGroup | None = Field(
        default=None,
        description="NICs for GPU-to-GPU traffic (NCCL), one per rail; omitted with gpu on storage-only clients.",
    )
    storage_nics: NicGroup = Field(
        description="NICs that carry storage (LNet) traffic only; count 0 when shared_storage_rails carry it all."
    )
    shared_storage_rails: list[RdmaDevice] = Field(
        default_factory=list,
        max_length=32,
        description="Compute-rail devices whose port also carries storage (a host whose one port serves both): "
        "LNet runs o2ib on that HCA with a storage address and NID, NCCL keeps it as a rail. Each must be a device "
        "of compute_rails (RDMA fabrics only). The sizing model counts the port once and notes that storage reads "
        "and NCCL traffic share its line rate.",
    )
    ram_GiB: int = Field(ge=1, le=65536, description="Host RAM per node, GiB.")
    cpu_cores: int = Field(default=64, ge=1, le=4096, description="CPU cores per node (lru_size, ksocklnd credits).")
    local_nvme: LocalNvme | None = Field(default=None, description="Local NVMe drives.")
    management_interface: Interface | None = Field(
        default=None,
        description="Interface for bootstrap/socket traffic (NCCL_SOCKET_IFNAME). Default eth0, the name podman "
        "gives a lab container's first network; real hosts name it predictably (enp…, ens…, or a bond), so give "
        "it on InfiniBand and RoCE fabrics (the plan warns where it is left out).",
    )
    nccl_hcas: list[RdmaDevice] | None = Field(
        default=None, description="HCAs NCCL may use; default every compute-rail device. Must be rail devices."
    )
    topology_file: AbsPath | None = Field(default=None, description="NCCL topology XML path on the node (VMs).")

    @model_validator(mode="after")
    def _gpu_and_rails_together(self) -> ComputePool:
        if (self.gpu is None) != (self.compute_rails is None):
            given, missing = ("gpu", "compute_rails") if self.gpu is not None else ("compute_rails", "gpu")
            raise ValueError(
                f"{given} is given without {missing}: a GPU pool has both, a storage-only client pool has "
                f"neither; fix: add {missing} or drop {given}"
            )
        if self.gpu is None and (self.nccl_hcas or self.topology_file or self.shared_storage_rails):
            raise ValueError(
                "nccl_hcas, topology_file and shared_storage_rails are for GPU pools (a storage-only client has no "
                "rails); fix: drop them or give gpu and compute_rails"
            )
        return self

    @property
    def socket_interface(self) -> str:
        """The management interface NCCL bootstraps on: management_interface, else eth0 (the podman lab's name; the
        plan warns on InfiniBand and RoCE fabrics)."""
        return self.management_interface or "eth0"

    @property
    def gpus_per_node(self) -> int:
        """GPUs in one node of the pool (0 on storage-only clients)."""
        return self.gpu.count if self.gpu is not None else 0

    @property
    def rails_per_node(self) -> int:
        """Compute rails of one node (0 on storage-only clients)."""
        return self.compute_rails.count if self.compute_rails is not None else 0


class Compute(Model):
    pools: list[ComputePool] = Field(
        min_length=1, max_length=1024, description="Node pools: GPU nodes, and storage-only client hosts."
    )


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
    rdma_stack: Literal["inbox", "doca"] = Field(
        default="inbox",
        description="RDMA drivers and user space on the hosts. inbox: the distribution's kernel modules and "
        "rdma-core (nothing fetched from the internet). doca: NVIDIA's DOCA-Host repository of the versions.doca "
        "line and its doca-ofed profile, on Ubuntu 22.04/24.04 and EL 8/9 on x86_64 (the rdma role stops on other "
        "systems before any change); Lustre's o2iblnd must then be built against DOCA-OFED "
        "(docs/support-matrix.md).",
    )
    roce_gid_index: int = Field(default=3, ge=-1, le=255, description="RoCE GID index for NCCL; -1 lets NCCL choose.")
    roce_dscp: int = Field(
        default=26,
        ge=0,
        le=63,
        description="RoCE only: DSCP of RDMA traffic, mapped to the PFC priority on hosts and switches; NCCL_IB_TC "
        "and RDMA-CM's ToS carry it.",
    )
    mtu: int | None = Field(
        default=None,
        ge=1280,
        le=9000,
        description="Link MTU of the storage network. InfiniBand: the IB MTU (default 4096; IPoIB interfaces get it "
        "less 4 bytes). RoCE: the netdev MTU (default 9000), from which the kernel derives the RDMA path MTU as the "
        "largest IB MTU at or below it less 96 bytes of RoCE headers (iboe_get_mtu()): 4096 would give 2048. The "
        "switches must carry frames of this size; give a smaller value where they do not (the plan warns when the "
        "path MTU falls below 4096). tcp: not applied (default 1500).",
    )


class Networks(Model):
    management: str = Field(
        pattern=CIDR_RE, description="Management subnet (CIDR); one address per host, used by Ansible."
    )
    storage: str = Field(pattern=CIDR_RE, description="Storage subnet (CIDR); one address per storage NIC (LNet NIDs).")
    management_link_Gbps: float | None = Field(
        default=None, gt=0, le=3200,
        description="Line rate of one compute node's management (Ethernet) port, Gb/s: bounds the stage-in from a "
        "lake reached over the management network (objectstore.network).",
    )
    roce_rails: str | None = Field(
        default=None,
        pattern=CIDR_RE,
        description="RoCE only: subnet (CIDR) for the compute rails' IPv4 addresses, one per rail NIC; RoCEv2 "
        "needs one for its IPv4 GID (fabric.roce_gid_index). Required on RoCE fabrics with compute rails.",
    )
    reserve: dict[Name, int] = Field(
        default_factory=dict,
        description="Hosts whose addresses each host family keeps, keyed by a compute pool's name, mgs, mds, oss, "
        "objectstore or an LNet router group's name: the family takes that many hosts' management, storage and "
        "RoCE rail addresses even while it has fewer hosts, so growing it up to the reserve moves no other "
        "host's address or NID. Unset: families are packed, and growing one renumbers every host planned after "
        "it (kiln diff refuses that for the Lustre servers). Set it before the first deploy: adding or changing "
        "a reserve later moves the families after it.",
    )

    @field_validator("management", "storage", "roce_rails")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        return check_cidr(v)


def check_cidr(v: str | None) -> str | None:
    """A subnet hosts can be given addresses in, written in CIDR form (strict: no host bits)."""
    if v is None:
        return v
    check_plain(v)
    try:
        net = ipaddress.ip_network(v, strict=True)
    except ValueError as exc:
        raise ValueError(f"not a network in CIDR form ({exc}); fix: write it like 10.10.0.0/16") from exc
    for kind in ("loopback", "multicast", "link_local", "unspecified", "reserved"):
        if getattr(net, f"is_{kind}"):
            raise ValueError(f"a {kind.replace('_', '-')} network cannot be handed out to hosts; "
                             "fix: use a private subnet such as 10.10.0.0/16")
    return v


class Device(Model):
    """A storage device: a catalog name, or explicit figures."""

    catalog: CatalogName | None = Field(default=None, description="Device model from the hardware catalog.")
    kind: Literal["nvme", "ssd", "hdd"] = Field(default="nvme", description="Media class (tuning, metadata rate).")
    read_GBps: DeviceGBps | None = Field(default=None, description="Per-device sequential read, GB/s (≤ 1000).")
    write_GBps: DeviceGBps | None = Field(default=None, description="Per-device sequential write, GB/s (≤ 1000).")
    capacity_TB: DeviceTB | None = Field(default=None, description="Per-device capacity, TB (≤ 10000).")


#: How a target's drives reach its server: only shared drives can fail over (docs/stack-reference.md, attachment).
Attachment = Literal["internal", "shared-enclosure", "san", "nvmeof"]

ATTACHMENT_DESCRIPTION = (
    "How the drives behind each target reach the servers: internal (drives inside one server: only that server "
    "reaches them, so they cannot fail over), shared-enclosure (dual-ported drives in an enclosure both servers of "
    "a pair are cabled to, e.g. a dual-ported NVMe JBOF or a Storage Bridge Bay chassis with two server nodes), "
    "san (array LUNs both servers see over FC, iSCSI or SAS) or nvmeof (NVMe over Fabrics namespaces both servers "
    "connect to). failover: pairs needs one of the shared kinds: the partner must reach the drives to mount the "
    "target."
)


class TargetGroup(Model):
    """Targets (MDTs or OSTs) per server node."""

    per_node: int = Field(ge=1, le=64, description="Targets per server node.")
    devices_per_target: int = Field(default=1, ge=1, le=64, description="Drives behind one target (RAID or zpool).")
    device: Device = Field(description="The drive model behind each target.")
    paths: list[TargetDevice] | None = Field(
        default=None,
        description="Block device (ldiskfs) or zpool/dataset (zfs) of every target of this kind in the filesystem, "
        "in index order (one per target, not per node: failover partners see the same path); "
        "default /dev/disk/by-id/kiln-<kind><index:04x> (ldiskfs), <fsname>-<kind><index:04x>/<kind><index:04x> "
        "(zfs): the index in hexadecimal, as in the target's Lustre name.",
    )
    protection: ProtectionLevel | None = Field(
        default=None,
        description="Redundancy of the drives behind one target. zfs: mirror (striped two-way mirrors), raidz1-3, "
        "draid1-3 or none; ldiskfs: raid1, raid5, raid6, raid10 (Linux md), external (a RAID controller or array "
        "LUN, one device) or none. Default: zfs mirror for 2 drives (MDTs: any even count), raidz1 for 3, raidz2 "
        "for more; ldiskfs raid1 for 2-3 drives, raid6 for 4 or more (MDTs with an even count: raid10); one "
        "drive has no default (name external or none).",
    )
    chunk_KiB: int = Field(
        default=128,
        ge=4,
        le=65536,
        description="md RAID chunk size, KiB (ldiskfs raid5/6/10): sets mdadm --chunk and the ext4 stride.",
    )
    ashift: int = Field(
        default=12,
        ge=9,
        le=16,
        description="zfs pool ashift (log2 of the sector size ZFS writes): 12 for 4 KiB-sector and 512e drives.",
    )
    attachment: Attachment = Field(default="internal", description=ATTACHMENT_DESCRIPTION)


class Mgs(Model):
    mode: Literal["combined", "standalone"] = Field(
        default="combined", description="MGS on the first MDS (combined) or on its own node(s)."
    )
    device: TargetDevice | None = Field(
        default=None, description="MGT device (an array LUN or existing md device); default a mirrored pair of drives."
    )
    protection: ProtectionLevel | None = Field(
        default=None,
        description="Redundancy of the MGT's two drives: default mirror (zfs) or raid1 (ldiskfs); external when "
        "`device` names an array LUN.",
    )
    attachment: Attachment | None = Field(
        default=None,
        description="How the MGT's drives reach its server (as lustre.mds.mdts.attachment, the default: the MGT "
        "sits with the MDTs); a combined MGS fails over with its MDS, so failover pairs need a shared kind.",
    )


def _no_parent_dir(value: str) -> str:
    if ".." in value:
        raise ValueError("'..' is not allowed; fix: write the value without '..'")
    return value


FENCE_AGENT_RE = r"^(fence_[a-z0-9_]{2,30}|none-lab)$"


class Fencing(Model):
    """How Pacemaker powers off a failed server before its partner mounts the targets."""

    agent: str = Field(
        pattern=FENCE_AGENT_RE,
        description="fence-agents agent (fence_ipmilan, fence_redfish, fence_sbd, ...), or none-lab: no fencing "
        "(a lab without BMCs; the plan warns, and a real target could then be mounted twice).",
    )
    address: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9{}._:-]{1,253}$",
        description="BMC address of each server; {host} stands for the server name, e.g. {host}-bmc.mgmt.",
    )
    username: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9._@-]{1,64}$", description="BMC user (not secret)."
    )
    password_secret: str = Field(
        default="kiln:fencePassword",
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description="Name of the Pulumi secret config key (or env KILN_FENCE_PASSWORD) holding the BMC password.",
    )
    options: dict[
        Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,40}$")],
        Annotated[str, Field(pattern=r"^[A-Za-z0-9._:/@-]{0,200}$"), AfterValidator(_no_parent_dir)],
    ] = Field(
        default_factory=dict,
        max_length=64,
        description="Extra agent options (e.g. {lanplus: '1'}); names as `pcs stonith describe <agent>` lists them.",
    )

    @field_validator("address")
    @classmethod
    def _host_placeholder(cls, v: str | None) -> str | None:
        if v is not None and ("{" in v.replace("{host}", "") or "}" in v.replace("{host}", "")):
            raise ValueError("braces are allowed only as the {host} placeholder; fix: write e.g. '{host}-bmc.mgmt'")
        return v


def _both_tiers() -> list[Literal["mds", "oss"]]:
    return ["mds", "oss"]


class Ha(Model):
    """The HA manager that fails targets over between the servers of a pair."""

    manager: Literal["pacemaker"] = Field(default="pacemaker", description="Cluster manager (Pacemaker/Corosync).")
    fencing: Fencing | None = Field(default=None, description="Fencing (STONITH); required with failover pairs.")
    tiers: list[Literal["mds", "oss"]] = Field(
        default_factory=_both_tiers,
        min_length=1,
        max_length=2,
        description="Server tiers that pair up with failover: pairs (default both). Leaving mds out keeps the MGS "
        "and MDTs on single servers (the plan warns); the lab pairs its OSS only.",
    )

    @field_validator("tiers")
    @classmethod
    def _unique_tiers(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("a tier is named twice; fix: list mds and oss at most once each")
        return v


class Mds(Model):
    nodes: int = Field(ge=1, le=256, description="MDS nodes.")
    nics: NicGroup = Field(description="Storage NICs per MDS.")
    mdts: TargetGroup = Field(description="MDTs per MDS node.")
    colocated_with_oss: bool = Field(
        default=False,
        description="MDS and OSS share hosts and controllers (an appliance such as DDN AI400X2): the MDTs go on the "
        "first `nodes` OSS hosts, no separate MDS hosts are generated, nics must equal lustre.oss.nics, and the "
        "plan's server layer shares the server ceiling between MDT and OST traffic.",
    )


class ServerCeiling(Model):
    """What one storage server, or one appliance whose controllers several servers share, can move.

    Give the PCIe parts and the server class (the model derives a ceiling from them) or the ceiling the vendor
    publishes (read_GBps and write_GBps with their source); a published ceiling wins over the parts.
    """

    kind: Literal["self-built", "clusterstor-e1000-flash", "flash-appliance"] = Field(
        default="self-built",
        description="Server class, for a ceiling derived without a published figure: self-built (commodity servers "
        "with their own NVMe), clusterstor-e1000-flash (HPE ClusterStor E1000 flash SSU, each OSS of a pair on half of "
        "24 shared drives) or flash-appliance (a vendor appliance whose controllers run OSS VMs). Each class bounds "
        "one OSS at a published share of its NICs' line rate (docs/sizing-model.md, Servers by class).",
    )
    pcie_gen: int | None = Field(
        default=None, ge=3, le=6, description="PCIe generation of the server's slots; default the storage NIC's."
    )
    pcie_lanes: int | None = Field(
        default=None,
        ge=8,
        le=512,
        description="PCIe lanes that carry drive and NIC traffic; default x16 per storage NIC plus x4 per drive.",
    )
    read_GBps: ThroughputGBps | None = Field(
        default=None, le=10000, description="Published read ceiling of one unit (server or appliance), GB/s."
    )
    write_GBps: ThroughputGBps | None = Field(
        default=None, le=10000, description="Published write ceiling of one unit (server or appliance), GB/s."
    )
    servers_per_unit: int = Field(
        default=1,
        ge=1,
        le=16,
        description="OSS nodes that share one ceiling: 1 for a server, e.g. 4 for an appliance whose two "
        "controllers run four OSS virtual machines.",
    )
    source: Text | None = Field(
        default=None, description="Where the published ceiling comes from (document, table, URL); required with it."
    )


class Uplink(Model):
    """How one OSS reaches the shared drives of its OSTs: PCIe lanes (shared-enclosure) or links (san, nvmeof).
    The sizing model bounds the OSTs' data path by it (layer ost_uplinks)."""

    pcie_lanes: int | None = Field(
        default=None,
        ge=1,
        le=512,
        description="shared-enclosure: PCIe lanes from one server to the drives it serves, e.g. x2 per "
        "dual-ported NVMe drive (each port of a dual-ported drive has half its lanes) or the width of the "
        "server's links to a JBOF's switch.",
    )
    pcie_gen: int | None = Field(
        default=None, ge=3, le=5, description="PCIe generation of those lanes (3 to 5); default the OSS NICs'."
    )
    links: int | None = Field(default=None, ge=1, le=64, description="san, nvmeof: links from one server.")
    link_Gbps: float | None = Field(default=None, gt=0, le=3200, description="san, nvmeof: line rate of one link.")
    source: Text = Field(min_length=1, description="Where the figures come from (enclosure or array documentation).")


class Oss(Model):
    nodes: int = Field(ge=1, le=4096, description="OSS nodes.")
    nics: NicGroup = Field(description="Storage NICs per OSS.")
    osts: TargetGroup = Field(description="OSTs per OSS node.")
    server: ServerCeiling | None = Field(
        default=None,
        description="The server (or appliance) ceiling: PCIe parts or a published figure; default derived from "
        "the NICs' PCIe generation and x16 per NIC plus x4 per drive.",
    )
    uplink: Uplink | None = Field(
        default=None,
        description="How one OSS reaches shared OST drives (osts.attachment shared-enclosure, san or nvmeof); "
        "where given, the sizing model bounds the OSTs' data path by it. Omitted: no bound from the attachment.",
    )


def _canonical_lnet_net(v: str) -> str:
    # LNet reads a network without a number as number 0, and the number as a decimal (lnet/lnet/config.c).
    kind = v.rstrip("0123456789")
    return f"{kind}{int(v[len(kind):] or 0)}"


#: An LNet network name (o2ib0, tcp1), written with its number: o2ib means o2ib0.
LnetNetName = Annotated[str, Field(pattern=r"^(o2ib|tcp)\d{0,3}$"), AfterValidator(_canonical_lnet_net)]


class LnetNetwork(Model):
    name: LnetNetName = Field(
        description="LNet network name, e.g. o2ib0 or tcp0; o2ib means o2ib0 (it is written with its number).",
    )
    hosts: Literal["all", "clients", "servers"] = Field(
        default="all",
        description="Which hosts have NIDs on it: all (clients and servers meet on it), clients (the compute "
        "side of a routed filesystem) or servers (the storage side: MGS, MDS, OSS and object-store hosts). "
        "Clients and servers on different networks reach each other through lustre.routers.",
    )
    subnet: str | None = Field(
        default=None,
        pattern=CIDR_RE,
        description="IP subnet (CIDR) of the addresses behind this network's NIDs. Default: networks.storage "
        "while every network has hosts: all; on a routed filesystem (a network of clients or servers only) each "
        "network its own slice of networks.storage, which is split into as many equal subnets as the next power "
        "of two at or above the number of networks, given out in the order of lustre.lnet (10.21.0.0/22 with two "
        "networks: 10.21.0.0/23, 10.21.2.0/23): the two fabrics of a routed filesystem are separate IP networks.",
    )

    @field_validator("subnet")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        return check_cidr(v)


class LnetRouterGroup(Model):
    """Identical LNet router hosts that forward between one client-side and one server-side network."""

    name: Name = Field(description="Group name; also the Ansible group kiln_lnet_router_<name>.")
    count: int = Field(ge=1, le=256, description="Router hosts in the group (every one is a gateway of the route).")
    hostname_prefix: HostnamePrefix | None = Field(
        default=None, description="Host names are <prefix><NN> (e.g. rtr-01 for rtr-); default <name>-."
    )
    client_net: LnetNetName = Field(
        description="The network the clients are on (lustre.lnet with hosts: clients), e.g. o2ib0."
    )
    server_net: LnetNetName = Field(
        description="The network the servers are on (lustre.lnet with hosts: servers), e.g. o2ib1 or tcp0."
    )
    client_nics: NicGroup = Field(description="NICs of one router on client_net.")
    server_nics: NicGroup = Field(description="NICs of one router on server_net.")


class OstPool(Model):
    name: str = Field(pattern=OST_POOL_RE, description="OST pool name (1-15 characters), unique.")
    osts: list[Annotated[int, Field(ge=0, le=65535)]] = Field(
        min_length=1, description="OST indexes in the pool (0-65535), each listed once."
    )


class Directory(Model):
    path: AbsPath = Field(
        description="Directory under the Lustre mount point (absolute, in-filesystem; '//', '/.' and a trailing "
        "'/' are removed, '..' is refused); unique, also after conversion to a Kubernetes name."
    )
    purpose: Literal["datasets", "checkpoints", "smallfiles", "scratch"] = Field(
        description="What lives there; the plan derives the layout from it."
    )
    stripe_count: int | None = Field(
        default=None, ge=-1, le=2000, description="Override the derived stripe count (-1 = all)."
    )
    pool: Annotated[str, Field(pattern=OST_POOL_RE)] | None = Field(
        default=None, description="OST pool to confine the directory to."
    )
    mdt_count: int | None = Field(
        default=None,
        ge=-1,
        le=2000,
        description="Override the derived default directory striping (lfs setdirstripe -D -c): MDTs each new "
        "subdirectory spreads over (-1 = all MDTs, 1 = one MDT per subdirectory, balanced); at most the MDT count; "
        "0 = no default (subdirectories inherit).",
    )


QuotaBlocks = Annotated[str, Field(pattern=r"^(0|[1-9][0-9]{0,12}[KMGTP])$")]


class QuotaLimits(Model):
    """Default limits for every user, group or project that has no limits of its own (lfs setquota -U/-G/-P)."""

    block_soft: QuotaBlocks = Field(
        default="0", description="Block soft limit, binary suffix K/M/G/T/P (100G); 0 = none; above 1M when set."
    )
    block_hard: QuotaBlocks = Field(
        default="0", description="Block hard limit, binary suffix K/M/G/T/P; 0 = none; above 1M when set."
    )
    inode_soft: int = Field(default=0, ge=0, le=2**64 - 1, description="Inode (file) soft limit; 0 = none.")
    inode_hard: int = Field(default=0, ge=0, le=2**64 - 1, description="Inode (file) hard limit; 0 = none.")


class QuotaDefaults(Model):
    user: QuotaLimits | None = Field(default=None, description="Default user quota (lfs setquota -U).")
    group: QuotaLimits | None = Field(default=None, description="Default group quota (lfs setquota -G).")
    project: QuotaLimits | None = Field(default=None, description="Default project quota (lfs setquota -P).")


class Quotas(Model):
    enforce: Literal["none", "u", "g", "p", "ug", "up", "gp", "ugp"] = Field(
        default="ugp",
        description="Quota types the MDTs and OSTs enforce (u user, g group, p project); usage is tracked "
        "either way. Limits are set with lfs setquota (docs/runbooks/lustre-quotas.md).",
    )
    defaults: QuotaDefaults = Field(
        default_factory=QuotaDefaults,
        description="Default quota policy: limits for every user, group or project without its own; each type "
        "set must be enforced.",
    )


class Lustre(Model):
    fsname: str = Field(pattern=FSNAME_RE, description="Filesystem name (1-8 characters).")
    version: Literal["2.15", "2.16"] = Field(
        default="2.15",
        description="Lustre release line the servers and clients run (2.15 LTS or 2.16); picks parameter names "
        "and ranges from kiln/knowledge/lustre_params.yaml.",
    )
    backend: Literal["ldiskfs", "zfs"] = Field(default="ldiskfs", description="OSD backend.")
    mgs: Mgs = Field(default_factory=Mgs, description="Management server placement.")
    mds: Mds = Field(description="Metadata servers.")
    oss: Oss = Field(description="Object storage servers.")
    failover: Literal["none", "pairs"] = Field(
        default="pairs",
        description="HA pairs of servers: each server's targets fail over to its partner, which must reach their "
        "drives (lustre.mds.mdts.attachment, lustre.oss.osts.attachment and lustre.mgs.attachment a shared kind).",
    )
    ha: Ha = Field(default_factory=Ha, description="Pacemaker and fencing for failover pairs.")
    lnet: list[LnetNetwork] = Field(
        min_length=1, max_length=16, description="LNet networks (multi-rail over all storage NICs)."
    )
    routers: list[LnetRouterGroup] = Field(
        default_factory=list,
        max_length=64,
        description="LNet router groups between client-side and server-side networks (docs/lnet.md); one per "
        "pair of networks that clients and servers must cross.",
    )
    mount_point: MountPoint = Field(default="/lustre", description="Client mount point (absolute, not '/').")
    pools: list[OstPool] = Field(default_factory=list, max_length=4096, description="OST pools.")
    directories: list[Directory] = Field(
        default_factory=list, max_length=4096, description="Directories and their layouts."
    )
    quotas: Quotas = Field(default_factory=Quotas, description="Quota enforcement.")
    scheduler: Literal["slurm", "kubernetes", "none"] = Field(
        default="kubernetes",
        description="Job scheduler whose jobs Lustre's job stats are keyed by: slurm → jobid_var SLURM_JOB_ID; "
        "kubernetes → procname_uid (command name and uid); none → job stats off.",
    )

    def lnet_names(self, side: Literal["clients", "servers"]) -> list[str]:
        """The LNet networks one side's hosts put their storage NICs on, in spec order."""
        return [n.name for n in self.lnet if n.hosts in ("all", side)]

    @property
    def routed(self) -> bool:
        """Whether some LNet network belongs to one side only (clients and servers are joined by routers)."""
        return any(n.hosts != "all" for n in self.lnet)


class Bucket(Model):
    name: BucketName = Field(description="S3 bucket name (S3 naming rules: 3-63 of a-z 0-9 . -), unique.")
    purpose: Literal["datasets", "checkpoints", "artifacts", "logs"] = Field(
        default="datasets", description="What the bucket holds."
    )


class ObjectStore(Model):
    backend: Literal["seaweedfs", "external"] = Field(
        description="seaweedfs: deployed by kiln; external: an S3 endpoint."
    )
    endpoint: Url | None = Field(
        default=None, description="external only: the S3 endpoint URL (http or https, port 1-65535, no credentials)."
    )
    throughput_GBps: ThroughputGBps | None = Field(
        default=None, description="external only: the throughput you are sold."
    )
    network: Literal["storage", "management"] | None = Field(
        default=None,
        description="The network the data movers reach the lake over: storage (the fast fabric, where kiln puts "
        "SeaweedFS) or management (Ethernet: an external store outside the fabric). Default storage for seaweedfs, "
        "management for external; management needs networks.management_link_Gbps.",
    )
    nodes: int = Field(default=1, ge=0, le=1024, description="seaweedfs only: object-store nodes.")
    nics: NicGroup | None = Field(default=None, description="seaweedfs only: NICs per node.")
    disks: LocalNvme | None = Field(default=None, description="seaweedfs only: data disks per node.")
    capacity_TB: CapacityTB = Field(description="Usable capacity to provide, TB.")
    replication: str = Field(default="000", pattern=r"^[0-9]{3}$", description="SeaweedFS replication code.")
    buckets: list[Bucket] = Field(min_length=1, max_length=1000, description="Buckets kiln creates.")
    credentials_secret: SecretName = Field(
        default="kiln:s3SecretKey",
        description="Name of the Pulumi secret config key (or env KILN_S3_SECRET_KEY) holding the S3 secret key.",
    )
    access_key_id: str = Field(
        default="kiln", pattern=r"^[A-Za-z0-9]{3,64}$", description="S3 access key id (not secret)."
    )


class Checkpoint(Model):
    interval_min: Minutes = Field(description="Minutes between checkpoints (at most a year).")
    budget_fraction: float = Field(ge=1e-4, lt=1, description="Share of training time checkpoint saves may take.")
    sharded: bool = Field(default=True, description="One file per rank (DCP/FSDP) rather than one big file.")
    bytes_per_param: BytesPerParam | None = Field(default=None, description="Override the catalog's 14 B/param.")
    keep: int | None = Field(
        default=None, ge=1, le=1000,
        description="Checkpoints kept on Lustre (capacity plan); default dataflow.checkpoints.keep_resident, else 2.",
    )


class ReadDemand(Model):
    profile: CatalogName | None = Field(default=None, description="Named profile from kiln/knowledge/workload.yaml.")
    GBps_per_gpu: DeviceGBps | None = Field(default=None, description="Explicit per-GPU read demand, GB/s.")


class Samples(Model):
    """How training reads its data: sample size and files per sample size the request-rate layers."""

    size_KB: float = Field(ge=0.001, le=10_000_000, description="Mean sample size, KB (10^3 bytes).")
    files_per_sample: int = Field(
        default=1, ge=0, le=1024, description="Files opened per sample (1: a file per sample; 0: samples packed "
        "into large shards, so opens do not limit reads)."
    )
    readers_per_gpu: int | None = Field(
        default=None, ge=1, le=1024,
        description="Data-loader reader processes or threads per GPU (the pipeline's concurrency); default 4, "
        "MLPerf Storage's DLIO read_threads.",
    )


class Workload(Model):
    model_params_B: BillionParams = Field(description="Model parameters, billions.")
    checkpoint: Checkpoint = Field(description="Checkpoint cadence and budget.")
    dataset_TB: CapacityTB = Field(description="Training dataset size, TB: the share of the lake staged into Lustre.")
    dataset_files: int | None = Field(
        default=None, ge=1, le=10**13,
        description="Files in the staged dataset (MDT inodes, OST objects); default from workload.samples, else "
        "dataset_TB ÷ 1 MiB (mkfs.lustre's own assumption).",
    )
    scratch_TB: float = Field(
        default=0, ge=0, le=1e7,
        description="Scratch space the plan keeps free on Lustre besides dataset and checkpoints, TB.",
    )
    read_demand: ReadDemand = Field(
        default_factory=lambda: ReadDemand(profile="llm-text"),
        description="Per-GPU read demand: a named profile or GBps_per_gpu.",
    )
    samples: Samples | None = Field(
        default=None,
        description="Sample size and files per sample; with it the plan adds metadata and IOPS layers "
        "(omitted: large sequential reads are assumed).",
    )


#: A glob over object keys / relative paths ('*' within a path segment, '**' across, '?', '[...]', '{a,b}').
Glob = Annotated[str, Field(pattern=r"^[A-Za-z0-9._/*?\[\]!{},=+@-]{1,256}$")]

#: A file name (no '/'): the commit marker a checkpoint writer creates last.
FileName = Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,255}$")]

#: A five-field cron schedule (minute hour day-of-month month day-of-week), digits and * / , - only.
Cron = Annotated[str, Field(pattern=r"^[0-9*/,-]+( [0-9*/,-]+){4}$")]


class DataLink(Model):
    """A bucket prefix linked to a directory of the filesystem (an FSx data repository association)."""

    name: Name = Field(description="Link name: `kiln data stage <stack> <name>` and the mover's state file use it.")
    bucket: BucketName = Field(description="Bucket of the lake; must be one of objectstore.buckets.")
    prefix: KeyPrefix = Field(default="", description="Key prefix inside the bucket ('' = the whole bucket).")
    path: AbsPath = Field(
        description="In-filesystem directory the prefix maps to (e.g. /datasets/imagenet); must lie under one of "
        "lustre.directories so its layout is set before any byte is written."
    )
    import_policy: Literal["preload", "metadata", "on-access"] = Field(
        default="preload",
        description="preload: copy every selected object now; metadata: list and record objects, copy none "
        "(a later stage copies them); on-access: copy on first open, only where the platform can (Lustre HSM); "
        "kiln's mover reports it not applicable and falls back to metadata.",
    )
    import_trigger: Literal["on-demand", "schedule", "continuous"] = Field(
        default="on-demand",
        description="on-demand: only when `kiln data stage` runs (a Slurm prolog); schedule: on `schedule`; "
        "continuous: the mover service re-syncs every movers.poll_s.",
    )
    schedule: Cron | None = Field(default=None, description="Cron schedule when import_trigger is schedule.")
    include: list[Glob] = Field(
        default_factory=list, description="Only keys matching one of these globs move ('' list = everything)."
    )
    exclude: list[Glob] = Field(default_factory=list, description="Keys matching one of these globs never move.")
    export_policy: Literal["none", "on-commit", "continuous"] = Field(
        default="none",
        description="none: read-only link; on-commit: `kiln data export` (an epilog) writes new or changed files "
        "back; continuous: the mover service writes them back every movers.poll_s.",
    )
    conflict: Literal["fail", "skip", "overwrite-if-dirty", "overwrite"] = Field(
        default="fail",
        description="What a pass does with a file changed on both sides since the mover last verified it (or "
        "found at the destination without a record and with other bytes): fail: leave both, the file fails the "
        "pass; skip: leave both, report it; overwrite-if-dirty: the pass's source replaces the destination "
        "unless the destination is newer; overwrite: the source always replaces it, each replacement reported "
        "(Azure Managed Lustre's import conflict modes).",
    )
    deletions: Literal["keep", "propagate"] = Field(
        default="keep",
        description="keep: a file deleted on one side stays on the other; propagate: an import deletes local "
        "files whose object is gone, an export deletes objects whose file is gone, and a rename moves no bytes "
        "(FSx data repository association DELETED events).",
    )
    max_delete_fraction: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Deletion guard: a pass that would delete more than this share of the link's files (at least "
        "one file is always allowed) deletes none and fails, naming the count.",
    )
    posix_metadata: bool = Field(
        default=False,
        description="Keep POSIX mode, owner, group and mtime as object metadata on export and restore them on "
        "import (one HEAD per object moved); symlinks and empty directories move either way.",
    )


class DataCheckpoints(Model):
    """Asynchronous checkpoint write-back: training writes to the fast tier, the mover uploads behind it."""

    path: AbsPath = Field(description="In-filesystem checkpoint directory; one subdirectory per checkpoint.")
    bucket: BucketName = Field(description="Bucket the checkpoints are written back to.")
    prefix: KeyPrefix = Field(default="", description="Key prefix inside the bucket.")
    commit_marker: FileName = Field(
        default=".metadata",
        description="File whose presence says a checkpoint directory is complete (PyTorch DCP writes .metadata "
        "last); the mover never uploads a directory without it.",
    )
    write_back: Literal["async", "sync"] = Field(
        default="async",
        description="async: the job returns once the fast tier holds the checkpoint and the mover uploads it; "
        "sync: the plan predicts the job blocked for write + upload (the naive baseline).",
    )
    part_size_MiB: int | None = Field(
        default=None, ge=5, le=5120, description="Multipart part size (S3: 5 MiB to 5 GiB); default planned."
    )
    keep_resident: int = Field(
        default=2, ge=1, le=1000, description="Newest committed checkpoints kept on the fast tier."
    )
    release_after_verify: bool = Field(
        default=True,
        description="Delete older checkpoints from the fast tier once their lake copy is verified by checksum; "
        "never before.",
    )


class DataModels(Model):
    """Model distribution: new objects under a prefix are pushed to a pool's fast tier as they appear."""

    bucket: BucketName = Field(description="Bucket holding the models.")
    prefix: KeyPrefix = Field(default="", description="Key prefix watched for new objects.")
    pool: Name = Field(description="Compute pool whose nodes receive the models (e.g. inference nodes).")
    target: AbsPath | None = Field(
        default=None, description="Directory on each node; default <pool local_nvme.mount_point>/models."
    )
    events: Literal["filer-subscribe", "poll"] = Field(
        default="filer-subscribe",
        description="filer-subscribe: driven by the SeaweedFS filer metadata subscription (change events); "
        "poll: list the prefix every movers.poll_s (external object stores).",
    )
    fanout: Literal["relay", "direct"] = Field(
        default="relay",
        description="relay: one node pulls from the lake and the others copy from peers, so the lake serves each "
        "byte about once; direct: every node pulls from the lake (N× the bytes).",
    )
    max_nodes: int | None = Field(
        default=None, ge=1, le=65536, description="At most this many nodes of the pool receive (the first ones); "
        "default every node."
    )
    receivers_per_node: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Receiver directories per node: 1 = target itself; n > 1 = target/receiver-1 … receiver-n, "
        "stand-ins for n nodes' local NVMe where nodes share no filesystem (the podman lab).",
    )
    filer_access: bool = Field(
        default=False,
        description="Open the SeaweedFS filer's gRPC port (firewall role) to this entry's receiver nodes, so that "
        "their model service can subscribe to its change events. The filer trusts whoever reaches it "
        "(docs/security.md): an explicit decision. Without it the datamover role does not run the subscription.",
    )


class DataMovers(Model):
    """Which hosts move data and how hard they push."""

    pools: list[Name] = Field(
        default_factory=list,
        description="Compute pools whose nodes run the mover (Lustre clients with storage NICs); default the first.",
    )
    max_hosts: int | None = Field(
        default=None, ge=1, le=65536, description="At most this many mover hosts (default every node of the pools)."
    )
    concurrency: int | None = Field(
        default=None, ge=1, le=1024, description="Parallel transfers per mover host; default planned."
    )
    poll_s: int = Field(default=60, ge=5, le=86400, description="Seconds between passes of continuous links.")


class Dataflow(Model):
    """Data flow between the lake (object store) and the fast tier (Lustre, local NVMe)."""

    links: list[DataLink] = Field(default_factory=list, description="Bucket prefixes linked to directories.")
    checkpoints: DataCheckpoints | None = Field(default=None, description="Asynchronous checkpoint write-back.")
    models: list[DataModels] = Field(default_factory=list, description="Model distribution to a pool's fast tier.")
    movers: DataMovers = Field(default_factory=DataMovers, description="Mover hosts and concurrency.")


#: Namespaces Kubernetes reserves for its own components (kube-system, kube-public, kube-node-lease).
KUBERNETES_NAMESPACE_PREFIX = "kube-"


class Images(Model):
    """kiln's own container images, as the cluster pulls them (kiln publishes none: build them with
    scripts/build-mover-image.sh and scripts/build-health-image.sh and push them to your registry)."""

    datamover: ImageRef | None = Field(
        default=None, description="The data mover's image (Jobs, CronJob, model distribution), with a tag, a digest or "
        "both, e.g. registry.example.com/hpc/kiln-datamover:0.1.0@sha256:<digest>; unset: "
        "kiln/knowledge/kubernetes.yaml dataflow.mover_image (a local build).",
    )
    health: ImageRef | None = Field(
        default=None, description="kiln-health's image (the DaemonSet on GPU nodes), as datamover; unset: "
        "kiln/knowledge/kubernetes.yaml health.image.",
    )


class Kubernetes(Model):
    version: str = Field(default="1.31", pattern=r"^1\.\d{2}$", description="Kubernetes minor version (schemas).")
    gpu_node_label: LabelKey = Field(default="nvidia.com/gpu.present", description="Label selecting GPU nodes.")
    storage_namespace: K8sName = Field(
        default="kiln-storage", description="Namespace of the object store and Lustre CSI."
    )
    system_namespace: K8sName = Field(
        default="kiln-system", description="Namespace of the GPU and network operators."
    )
    training_namespace: K8sName = Field(
        default="training", description="Namespace of training jobs and acceptance Jobs."
    )
    health_namespace: K8sName = Field(
        default="kiln-health",
        description="Namespace of the kiln-health DaemonSet (read-only host /proc and /sys; docs/monitoring.md).",
    )
    models_namespace: K8sName = Field(
        default="kiln-models",
        description="Namespace of the model distribution DaemonSets (dataflow.models; they write each receiver "
        "node's local NVMe through a hostPath the policy pack admits there and nowhere else).",
    )
    storage_class: K8sName | Literal[""] = Field(
        default="", description="StorageClass for SeaweedFS volumes ('' = default)."
    )
    images: Images = Field(default_factory=Images, description="kiln's own images: registry, tag and digest per stack.")

    @field_validator("storage_namespace", "system_namespace", "training_namespace", "health_namespace",
                     "models_namespace")
    @classmethod
    def _not_a_kubernetes_namespace(cls, value: str) -> str:
        if value.startswith(KUBERNETES_NAMESPACE_PREFIX):
            raise ValueError(
                f"{value!r} is a Kubernetes system namespace: the prefix {KUBERNETES_NAMESPACE_PREFIX} is reserved for "
                "them (kube-system, kube-public, kube-node-lease; Kubernetes docs, Namespaces), where the cluster's "
                "own components run; fix: use a namespace of kiln's, such as the default of this field"
            )
        return value

    @model_validator(mode="after")
    def _models_namespace_apart(self) -> Kubernetes:
        others = {"training_namespace": self.training_namespace, "storage_namespace": self.storage_namespace,
                  "system_namespace": self.system_namespace, "health_namespace": self.health_namespace}
        same = [k for k, v in others.items() if v == self.models_namespace]
        if same:
            raise ValueError(
                f"models_namespace {self.models_namespace!r} is also {same[0]}: the policy pack admits the model "
                "receivers' hostPath only in a namespace of their own; fix: give models_namespace another name"
            )
        return self


class Inventory(Model):
    connection: Literal["ssh", "podman"] = Field(default="ssh", description="How Ansible reaches the hosts.")
    ansible_user: UserName | None = Field(default=None, description="Remote user for ssh.")
    address_by: Literal["management_ip", "hostname"] = Field(
        default="management_ip", description="What ansible_host is set to."
    )


class Waiver(Model):
    """An accepted shortfall of one acceptance check: its FAIL rows stay FAIL in the report, marked waived with the
    reason, and do not fail `kiln verify`'s exit code (`--strict` ignores waivers). An ERROR is never waived."""

    check: Annotated[str, Field(pattern=r"^[a-z0-9_]+(\.[a-z0-9_]+)+$", max_length=80)] = Field(
        description="Acceptance check id, e.g. dataflow.stage_in (`kiln plan` lists the plan's targets)."
    )
    reason: Annotated[Text, Field(min_length=20)] = Field(
        description="Why the shortfall is accepted, and who decided it (shown in the report beside the row)."
    )
    expires: datetime.date | None = Field(
        default=None, description="Last day the waiver applies (YYYY-MM-DD); after it the FAIL counts again."
    )


class Acceptance(Model):
    """How the acceptance suite (`kiln verify` and the acceptance Jobs) repeats and judges measurements."""

    repetitions: int = Field(default=5, ge=1, le=100, description="Measured repetitions after warm-up.")
    warmup: int = Field(default=1, ge=0, le=10, description="Unmeasured warm-up runs before the repetitions.")
    warn_fraction: float = Field(default=0.9, ge=0.01, le=1, description="Median below expected × this warns.")
    fail_fraction: float = Field(default=0.75, ge=0.01, le=1, description="Median below expected × this fails.")
    cv_limit: float = Field(default=0.1, ge=0.01, le=1, description="Coefficient of variation above this is unstable.")
    fio_size_factor: float = Field(
        default=2.0,
        ge=0.0,
        le=100.0,
        description="fio data per host as a multiple of its RAM, split over the jobs (defeats the page cache); "
        "0 = a small fixed size (the lab).",
    )
    waivers: list[Waiver] = Field(
        default_factory=list,
        max_length=64,
        description="Accepted shortfalls: checks whose FAIL is reported as FAIL (waived, with the reason) without "
        "failing the run (docs/acceptance.md, \"Waivers\").",
    )

    @model_validator(mode="after")
    def _fractions(self) -> Acceptance:
        if self.warn_fraction < self.fail_fraction:
            raise ValueError(
                f"warn_fraction {self.warn_fraction} is below fail_fraction {self.fail_fraction}, so nothing could "
                "warn before it fails; fix: set warn_fraction ≥ fail_fraction"
            )
        seen = [w.check for w in self.waivers]
        dup = sorted({c for c in seen if seen.count(c) > 1})
        if dup:
            raise ValueError(f"waivers name {dup[0]!r} more than once; fix: keep one waiver per check")
        return self


_OVERRIDE_TEXT: TypeAdapter[str] = TypeAdapter(OverrideText)


def _override_value(value: object) -> int | float | str:
    """An override value: an integer or finite float of magnitude at most 2^64, or a short plain string."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) > 2**64:
            raise ValueError("not a finite number of magnitude at most 2^64; fix: use the value docs/tuning.md gives")
        return value
    if isinstance(value, str):
        check_plain(value)
        if ".." in value:
            raise ValueError("'..' is not allowed in an override value; fix: write the value itself")
        try:
            return _OVERRIDE_TEXT.validate_python(value.strip())
        except ValidationError:
            raise ValueError(
                "a string override holds letters, digits, spaces and _ . , : / = + @ - only (at most 256); "
                "fix: remove quotes and shell characters"
            ) from None
    raise ValueError("an override value is a number or a string; fix: write one value per id")


OverrideValue = Annotated[int | float | str, PlainValidator(_override_value)]


class InlineNic(Model):
    """A NIC that is not in the hardware catalog, with its figures and where they come from."""

    description: Text = Field(min_length=1, description="What the NIC is (vendor, model, ports).")
    link_Gbps: float = Field(gt=0, le=3200, description="Line rate of one port as the host uses it, Gb/s.")
    fabrics: list[Literal["infiniband", "roce", "tcp"]] = Field(min_length=1, description="Fabrics it runs.")
    pcie_gen: int = Field(ge=3, le=6, description="PCIe generation of its host interface.")
    source: Text = Field(min_length=1, description="Datasheet or measurement the figures come from.")


class InlineGpu(Model):
    """A GPU that is not in the hardware catalog, with its figures and where they come from."""

    description: Text = Field(min_length=1, description="What the GPU is (vendor, model, form factor).")
    memory_GB: float = Field(gt=0, le=4096, description="GPU memory, GB.")
    pcie_gen: int = Field(ge=3, le=6, description="PCIe generation of its host interface.")
    nvswitch: bool = Field(description="Whether the node's GPUs meet behind an NVSwitch.")
    nvlink_GBps: float = Field(ge=0, le=10000, description="NVLink bandwidth per GPU, GB/s (0: none).")
    nccl_intra_busbw_GBps: float = Field(
        gt=0, le=10000, description="all_reduce_perf bus bandwidth inside one node at large sizes, GB/s."
    )
    source: Text = Field(
        min_length=1, description="Datasheet or measurement the figures come from (busbw included)."
    )


class Hardware(Model):
    """Hardware the catalog lacks, described inline; names must not shadow catalog entries."""

    nics: dict[CatalogName, InlineNic] = Field(
        default_factory=dict, description="NIC models by name; NicGroup.nic may name them."
    )
    gpus: dict[CatalogName, InlineGpu] = Field(
        default_factory=dict, description="GPU models by name; a pool's gpu.model may name them."
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
    filesystems: list[AbsPath] = Field(
        default_factory=lambda: ["/"], max_length=64,
        description="Host mount points whose space used alerts at fill_warn/critical_percent (node_exporter "
        "filesystem collector), on every host that has them.",
    )
    fault_injection: bool = Field(
        default=False,
        description="kiln verify injects faults (stops a SeaweedFS volume server and a node_exporter, drifts a "
        "sysctl, fills fault_filesystem) and checks that each fires its alert and clears after repair. For a "
        "lab, or a cluster before it takes work: the faults are real for a minute.",
    )
    fault_filesystem: AbsPath | None = Field(
        default=None,
        description="A small scratch filesystem (at most 1 GiB: a tmpfs or loop mount, as the lab's) the disk-fill "
        "fault may fill past fill_warn_percent; also alerted on as in `filesystems`. Never one that holds data.",
    )
    alert_for_max_s: int | None = Field(
        default=None, ge=0, le=3600,
        description="Caps every alert rule's `for:` duration, seconds (the lab sets it small so injected faults "
        "fire within a run); default: each rule's own.",
    )
    lustre_snapshots: list[SnapshotSchedule] = Field(
        default_factory=list, description="Lustre snapshot schedules (ZFS backend only)."
    )


class Versions(Model):
    """Versions the nodes run, pinned so an upgrade is a reviewed spec change (kiln/knowledge/compat.yaml)."""

    lustre_client: Literal["2.15", "2.16"] | None = Field(
        default=None,
        description="Lustre release line of the clients; unset: the servers' (lustre.version). Must interoperate "
        "with the servers' line (kiln/knowledge/compat.yaml lustre_interop).",
    )
    gpu_driver: int = Field(default=550, ge=400, le=999, description="NVIDIA driver branch of the GPU nodes (550).")
    gpu_kernel_modules: Literal["open", "proprietary"] = Field(
        default="open",
        description="Flavor of the driver's kernel modules: open (NVIDIA's default from branch 560, and the only "
        "one Blackwell runs) or proprietary; the gpu role installs the branch's packages of that flavor.",
    )
    cuda: str = Field(
        default="12.4", pattern=r"^[0-9]{2}\.[0-9]$",
        description="CUDA toolkit of the GPU nodes; needs a driver branch at least its minimum (compat.yaml).",
    )
    nccl: str = Field(
        default="2.21.5", pattern=r"^[0-9]\.[0-9]{1,2}\.[0-9]{1,2}$",
        description="NCCL release; needs a build for the pinned CUDA (compat.yaml nccl_cuda).",
    )
    doca: str = Field(
        default="2.9", pattern=r"^[0-9]\.[0-9]{1,2}$",
        description="NVIDIA DOCA-Host (OFED) release line of the RDMA hosts with fabric.rdma_stack: doca; needs "
        "the kernel series, and the rdma role installs the line's point release (compat.yaml doca_kernel).",
    )
    kernel: str = Field(
        default="6.1", pattern=r"^[0-9]\.[0-9]{1,2}$",
        description="Kernel series every host runs (Debian 12: 6.1).",
    )
    seaweedfs: str = Field(
        default="3.39", pattern=r"^[0-9]\.[0-9]{2}$",
        description="SeaweedFS release of the object store (objectstore.backend: seaweedfs); the objectstore role "
        "installs only a weed binary that reports it. Upgrade within one build (compat.yaml seaweedfs_releases).",
    )


KAFKA_VERSION_RE = r"^[0-9]{1,2}\.[0-9]{1,3}\.[0-9]{1,3}$"


class KafkaConsumers(Model):
    """Who reads a topic: one training job on one compute pool, each rank reading its own partitions."""

    pool: Name = Field(description="The compute pool the training job runs on (every node of it consumes).")
    ranks_per_node: int | None = Field(
        default=None, ge=1, le=64, description="Consuming processes per node; default the pool's GPUs per node."
    )
    tokens_per_s_per_node: float | None = Field(
        default=None, gt=0, le=1e9,
        description="Tokens one node trains on per second. Omitted: derived from the model size, the pool's GPUs "
        "and mfu (6 FLOPs per parameter per token, docs/kafka.md).",
    )
    model_params_B: BillionParams | None = Field(
        default=None,
        description="Model size in billions of parameters (to derive tokens_per_s_per_node); default "
        "workload.model_params_B.",
    )
    mfu: float | None = Field(
        default=None, gt=0, le=1,
        description="Model FLOPs utilisation for the derivation; default 0.40 (kiln/knowledge/kafka.yaml).",
    )
    checkpoint_interval_min: Minutes | None = Field(
        default=None, description="Minutes between the job's checkpoints; default workload.checkpoint.interval_min."
    )
    checkpoints_kept: int = Field(default=3, ge=1, le=1000, description="Checkpoints the job keeps to resume from.")
    restart_min: Minutes = Field(
        default=60, description="Minutes from a crash to the job consuming again (requeue, load, warm-up)."
    )


class KafkaTopicSpec(Model):
    """One token topic: fixed-size messages of token ids, consumed by one training job."""

    name: K8sName = Field(description="Topic name (also the KafkaTopic's metadata.name).")
    partitions: Annotated[int, Field(ge=1, le=100000)] | Literal["auto"] = Field(
        default="auto",
        description="Partitions; auto: the smallest highly composite multiple of the consumer count. A given count "
        "must be a multiple of the consumers (nodes × ranks per node).",
    )
    replication: int = Field(default=3, ge=1, le=7, description="Replicas of each partition.")
    min_insync_replicas: int = Field(
        default=2, ge=1, le=7, description="Replicas that must have a write before acks=all acknowledges it."
    )
    compression: Literal["zstd", "lz4", "gzip", "snappy", "none"] = Field(
        default="zstd", description="Producer codec (gzip caps a producer at a few MB/s; zstd or lz4 do not)."
    )
    retention_hours: Annotated[float, Field(gt=0, le=87600)] | Literal["auto"] = Field(
        default="auto",
        description="How long messages stay; auto: 1.5 × (oldest kept checkpoint's age + restart time), at least a "
        "day. Shorter than the oldest kept checkpoint plus the restart time is refused.",
    )
    tokens_per_message: int = Field(default=2048, ge=1, le=1048576, description="Token ids per message.")
    dtype: Literal["uint16", "uint32"] = Field(
        default="uint32", description="Token id type (uint16 when the vocabulary has at most 65,536 entries)."
    )
    codec_ratio: float | None = Field(
        default=None, ge=1, le=100,
        description="Raw bytes ÷ compressed bytes of the codec on your own token ids (measured on a sample; say how "
        "in a comment); default kiln/knowledge/kafka.yaml codec_ratio, measured on real token ids.",
    )
    consumers: KafkaConsumers = Field(description="The training job that reads the topic.")


class Kafka(Model):
    """A Kafka cluster in KRaft mode that streams token ids to training."""

    mode: Literal["strimzi", "baremetal"] = Field(
        default="strimzi",
        description="strimzi: Kafka, KafkaNodePool and KafkaTopic resources on Kubernetes; baremetal: the kafka role.",
    )
    version: Annotated[str, Field(pattern=KAFKA_VERSION_RE)] = Field(
        default="4.3.1", description="Kafka version (with strimzi: one the pinned Strimzi release runs)."
    )
    controllers: Annotated[int, Field(ge=1, le=9)] | Literal["auto"] = Field(
        default="auto", description="KRaft controllers; auto: 3."
    )
    brokers: Annotated[int, Field(ge=1, le=1000)] | Literal["auto"] = Field(
        default="auto", description="Brokers; auto: the most of replication, retained bytes, ingress and partitions."
    )
    combined: bool = Field(
        default=False,
        description="baremetal only: the first brokers run the KRaft controllers too (combined mode, fewer hosts, "
        "for small or lab clusters; Kafka's KRaft docs advise separate controllers in production).",
    )
    storage_GB_per_broker: float = Field(
        default=1000, ge=1, le=1e6,
        description="Log disk per broker, GB; at least 1: a broker keeps whole log segments, 1 GiB each by default "
                    "(log.segment.bytes, Apache Kafka Broker Configs).")
    heap_GB: float | None = Field(
        default=None, gt=0, le=64,
        description="JVM heap of each node (-Xms = -Xmx); default kiln/knowledge/kafka.yaml broker_heap_GB. The rest "
        "of the host's memory is the page cache the brokers serve reads from.",
    )
    namespace: K8sName = Field(default="kafka", description="Kubernetes namespace of the Strimzi resources.")
    auth: Literal["none", "scram-sha-512", "tls"] = Field(
        default="none", description="Client authentication (a KafkaUser per consuming job when not none)."
    )
    topics: list[KafkaTopicSpec] = Field(min_length=1, max_length=64, description="Token topics.")


class Pipeline(Model):
    """Streams that feed training beside the filesystem."""

    kafka: Kafka | None = Field(default=None, description="A Kafka token stream (docs/kafka.md).")


class ClusterSpec(Model):
    """One environment: the `kiln:cluster` object of stacks/Pulumi.<env>.yaml."""

    name: Name = Field(description="Environment name.")
    description: Text = Field(default="", description="Free text (one line, at most 512 characters).")
    compute: Compute = Field(description="GPU nodes.")
    fabric: Fabric = Field(description="Compute and storage fabric.")
    networks: Networks = Field(description="IP subnets the plan hands addresses out of.")
    lustre: Lustre = Field(description="The Lustre filesystem.")
    objectstore: ObjectStore = Field(description="The S3 data lake.")
    workload: Workload = Field(description="What the cluster trains: sizes the plan's demand.")
    hardware: Hardware = Field(
        default_factory=Hardware, description="NICs and GPUs the catalog lacks, with figures and sources."
    )
    kubernetes: Kubernetes = Field(
        default_factory=Kubernetes, description="The Kubernetes side (Pulumi program, kiln render)."
    )
    inventory: Inventory = Field(default_factory=Inventory, description="How Ansible reaches hosts.")
    acceptance: Acceptance = Field(default_factory=Acceptance, description="How measurements are repeated and judged.")
    dataflow: Dataflow | None = Field(
        default=None, description="Data flow between the lake and the fast tier (links, checkpoints, models)."
    )
    monitoring: Monitoring = Field(
        default_factory=Monitoring, description="Prometheus, alerts, exporters and Lustre snapshots."
    )
    versions: Versions = Field(
        default_factory=Versions, description="Pinned versions of the node software (compatibility checked)."
    )
    pipeline: Pipeline | None = Field(default=None, description="Streams feeding training (a Kafka token stream).")
    overrides: dict[OverrideId, OverrideValue] = Field(
        default_factory=dict,
        max_length=1024,
        description="Replace any derived tuning value by its id (see docs/tuning.md). A string value is one line "
        "of letters, digits, spaces and _ . , : / = + @ - (no quotes or shell characters).",
    )
