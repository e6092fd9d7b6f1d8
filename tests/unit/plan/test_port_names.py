"""Port names on InfiniBand and RoCE: real hosts name ports predictably and number RDMA devices per machine, so the
shipped stacks give them (prod-h100: a DGX H100's names) and the plan warns where a stack leaves them to defaults."""

from __future__ import annotations

from typing import Any

from kiln.plan import build_plan
from kiln.spec.loader import validate


def _plan(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


def test_prod_names_the_dgx_h100_ports_and_plans_them(stack: Any) -> None:
    plan = _plan(stack("prod-h100"))
    gpu = next(h for h in plan.hosts if h.role == "compute")
    rails = [n for n in gpu.nics if n.role == "compute"]
    # NVIDIA DGX H100/H200 User Guide, "Network Modules": the compute ports in GPU order 0-7
    assert [n.device for n in rails] == ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10",
                                         "mlx5_11"]
    assert [n.interface for n in rails][:2] == ["ibp24s0", "ibp64s0"]
    assert plan.nccl[0].env["NCCL_IB_HCA"] == "=" + ",".join(n.device or "" for n in rails)
    assert plan.nccl[0].env["NCCL_SOCKET_IFNAME"] == "=bond0"
    assert not [w for w in plan.warnings if w.path.endswith(("devices", "interfaces", "management_interface"))]


def test_infiniband_ports_left_to_default_names_warn_with_the_field(stack: Any) -> None:
    data = stack("prod-h100")
    pool = data["compute"]["pools"][0]
    del pool["storage_nics"]["interfaces"], pool["management_interface"]
    warnings = {w.path: w for w in _plan(data).warnings}
    assert "compute.pools[0].storage_nics.interfaces" in warnings
    assert "compute.pools[0].management_interface" in warnings
    w = warnings["compute.pools[0].storage_nics.interfaces"]
    assert w.severity == "warning" and w.value is None and "ibdev2netdev" in w.fix
    assert "compute.pools[0].compute_rails.devices" not in warnings


def test_the_podman_lab_keeps_its_default_names(stack: Any) -> None:
    plan = _plan(stack("lab"))  # tcp: podman names a container's networks eth0, eth1, ...
    assert not [w for w in plan.warnings if w.path.endswith(("devices", "interfaces", "management_interface"))]
    gpu = next(h for h in plan.hosts if h.role == "compute")
    assert [n.interface for n in gpu.nics] == ["eth1"]
