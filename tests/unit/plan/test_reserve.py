"""networks.reserve: a host family keeps the addresses of the hosts it may grow to, so growing it moves nothing."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from kiln.cli.common import EXIT_OK
from kiln.cli.diff import exit_code
from kiln.plan import build_plan
from kiln.plan.changes import diff_records
from kiln.plan.model import Plan
from kiln.plan.record import host_records
from kiln.render.manifests.context import Ctx
from kiln.render.manifests.network import _storage_ipam
from kiln.spec import SpecError
from kiln.spec.checks import _count_hosts
from kiln.spec.loader import validate
from tests.conftest import stack_data


def _plan(stack: str, reserve: dict[str, int], edit: Any = None) -> Plan:
    data = stack_data(stack)
    data["networks"]["reserve"] = reserve
    if edit is not None:
        edit(data)
    return build_plan(validate(data))


def _addresses(plan: Plan) -> dict[str, tuple[str, ...]]:
    return {h.name: (h.management_address, *(n.address or "" for n in h.nics), *(n.nid or "" for n in h.nics))
            for h in plan.hosts}


def _grow(d: dict[str, Any]) -> None:
    d["compute"]["pools"][0]["nodes"] += 1


def _add_oss_pair(d: dict[str, Any]) -> None:
    d["lustre"]["oss"]["nodes"] += 2


@pytest.mark.parametrize(("stack", "reserve", "edit"), [
    ("dev", {"gpu": 4}, _grow),
    ("prod-h100", {"h100": 256, "oss": 16}, _grow),
    ("prod-h100", {"h100": 256, "oss": 16}, _add_oss_pair),
    ("lab", {"gpu": 4, "oss": 4}, _add_oss_pair),
])
def test_growing_a_family_within_its_reserve_moves_no_address_or_nid(stack: str, reserve: dict[str, int],
                                                                    edit: Any) -> None:
    before, after = _plan(stack, reserve), _plan(stack, reserve, edit)
    old, new = _addresses(before), _addresses(after)
    assert set(new) > set(old)
    assert {h: new[h] for h in old} == old
    changes = diff_records(host_records(before), host_records(after))
    added = {c.host for c in changes if c.change == "add"}
    assert added == set(new) - set(old)
    assert "refused" not in {c.change for c in changes}


def test_without_a_reserve_growth_renumbers_the_servers_and_kiln_diff_refuses_it() -> None:
    before, after = _plan("dev", {}), _plan("dev", {}, _grow)
    assert _addresses(before)["oss01"] != _addresses(after)["oss01"]
    assert exit_code(diff_records(host_records(before), host_records(after))) != EXIT_OK


def test_a_reserve_leaves_room_after_its_family_on_every_network() -> None:
    packed, kept = _plan("dev", {}), _plan("dev", {"gpu": 10})
    first_server = next(h for h in kept.hosts if h.role != "compute")
    gap = int(ipaddress.ip_address(first_server.management_address)) - int(
        ipaddress.ip_address(next(h for h in packed.hosts if h.role != "compute").management_address))
    assert gap == 10 - 2  # two gpu hosts, ten reserved
    # the pods' storage range starts after the reserved client addresses too
    assert _storage_ipam_start(kept) > _storage_ipam_start(packed)


def _storage_ipam_start(plan: Plan) -> int:
    return int(ipaddress.ip_address(_storage_ipam(Ctx(plan))["range_start"]))


@pytest.mark.parametrize(("reserve", "path", "words"), [
    ({"gpu": 1}, "networks.reserve.gpu", "fewer addresses than the family's 2 hosts"),
    ({"gpus": 8}, "networks.reserve.gpus", "not a host family"),
    ({"gpu": 70000}, "networks.management", "addresses needed"),
])
def test_a_bad_reserve_names_the_field_and_the_fix(reserve: dict[str, int], path: str, words: str) -> None:
    with pytest.raises(SpecError) as exc:
        _plan("dev", reserve)
    issue = next(i for i in exc.value.issues if i.path == path)
    assert words in issue.problem and issue.fix


def test_a_pool_named_like_a_server_family_counts_both_against_the_subnet() -> None:
    """Addresses are counted per family in a list, not a mapping keyed by name: a pool called mds adds its hosts
    to the MDS hosts, as the planner hands both out addresses."""
    plain = stack_data("dev")
    plain["compute"]["pools"][0]["nodes"] = 4
    named = stack_data("dev")
    named["compute"]["pools"][0].update(name="mds", nodes=4)
    hosts = len(build_plan(validate(named)).hosts)
    assert _count_hosts(validate(named)) == _count_hosts(validate(plain)) >= hosts == 7
    named["networks"]["management"] = "10.20.0.0/29"  # 5 addresses: the 7 hosts do not fit, the MDS alone would
    with pytest.raises(SpecError) as exc:
        validate(named)
    assert any(i.path == "networks.management" for i in exc.value.issues)
    named["networks"] = {**plain["networks"], "reserve": {"mds": 8}}
    with pytest.raises(SpecError) as exc:
        validate(named)
    issue = next(i for i in exc.value.issues if i.path == "networks.reserve.mds")
    assert "both a compute pool and another host family" in issue.problem


def test_growing_the_stream_s_consumer_pool_also_adds_partitions_live() -> None:
    """The lab's GPU pool is its token topic's consumers and the topic's partitions are `auto` (a multiple of the
    consumers): one more node is the new host and, on every KRaft node, more partitions, a live change that the
    ranks follow by merging their stream states (docs/runbooks/add-compute-node.md). The lab's one pair pings the
    clients too (it has too few other servers), so its healthLNET host list grows by the new client, live."""
    def shrink(d: dict[str, Any]) -> None:
        d["compute"]["pools"][0]["nodes"] = 1

    before, after = _plan("lab", {"gpu": 2, "oss": 4}, shrink), _plan("lab", {"gpu": 2, "oss": 4})
    changes = diff_records(host_records(before), host_records(after))
    assert {(c.host, c.change) for c in changes if c.change == "add"} == {("gpu002", "add")}
    rest = {(c.host, c.setting, c.change, c.old, c.new) for c in changes if c.change != "add"}
    kraft = ("kafka-01", "kafka-02", "kafka-03")
    nids = {h.name: n.nid for h in after.hosts for n in h.nics if n.nid}
    old, new = f"{nids['mds01']} {nids['gpu001']}", f"{nids['mds01']} {nids['gpu001']} {nids['gpu002']}"
    assert rest == {(h, "kafka/topic/lab-tokens/partitions", "live", 2, 4) for h in kraft} | {
        (h, "ha/lnet_host_list", "live", old, new) for h in ("oss01", "oss02")}
    assert exit_code(changes) == EXIT_OK
