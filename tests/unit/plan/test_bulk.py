"""Large plans: the cyclic collector paused while they are made, and the hosts written without dictionaries."""

from __future__ import annotations

import gc
import json

import pytest

from kiln.plan.bulk import cyclic_gc_paused
from kiln.plan.model import Host, Nic
from kiln.plan.serialize import _host, _HostWriter


def test_the_collector_is_paused_inside_and_resumed_after_even_on_an_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("a spec error in the middle of a plan")
    assert gc.isenabled()


def test_a_nested_pause_leaves_the_outer_one_in_force() -> None:
    with cyclic_gc_paused():
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_stays_off_after_if_it_was_off_before() -> None:
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


RAIL = Nic(role="compute", model="cx7-ndr400", interface="ibp24s0", device="mlx5_0", address=None, nid=None,
           link_Gbps=400)
ODD = (
    # A RoCE rail with an address and a fractional rate, a port without an RDMA device, a name json escapes.
    Nic(role="compute", model="bf3-200g", interface="ens1f0np0", device="mlx5_2", address="10.99.0.7", nid=None,
        link_Gbps=12.5),
    Nic(role="storage", model="virtio", interface="eth1", device=None, address="10.98.0.7", nid="10.98.0.7@tcp",
        link_Gbps=100.0),
    Nic(role="shared", model="x\"\\é", interface="ib\t1", device="mlx5_1", address="10.97.0.7",
        nid="10.97.0.7@o2ib1", link_Gbps=400),
)


@pytest.mark.parametrize("host", [
    Host(name="gpu001", role="compute", pool="h100", management_address="10.0.0.2",
         groups=("kiln_compute", "kiln_pool_h100"), nics=(RAIL, RAIL, *ODD), gpus=8),
    Host(name="oss01", role="oss", pool=None, management_address="10.0.0.9", groups=(), nics=(),
         failover_partner="oss02"),
])
def test_a_written_host_is_json_dumps_of_its_dictionary(host: Host) -> None:
    writer = _HostWriter()
    twice = [writer.host(host), writer.host(host)]  # the second from the memo of shared records
    assert twice == [json.dumps(_host(host))] * 2


def test_hosts_that_share_a_record_each_get_their_own_values() -> None:
    groups = ("kiln_compute",)
    hosts = [Host(name=f"gpu{i}", role="compute", pool="p", management_address=f"10.0.0.{i}", groups=groups,
                  nics=(RAIL, Nic(role="storage", model="cx7-ndr400", interface="ib1", device="mlx5_1",
                                  address=f"10.1.0.{i}", nid=f"10.1.0.{i}@o2ib", link_Gbps=400)))
             for i in range(2, 6)]
    writer = _HostWriter()
    assert [writer.host(h) for h in hosts] == [json.dumps(_host(h)) for h in hosts]
