"""Each class of invalid spec the review found is refused with the field path, the value and a fix."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.spec import SpecError, validate
from tests.conftest import stack_data


def _set(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node: Any = out
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last = parts[-1]
    node[int(last) if last.isdigit() else last] = value
    return out


def _refusal(data: dict[str, Any], path: str) -> str:
    with pytest.raises(SpecError) as err:
        validate(data)
    issues = [i for i in err.value.issues if i.path.startswith(path)]
    assert issues, [i.path for i in err.value.issues]
    assert all(i.fix for i in issues)
    return issues[0].render()


PROD = stack_data("prod-h100")
LAB = stack_data("lab")
POOL = PROD["compute"]["pools"][0]

CASES: list[tuple[str, dict[str, Any], str]] = [
    ("duplicate pool names", _set(PROD, "compute.pools", [POOL, {**POOL, "hostname_prefix": "other"}]),
     "compute.pools[1].name"),
    ("duplicate OST pool names", _set(PROD, "lustre.pools", [{"name": "a", "osts": [0]}, {"name": "a", "osts": [1]}]),
     "lustre.pools[1].name"),
    ("duplicate OST index", _set(PROD, "lustre.pools", [{"name": "a", "osts": [1, 1]}]), "lustre.pools[0].osts[1]"),
    ("OST index -1", _set(PROD, "lustre.pools", [{"name": "a", "osts": [-1]}]), "lustre.pools[0].osts[0]"),
    ("paths equal after '/'", _set(PROD, "lustre.directories", [
        {"path": "/a", "purpose": "datasets"}, {"path": "/a/", "purpose": "datasets"}]), "lustre.directories[1].path"),
    ("paths equal after '//' and '/.'", _set(PROD, "lustre.directories", [
        {"path": "/a/b", "purpose": "datasets"}, {"path": "//a/./b", "purpose": "scratch"}]),
     "lustre.directories[1].path"),
    ("Kubernetes names collide", _set(PROD, "lustre.directories", [
        {"path": "/Datasets", "purpose": "datasets"}, {"path": "/datasets", "purpose": "datasets"}]),
     "lustre.directories[1].path"),
    ("o2ib and o2ib0", _set(PROD, "lustre.lnet", [{"name": "o2ib"}, {"name": "o2ib0"}]), "lustre.lnet"),
    ("two targets on one device", _set(PROD, "lustre.oss.osts.paths", ["/dev/sda"] * 8), "lustre.oss.osts.paths[1]"),
    ("MGT on the MDT's device", _set(_set(PROD, "lustre.mds.mdts.paths", [f"/dev/nvme{i}n1" for i in range(4)]),
                                     "lustre.mgs.device", "/dev/nvme0n1"), "lustre.mds.mdts.paths[0]"),
    ("MGT on the default MDT device", _set(PROD, "lustre.mgs.device", "/dev/disk/by-id/kiln-mdt0000-0"),
     "lustre.mgs.device"),
    ("pool prefixed oss collides with 100 OSS servers",
     _set(_set(_set(PROD, "lustre.oss.nodes", 100), "compute.pools.0.hostname_prefix", "oss"),
          "networks.management", "10.0.0.0/16"), "compute.pools[0].hostname_prefix"),
    ("pools gpu (1500 nodes) and gpu1 both name gpu1001", _set(_set(_set(_set(LAB, "compute.pools", [
        {**LAB["compute"]["pools"][0], "name": "gpu", "nodes": 1500},
        {**LAB["compute"]["pools"][0], "name": "gpu1", "nodes": 5}]), "networks.management", "10.0.0.0/16"),
        "networks.storage", "10.64.0.0/12"), "objectstore.nodes", 1), "compute.pools[0].hostname_prefix"),
    ("loopback network", _set(PROD, "networks.management", "127.0.0.0/8"), "networks.management"),
    ("multicast network", _set(PROD, "networks.storage", "224.1.0.0/16"), "networks.storage"),
    ("mount point /", _set(PROD, "lustre.mount_point", "/"), "lustre.mount_point"),
    ("mount point with ..", _set(PROD, "lustre.mount_point", "/mnt/../etc"), "lustre.mount_point"),
    ("relative file path", _set(PROD, "compute.pools.0.topology_file", "topo.xml"), "compute.pools[0].topology_file"),
    ("relative device path", _set(PROD, "lustre.mgs.device", "../sda"), "lustre.mgs.device"),
    ("endpoint not a URL", _set(_set(_set(PROD, "objectstore.backend", "external"), "objectstore.endpoint",
                                     "s3.example.com"), "objectstore.throughput_GBps", 10), "objectstore.endpoint"),
    ("endpoint port > 65535", _set(_set(PROD, "objectstore.backend", "external"), "objectstore.endpoint",
                                   "https://s3.example.com:70000"), "objectstore.endpoint"),
    ("warn below fail", _set(PROD, "acceptance", {"warn_fraction": 0.5, "fail_fraction": 0.8}), "acceptance"),
    ("K8s name with trailing -", _set(PROD, "kubernetes", {"training_namespace": "train-"}),
     "kubernetes.training_namespace"),
    ("bucket like an IP", _set(PROD, "objectstore.buckets", [{"name": "192.168.1.1"}]), "objectstore.buckets[0].name"),
    ("bucket with ..", _set(PROD, "objectstore.buckets", [{"name": "a..b"}]), "objectstore.buckets[0].name"),
    ("RDMA device with ../", _set(POOL and PROD, "compute.pools.0.compute_rails.devices", ["../x"] * 8),
     "compute.pools[0].compute_rails.devices[0]"),
    ("one device twice in a NIC group", _set(PROD, "lustre.oss.nics.devices", ["mlx5_0", "mlx5_0"]),
     "lustre.oss.nics.devices[1]"),
    ("interfaces equal as Kubernetes names", _set(PROD, "lustre.oss.nics.interfaces", ["ib_0", "ib-0"]),
     "lustre.oss.nics.interfaces[1]"),
    ("sysctl override with newline", _set(PROD, "overrides", {"host.sysctl.net.core.rmem_max": "1\nkernel.x=1"}),
     "overrides"),
    ("mount options with newline", _set(PROD, "overrides", {"client.mount.options": "flock\nExecStart=/bin/x"}),
     "overrides"),
    ("infinite float", _set(PROD, "fabric.oversubscription", float("inf")), "fabric.oversubscription"),
    ("NaN", _set(PROD, "workload.dataset_TB", float("nan")), "workload.dataset_TB"),
    ("1e308", _set(PROD, "workload.model_params_B", 1e308), "workload.model_params_B"),
    ("huge override", _set(PROD, "overrides", {"client.max_rpcs_in_flight": 1e300}), "overrides"),
    ("zero OSS NICs", _set(PROD, "lustre.oss.nics.count", 0), "lustre.oss.nics.count"),
    ("zero MDS NICs", _set(PROD, "lustre.mds.nics.count", 0), "lustre.mds.nics.count"),
    ("zero object-store NICs", _set(PROD, "objectstore.nics.count", 0), "objectstore.nics.count"),
    ("zero object-store disks", _set(PROD, "objectstore.disks.count", 0), "objectstore.disks.count"),
    ("5000 pools", _set(LAB, "compute.pools", [{**LAB["compute"]["pools"][0], "name": f"p{i}", "nodes": 1}
                                              for i in range(5000)]), "compute.pools"),
]


@pytest.mark.parametrize(("data", "path"), [(d, p) for _, d, p in CASES], ids=[c[0] for c in CASES])
def test_refused_with_path_and_fix(data: dict[str, Any], path: str) -> None:
    text = _refusal(data, path)
    assert "fix:" in text


def test_canonical_values_are_what_the_plan_sees() -> None:
    data = _set(PROD, "lustre.directories", [{"path": "//datasets/./", "purpose": "datasets"}])
    data = _set(data, "lustre.lnet", [{"name": "o2ib"}])
    data.pop("dataflow", None)  # its checkpoints lie under a directory this test leaves out
    spec = validate(data)
    assert spec.lustre.directories[0].path == "/datasets"
    assert spec.lustre.lnet[0].name == "o2ib0"


def test_zero_counts_that_do_not_divide_still_plan() -> None:
    """A tcp stack without compute rails or local NVMe plans (nothing divides by those counts)."""
    data = _set(LAB, "compute.pools.0.compute_rails.count", 0)
    build_plan(validate(data))


def test_planning_is_near_linear_in_pools() -> None:
    def timed(n: int) -> float:
        pools = [{**LAB["compute"]["pools"][0], "name": f"p{i}", "hostname_prefix": None, "nodes": 1} for i in range(n)]
        data = _set(_set(LAB, "compute.pools", pools), "networks.management", "10.0.0.0/16")
        data.pop("dataflow", None)  # it names the lab's pool; this test is about the number of pools
        data = _set(data, "networks.storage", "10.64.0.0/12")
        start = time.perf_counter()
        build_plan(validate(data))
        return time.perf_counter() - start

    small, large = timed(100), timed(800)
    # 8× the pools: linear work takes ~8×, quadratic ~64×; allow noise from a shared machine.
    assert large < small * 20 + 1.0, (small, large)


def test_a_hostname_prefix_may_end_in_a_dash() -> None:
    """Host names such as gpu-001 are fine; only Kubernetes-facing names refuse a trailing '-'."""
    spec = validate(_set(PROD, "compute.pools.0.hostname_prefix", "gpu-"))
    assert build_plan(spec).hosts[0].name == "gpu-001"


def test_free_text_may_hold_dots_and_punctuation() -> None:
    spec = validate(_set(PROD, "description", "Llama-style pre-training... (see docs/runbooks; owner: ml-infra)"))
    assert spec.description.endswith("ml-infra)")
