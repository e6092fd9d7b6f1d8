"""Small files: gpus_fed is the smaller of the bandwidth and the file-rate bound and says which; the data-loader
pipeline is readers × per-file latency and the node's streaming ceiling."""

from __future__ import annotations

from typing import Any

import pytest

from kiln import knowledge
from kiln.plan import build_plan
from kiln.plan.serialize import plan_to_dict
from kiln.spec import validate


def plan_of(data: dict[str, Any]) -> Any:
    return build_plan(validate(data, "test"), "test")


def _samples(data: dict[str, Any], size_KB: float, files: int = 1) -> dict[str, Any]:
    data["workload"]["samples"] = {"size_KB": size_KB, "files_per_sample": files}
    data["workload"]["dataset_files"] = 10**8
    return data


def test_a_small_file_profile_is_bounded_by_the_file_rate(stack: Any) -> None:
    plan = plan_of(_samples(stack("prod-h100"), 100))
    s = plan.sizing
    # 4 MDTs × 100,000 opens/s × 100 KB = 40 GB/s, below every bandwidth layer (oss_nics 306)
    assert s.aggregate_read_GBps == pytest.approx(40.0)
    assert s.gpus_fed == int(40.0 / 0.156) and s.gpus_fed_bound == "file rate (metadata)"
    assert plan_to_dict(plan)["sizing"]["gpus_fed_bound"] == "file rate (metadata)"
    warn = next(w for w in plan.warnings if "GPUs at the planned read rate" in w.problem)
    assert warn.path == "lustre.mds.mdts" and "add MDTs" in warn.fix  # not "more OSS"


def test_large_samples_stay_bandwidth_bound(stack: Any) -> None:
    s = plan_of(_samples(stack("prod-h100"), 146_600)).sizing
    assert s.gpus_fed_bound == "bandwidth (oss_nics)"


def test_the_loader_is_readers_times_per_file_latency(stack: Any) -> None:
    data = _samples(stack("prod-h100"), 100)
    data["workload"]["samples"]["readers_per_gpu"] = 1
    loader = next(la for la in plan_of(data).sizing.layers if la.name == "client_loader")
    t = knowledge.load().workload.reader.small_file_s.value
    kb = knowledge.load()
    f_node = min(kb.factor("rdma_payload") * kb.factor("lnet_o2ib"), kb.factor("client_stream"))
    readers, ceiling = 8 * 1, 100e9 * f_node  # 8 GPUs × 1 reader; 2 × NDR400 × the streaming reader's share
    per_node = 100e3 / (t / readers + 100e3 / ceiling)
    assert loader.read_GBps == pytest.approx(128 * per_node / 1e9)
    assert loader.write_GBps == float("inf")


def test_packed_shards_have_no_loader_latency_layer(stack: Any) -> None:
    names = [la.name for la in plan_of(_samples(stack("prod-h100"), 100, files=0)).sizing.layers]
    assert "client_loader" not in names and "metadata" not in names
