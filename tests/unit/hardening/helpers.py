"""Shared pieces of the hardening suite: walking every string field of the spec, running the whole pipeline."""

from __future__ import annotations

import copy
import functools
import re
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.render.manifests import render_manifests
from kiln.spec.models import ClusterSpec
from kiln.spec.types import check_plain
from tests.conftest import stack_data

#: Characters that end a value in a shell script, a systemd unit, a sysctl file, nccl.conf or YAML.
SHELL_META = set("\"'`$;|&<>(){}\\!*?~#\n\r\t ") | {"\x00"}

#: Values that must never be accepted in any field except free text (where only the first group is refused).
ALWAYS_REFUSED = [
    "a\nb",
    "mlx5_0\nNCCL_NET_PLUGIN=evil",
    "x\r\ny",
    "nul\x00byte",
    "esc\x1b[31m",
    "line\u2028sep",
    "rtl\u202eoverride",
    "/x{{ lookup('pipe', 'id') }}",
    "{% raw %}x",
    "{# c #}",
]
SHELL_HOSTILE = ['a"; id; "', "$(id)", "`id`", "a b", "../../etc/passwd", "a;reboot", "'q'", "a|b"]


def base_spec() -> dict[str, Any]:
    """The prod stack with every optional string field set, so each can be replaced by a hostile value."""
    return copy.deepcopy(_base_spec())


def external_spec() -> dict[str, Any]:
    """base_spec with an external object store (the only backend with an endpoint)."""
    return copy.deepcopy(_external_spec())


@functools.cache
def _base_spec() -> dict[str, Any]:
    d = stack_data("prod-h100")
    d["description"] = "production training cluster"
    d["versions"] = {"cuda": "12.4", "nccl": "2.21.5", "doca": "2.9", "kernel": "6.1", "seaweedfs": "3.39"}
    pool = d["compute"]["pools"][0]
    pool["topology_file"] = "/etc/nccl/topo.xml"
    rails = pool["compute_rails"]
    rails["devices"] = [f"mlx5_{i}" for i in range(rails["count"])]
    rails["interfaces"] = [f"ib{i}" for i in range(rails["count"])]
    pool["nccl_hcas"] = list(rails["devices"])
    pool["shared_storage_rails"] = [rails["devices"][0]]  # one rail port also carries storage
    storage = pool["storage_nics"]
    storage["devices"] = [f"mlx5_{rails['count'] + i}" for i in range(storage["count"])]
    lu = d["lustre"]
    lu["mgs"]["device"] = "/dev/disk/by-id/mgt"
    # One path per target of the filesystem, in index order (failover partners name the same LUN).
    for key, group in (("mds", "mdts"), ("oss", "osts")):
        total = lu[key]["nodes"] * lu[key][group]["per_node"]
        lu[key][group]["paths"] = [f"/dev/disk/by-id/{group[:-1]}{i}" for i in range(total)]
    fencing = lu.setdefault("ha", {}).setdefault("fencing", {"agent": "fence_ipmilan"})
    fencing.update(address="{host}-bmc.mgmt", username="admin", password_secret="kiln:fencePassword",
                   options={"lanplus": "1"})
    # A routed filesystem: clients on o2ib0, servers on o2ib1, one router group between them.
    lu["lnet"] = [{"name": "o2ib0", "hosts": "clients"}, {"name": "o2ib1", "hosts": "servers"}]
    lu["routers"] = [{
        "name": "rtr", "count": 4, "hostname_prefix": "lnet-rtr", "client_net": "o2ib0", "server_net": "o2ib1",
        "client_nics": {"count": 2, "nic": "cx7-ndr400", "devices": ["mlx5_0", "mlx5_1"], "interfaces": ["ib0", "ib1"]},
        "server_nics": {"count": 2, "nic": "cx7-ndr400", "devices": ["mlx5_2", "mlx5_3"], "interfaces": ["ib2", "ib3"]},
    }]
    lu["pools"] = [{"name": "flash", "osts": [0, 1]}]
    lu["directories"] = [{"path": "/datasets", "purpose": "datasets", "pool": "flash"}]
    limits = {"block_soft": "2T", "block_hard": "3T"}
    lu["quotas"] = {"defaults": {"user": dict(limits), "group": dict(limits), "project": dict(limits)}}
    pool["management_interface"] = "eth0"
    d["networks"]["reserve"] = {pool["name"]: 2 * pool["nodes"], "oss": 2 * lu["oss"]["nodes"]}
    pool["local_nvme"]["mount_point"] = "/mnt/local-nvme"
    storage["interfaces"] = [f"ib{rails['count'] + i}" for i in range(storage["count"])]
    first_server_device = 0
    for key in ("mds", "oss"):
        nics = lu[key]["nics"]
        nics["devices"] = [f"mlx5_{first_server_device + i}" for i in range(nics["count"])]
        nics["interfaces"] = [f"ib{i}" for i in range(nics["count"])]
    os_ = d["objectstore"]
    os_["nics"]["devices"] = [f"mlx5_{i}" for i in range(os_["nics"]["count"])]
    os_["nics"]["interfaces"] = [f"ib{i}" for i in range(os_["nics"]["count"])]
    os_["disks"]["mount_point"] = "/srv/seaweedfs"
    os_["access_key_id"] = "kiln"
    os_["credentials_secret"] = "kiln:s3SecretKey"
    d["kubernetes"] = {
        "version": "1.31",
        "storage_class": "fast",
        "gpu_node_label": "nvidia.com/gpu.present",
        "storage_namespace": "kiln-storage",
        "system_namespace": "kiln-system",
        "training_namespace": "training",
        "health_namespace": "kiln-health",
        "models_namespace": "kiln-models",
        "images": {
            "datamover": "registry.example.com/hpc/kiln-datamover:0.1.0@sha256:" + "a" * 64,
            "health": "registry.example.com:5000/hpc/kiln-health@sha256:" + "b" * 64,
        },
    }
    lu["mount_point"] = "/lustre"
    lu["lnet"][0]["subnet"] = d["networks"]["storage"]
    df = d["dataflow"]
    df["links"][0].update(include=["*.tar"], exclude=["tmp/*"])
    df["checkpoints"].update(prefix="runs/", commit_marker=".metadata")
    df["models"][0]["target"] = "/mnt/local-nvme/models"
    df["movers"] = {"pools": [pool["name"]]}
    d["monitoring"] = {
        "hosts": ["mds01"],
        "receivers": [{"name": "oncall", "webhook_url": "https://alerts.example.com/hook"}],
        "lustre_snapshots": [{"name": "daily", "every_hours": 24, "keep": 7}],
        "filesystems": ["/", "/mnt/local-nvme"],
        "fault_filesystem": "/mnt/kiln-fault",
    }
    d["networks"]["roce_rails"] = "10.30.0.0/16"
    d["pipeline"]["kafka"]["namespace"] = "kafka"
    d["hardware"] = {
        "nics": {"vendor-nic-400": {"description": "a NIC the catalog lacks", "link_Gbps": 400,
                                    "fabrics": ["infiniband"], "pcie_gen": 5, "source": "vendor datasheet"}},
        "gpus": {"vendor-gpu": {"description": "a GPU the catalog lacks", "memory_GB": 80, "pcie_gen": 5,
                                "nvswitch": True, "nvlink_GBps": 900, "nccl_intra_busbw_GBps": 400,
                                "source": "vendor datasheet"}},
    }
    lu["oss"]["server"] = {"read_GBps": 90, "write_GBps": 65, "source": "vendor datasheet"}
    d["inventory"] = {"ansible_user": "ubuntu"}
    d["overrides"] = {"client.mount.options": "flock,lazystatfs"}
    d.setdefault("acceptance", {})["waivers"] = [
        {"check": "storage.ior_easy_read", "reason": "accepted by the storage lead until the new OSS arrive"}]
    return d


@functools.cache
def _external_spec() -> dict[str, Any]:
    d = base_spec()
    os_ = d["objectstore"]
    for key in ("nics", "disks"):
        os_.pop(key)
    os_.update(backend="external", endpoint="https://s3.example.com:443", throughput_GBps=50.0, nodes=0)
    return d


def string_leaves(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(path, value) of every string in a spec dict; a key of a mapping whose keys are names (`overrides`,
    `hardware.nics`, `hardware.gpus`, `networks.reserve`) comes as (*path, key, '<key>')."""
    if isinstance(data, str):
        yield path, data
    elif isinstance(data, list):
        for i, item in enumerate(data):
            yield from string_leaves(item, (*path, i))
    elif isinstance(data, dict):
        for key, item in data.items():
            if path in (("overrides",), ("hardware", "nics"), ("hardware", "gpus"), ("networks", "reserve")):
                yield (*path, key, "<key>"), key
            yield from string_leaves(item, (*path, key))


def replaced(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node: Any = out
    for part in path[:-1]:
        node = node[part]
    if path[-1] == "<key>":
        parent: Any = out
        for part in path[:-2]:
            parent = parent[part]
        parent[value] = parent.pop(path[-2])
    else:
        node[path[-1]] = value
    return out


def dotted(path: tuple[Any, ...]) -> str:
    """The field path kiln prints for a spec path (list indexes as [i])."""
    out = ""
    for part in path:
        if part == "<key>":
            continue
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


def model_string_fields(model: type[BaseModel] = ClusterSpec, prefix: str = "") -> set[str]:
    """Every field of the spec models whose type can hold a string (list items and dict keys/values included)."""
    out: set[str] = set()
    for name, field in model.model_fields.items():
        here = f"{prefix}{name}"
        for arg in _leaf_types(field.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                out |= model_string_fields(arg, here + ".")
            elif arg is str:
                out.add(here)
    return out


def _leaf_types(annotation: Any) -> Iterator[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        yield from _leaf_types(typing.get_args(annotation)[0])
    elif origin in (typing.Union, types.UnionType, list, dict, typing.Literal):
        if origin is typing.Literal:
            return  # a closed vocabulary, checked by pydantic
        for arg in typing.get_args(annotation):
            yield from _leaf_types(arg)
    else:
        yield annotation


def run_pipeline(spec: ClusterSpec) -> dict[str, str]:
    """Plan, inventory and manifests of an accepted spec; every rendered text is checked for control characters."""
    plan = build_plan(spec)
    files = {**render_inventory(plan), **{f"k8s/{k}": v for k, v in render_manifests(plan).items()}}
    for text in files.values():
        # the kit's own Prometheus/Grafana templates ({{ $labels.host }}, {{ $value | humanizePercentage }},
        # legend {{host}}: monitoring.yaml, possibly folded across YAML lines) are not spec values
        text = PROM_TEMPLATE.sub("", text)
        for line in text.splitlines():
            check_plain(line.replace("{{", "").replace("{%", "").replace("{#", ""))
    return files


PROM_TEMPLATE = re.compile(r"\{\{\s*\$?[A-Za-z_][\w.]*(?:\s+\|\s+\w+)?\s*\}\}")
