"""`kiln diff` on every shipped stack with a changed spec: one golden file per class of change.

The recorded plan is the shipped stack's records (what the record play writes after a converge of it); the
current plan is the same stack with one change. Refresh with KILN_UPDATE_GOLDEN=1 (then read the diff).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from kiln.cli.common import EXIT_DISRUPTIVE, EXIT_OK, EXIT_REFUSED
from kiln.cli.diff import exit_code, render_text
from kiln.plan import build_plan
from kiln.plan.changes import diff_records, worst
from kiln.plan.record import host_records
from kiln.spec.loader import validate
from tests.conftest import STACKS, stack_data

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "diff"
Edit = Callable[[dict[str, Any]], bool]  # changes the spec in place; False: the case does not apply to the stack


def _override(tid: str, value: Any) -> Edit:
    def edit(d: dict[str, Any]) -> bool:
        d.setdefault("overrides", {})[tid] = value
        return True
    return edit


def _set(path: str, value: Any) -> Edit:
    def edit(d: dict[str, Any]) -> bool:
        *parents, last = path.split(".")
        for p in parents:
            d = d.setdefault(p, {})
        d[last] = value
        return True
    return edit


def _grow_pool(d: dict[str, Any]) -> bool:
    """One more node in the first pool; not for a pool already at its networks.reserve (the spec refuses growing
    past it: tests/unit/plan/test_reserve.py)."""
    pool = d["compute"]["pools"][0]
    if pool["nodes"] >= d["networks"].get("reserve", {}).get(pool["name"], pool["nodes"] + 1):
        return False
    pool["nodes"] += 1
    return True


def _add_oss_pair(d: dict[str, Any]) -> bool:
    d["lustre"]["oss"]["nodes"] += 2
    return True


def _shrink_ost_pool(d: dict[str, Any]) -> bool:
    pools = d["lustre"].get("pools") or []
    if not pools:
        return False
    pools[0]["osts"] = pools[0]["osts"][:-1]
    return True


def _rdma_stack_doca(d: dict[str, Any]) -> bool:
    """NVIDIA's DOCA-Host drivers instead of the distribution's: RDMA fabrics only (a tcp spec refuses doca)."""
    if d["fabric"]["kind"] == "tcp":
        return False
    d["fabric"]["rdma_stack"] = "doca"
    return True


def _baremetal_kafka(edit: Callable[[dict[str, Any]], None]) -> Edit:
    """A change to a bare-metal token stream: stacks with one only."""
    def apply(d: dict[str, Any]) -> bool:
        k = (d.get("pipeline") or {}).get("kafka")
        if not k or k.get("mode") != "baremetal":
            return False
        edit(k)
        return True
    return apply


def _fewer_partitions(k: dict[str, Any]) -> None:
    k["topics"][0]["consumers"]["ranks_per_node"] = 1  # half the consumers ...
    k["topics"][0]["partitions"] = 2  # ... and half the partitions it has: Kafka cannot remove them


CASES: dict[str, tuple[Edit, str]] = {
    "live-sysctl": (_override("host.sysctl.net.core.rmem_max", 536870912), "live"),
    "add-compute-node": (_grow_pool, "add"),
    "service-restart-monitoring": (_set("monitoring.retention_days", 30), "service-restart"),
    "client-remount-lustre-client": (_set("versions.lustre_client", "2.16"), "client-remount"),
    "pair-failover-lustre-server": (_set("lustre.version", "2.16"), "pair-failover"),
    "reboot-gpu-driver": (_set("versions.gpu_driver", 560), "reboot"),
    "reboot-gpu-kernel-modules": (_set("versions.gpu_kernel_modules", "proprietary"), "reboot"),
    "reboot-rdma-stack": (_rdma_stack_doca, "reboot"),
    "refused-fsname": (_set("lustre.fsname", "newfs"), "refused"),
    "refused-backend": (_set("lustre.backend", "zfs"), "refused"),
    "refused-pool-shrink": (_shrink_ost_pool, "refused"),
    "add-oss-pair": (_add_oss_pair, "add"),
    "service-restart-kafka-heap": (_baremetal_kafka(lambda k: k.update(heap_GB=0.5)), "service-restart"),
    "live-kafka-retention": (_baremetal_kafka(lambda k: k["topics"][0].update(retention_hours=3)), "live"),
    "refused-kafka-partitions": (_baremetal_kafka(_fewer_partitions), "refused"),
    "refused-seaweedfs-build": (_set("versions.seaweedfs", "4.35"), "refused"),
}


@cache
def _recorded(stack: str) -> dict[str, dict[str, Any]]:
    return host_records(build_plan(validate(stack_data(stack))))


@cache
def _run(stack: str, edit: Edit) -> tuple[str, list[Any]] | None:
    recorded = _recorded(stack)
    data = stack_data(stack)
    if not edit(data):
        return None
    plan = build_plan(validate(data))
    changes = diff_records(recorded, host_records(plan))
    digests = {r["plan_digest"] for r in recorded.values()}
    text = render_text(plan.stack, changes, digests, plan.spec_digest)
    return f"{text}\nexit {exit_code(changes)}\n", changes


@pytest.mark.parametrize("case", sorted(CASES))
def test_diff_matches_its_golden_file_on_every_stack(case: str) -> None:
    edit, expected = CASES[case]
    parts, classes = [], set()
    for stack in STACKS:
        out = _run(stack, edit)
        if out is None:
            continue
        text, changes = out
        parts.append(text)
        classes |= {c.change for c in changes}
    assert parts, f"{case} applies to no shipped stack"
    assert expected in classes, f"{case}: no {expected} change in {sorted(classes)}"
    path = GOLDEN / f"{case}.txt"
    body = "\n".join(parts)
    if os.environ.get("KILN_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == body, f"{path.name} changed; review, refresh with KILN_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("stack", STACKS)
def test_an_unchanged_spec_has_no_changes_and_exits_ok(stack: str) -> None:
    records = _recorded(stack)
    assert diff_records(records, records) == []
    assert exit_code([]) == EXIT_OK


def test_exit_codes_follow_the_worst_class() -> None:
    out = {case: _run("prod-h100", edit) for case, (edit, _) in CASES.items()}
    codes = {case: exit_code(o[1]) for case, o in out.items() if o is not None}
    assert codes["live-sysctl"] == EXIT_OK
    assert codes["reboot-gpu-driver"] == EXIT_DISRUPTIVE and codes["service-restart-monitoring"] == EXIT_DISRUPTIVE
    assert codes["refused-fsname"] == EXIT_REFUSED and codes["refused-pool-shrink"] == EXIT_REFUSED
    assert worst(out["refused-pool-shrink"][1]) == "refused"  # type: ignore[index]


def test_a_refused_change_names_the_reason_and_the_runbook() -> None:
    out = _run("prod-h100", _shrink_ost_pool)
    assert out is not None
    refused = [c for c in out[1] if c.change == "refused"]
    assert refused and all(c.runbook.startswith("docs/runbooks/") and (Path(c.runbook)).exists() for c in refused)
    assert "shrinking an OST pool that holds data" in refused[0].how


def test_an_oss_pair_on_dev_adds_its_servers_without_touching_the_others() -> None:
    out = _run("dev", _add_oss_pair)
    assert out is not None
    added = {c.host for c in out[1] if c.change == "add"}
    assert added == {"oss03", "oss04"} and exit_code(out[1]) == EXIT_OK


def test_growing_a_pool_renumbers_the_hosts_planned_after_it_and_is_refused() -> None:
    """Addresses are handed out in host order (kiln/plan/topology.py), so a grown pool moves the servers' NIDs:
    kiln diff refuses that. When addressing becomes stable, this test and add-compute-node.txt change."""
    out = _run("dev", _grow_pool)
    assert out is not None
    refused = {c.setting.split(".")[-1] for c in out[1] if c.change == "refused"}
    assert refused == {"address", "nid"} and exit_code(out[1]) == EXIT_REFUSED


def test_a_seaweedfs_upgrade_within_one_build_rolls_and_across_builds_is_refused() -> None:
    recorded = {h: r for h, r in _recorded("lab").items() if "objectstore/version" in r["settings"]}
    assert recorded and all(r["settings"]["objectstore/version"] == "3.39" for r in recorded.values())

    def to(release: str) -> list[Any]:
        new = {h: {**r, "settings": {**r["settings"], "objectstore/version": release}} for h, r in recorded.items()}
        return diff_records(recorded, new)

    across = to("4.34")  # 30GB → 8000GB: the index entries grow by a byte
    assert {c.change for c in across} == {"refused"} and "4- against 5-byte offsets" in across[0].how
    later = {h: {**r, "settings": {**r["settings"], "objectstore/version": "4.34"}} for h, r in recorded.items()}
    within = diff_records(later, {h: {**r, "settings": {**r["settings"], "objectstore/version": "4.35"}}
                                  for h, r in later.items()})
    assert {c.change for c in within} == {"service-restart"}
    assert "objectstore.rolling.upgrade_binary" in within[0].how


def test_a_server_without_a_partner_restarts_in_place_and_a_pair_fails_over() -> None:
    """The lab's oss01/oss02 are a failover pair and its mds01 is alone: a module option read at load time moves a
    paired server's targets to its partner, but stops the lone server's (no partner to take them)."""
    out = _run("lab", _override("lnet.ksocklnd.credits", 512))
    assert out is not None
    by_host = {c.host: c for c in out[1] if c.setting == "module_option/lnet.ksocklnd.credits"}
    assert {by_host[h].change for h in ("oss01", "oss02")} == {"pair-failover"}
    assert by_host["mds01"].change == "service-restart"
    assert "no failover partner" in by_host["mds01"].how and "whole filesystem" in by_host["mds01"].how
    assert by_host["gpu001"].change == "client-remount"
