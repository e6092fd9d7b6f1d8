"""Parsers on real tool output (fio, iperf3, warp: produced by tests/fixtures/tools/regen.sh) and on the
documented formats of perftest, nccl-tests, IOR, mdtest, bandwidthTest, nvbandwidth, lnetctl and lfs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kiln.lustre.lustre_common import normalize_nid, parse_size
from kiln.lustre.lustre_layout import LayoutComponent, parse_getstripe
from kiln.verify import parsers as p
from kiln.verify.parsers import ParseError

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "tools"


def read(rel: str) -> str:
    return (FIX / rel).read_text(encoding="utf-8")


def test_every_fixture_says_where_it_came_from() -> None:
    for f in FIX.rglob("*"):
        if f.suffix in (".json", ".txt", ".yaml", ".csv") and f.parent.name in ("fio", "iperf3", "warp"):
            assert f.with_suffix(".cmd").exists(), f"{f} was produced by a real run: its .cmd sidecar is missing"
        elif f.suffix in (".txt", ".yaml", ".csv", ".json"):
            assert f.with_suffix(".source").exists(), f"{f}: add a .source sidecar naming the documented format"


# --------------------------------------------------------------------------------------------------- fio


def test_fio_write_real_run() -> None:
    r = p.parse_fio(read("fio/write_2jobs.json"))
    assert r.version.startswith("fio-")
    assert len(r.jobs) == 2 and all(j.write_bytes == 64 << 20 for j in r.jobs)
    agg = r.aggregate_Bps("write")
    assert agg > 0
    # aggregate = bytes of all jobs / the longest runtime: never more than the sum of per-job rates
    assert agg <= sum(r.per_job_Bps("write")) * 1.0001
    assert "fio --output-format=json" in read("fio/write_2jobs.cmd")


def test_fio_read_real_run() -> None:
    r = p.parse_fio(read("fio/read_2jobs.json"))
    assert r.aggregate_Bps("read") > 0
    with pytest.raises(ParseError, match="no write I/O"):
        r.aggregate_Bps("write")


def test_fio_job_error_with_notes_before_the_json() -> None:
    text = read("fio/enospc.json")
    assert not text.lstrip().startswith("{"), "the real ENOSPC run prints notes before its JSON"
    with pytest.raises(ParseError, match=r"errno 28 \(No space left on device\)") as exc:
        p.parse_fio(text, read("fio/enospc.stderr"))
    assert "io_u error" in str(exc.value)


def test_fio_no_output_names_the_tool_error() -> None:
    with pytest.raises(ParseError, match="no output; the tool said: fio: job global dropped"):
        p.parse_fio(read("fio/missing_dir.json"), read("fio/missing_dir.stderr"))


def test_fio_non_numeric_field() -> None:
    d = json.loads(read("fio/write_2jobs.json"))
    d["jobs"][0]["write"]["io_bytes"] = "lots"
    with pytest.raises(ParseError, match=r"write.io_bytes is not a number: 'lots'"):
        p.parse_fio(json.dumps(d))


# ------------------------------------------------------------------------------------------------ iperf3


def test_iperf3_real_run() -> None:
    r = p.parse_iperf3(read("iperf3/tcp_4streams.json"))
    assert r.received_bps > 1e8 and r.streams == 4 and r.seconds > 2
    assert r.version.startswith("iperf 3")


def test_iperf3_error_json() -> None:
    with pytest.raises(ParseError, match="unable to connect to server: Connection refused"):
        p.parse_iperf3(read("iperf3/refused.json"))


def test_iperf3_missing_and_non_numeric() -> None:
    with pytest.raises(ParseError, match="no output"):
        p.parse_iperf3("", "iperf3: error - unable to connect")
    d = json.loads(read("iperf3/tcp_4streams.json"))
    d["end"]["sum_received"]["bits_per_second"] = "fast"
    with pytest.raises(ParseError, match="bits_per_second is not a number"):
        p.parse_iperf3(json.dumps(d))


# -------------------------------------------------------------------------------------------------- warp


def test_warp_put_and_get_real_runs() -> None:
    put = p.parse_warp(read("warp/put.json")).op("PUT")
    assert put.bytes_per_s > 0 and put.errors == 0 and put.concurrency == 4
    get = p.parse_warp(read("warp/get.json"))
    assert get.op("GET").bytes_per_s > 0
    with pytest.raises(ParseError, match=r"PUT \(skipped"):  # the GET run's PUT phase is preparation only
        get.op("PUT")
    assert "--json" in read("warp/get.cmd")


def test_warp_error_from_the_server() -> None:
    with pytest.raises(ParseError, match="SignatureDoesNotMatch"):
        p.parse_warp(read("warp/bad_secret.json"), read("warp/bad_secret.stderr"))


def test_warp_without_json() -> None:
    with pytest.raises(ParseError, match="no analysis JSON"):
        p.parse_warp("warp: Benchmark starting...\nOperation: PUT. Concurrency: 4\n")


# ---------------------------------------------------------------------------------------------- perftest


def test_perftest_gbits() -> None:
    r = p.parse_perftest(read("perftest/ib_write_bw_gbits.txt"))
    assert r.test == "RDMA_Write BW Test" and r.device == "mlx5_0" and r.unit == "Gb/sec"
    assert r.bw_avg_Bps == pytest.approx(387.45 * 125e6)


def test_perftest_mb_is_mebibytes() -> None:
    r = p.parse_perftest(read("perftest/ib_read_bw_mbs.txt"))
    assert r.unit == "MB/sec"
    assert r.bw_avg_Bps == pytest.approx(45098.36 * 2**20)


def test_perftest_connection_failure() -> None:
    with pytest.raises(ParseError, match="Couldn't connect"):
        p.parse_perftest(read("perftest/connect_failed.txt"), read("perftest/connect_failed.stderr"))


def test_perftest_non_numeric_row() -> None:
    text = read("perftest/ib_write_bw_gbits.txt").replace("387.45", "n/a")
    with pytest.raises(ParseError, match="BW average is not a number"):
        p.parse_perftest(text)


# -------------------------------------------------------------------------------------------- nccl-tests


def test_nccl_intra() -> None:
    r = p.parse_nccl_tests(read("nccl/all_reduce_intra_8gpu.txt"))
    assert r.ranks == 8 and len(r.rows) == 14
    big = max(r.rows, key=lambda x: x.size_bytes)
    assert big.size_bytes == 8 << 30
    assert r.busbw_GBps == pytest.approx(max(big.oop_busbw_GBps, big.ip_busbw_GBps))
    assert r.avg_busbw_GBps < r.busbw_GBps  # the average includes the small sizes


def test_nccl_inter_and_no_check() -> None:
    assert p.parse_nccl_tests(read("nccl/all_reduce_inter_16rank.txt")).ranks == 16
    r = p.parse_nccl_tests(read("nccl/all_reduce_nocheck.txt"))
    assert all(x.oop_wrong is None for x in r.rows)


def test_nccl_data_corruption_is_an_error() -> None:
    with pytest.raises(ParseError, match="data corruption"):
        p.parse_nccl_tests(read("nccl/all_reduce_wrong.txt"))


def test_nccl_abort() -> None:
    with pytest.raises(ParseError, match="NCCL WARN"):
        p.parse_nccl_tests(read("nccl/nccl_warn_abort.txt"))


def test_nccl_unfinished_run() -> None:
    text = read("nccl/all_reduce_intra_8gpu.txt").split("# Out of bounds")[0]
    with pytest.raises(ParseError, match="did not finish"):
        p.parse_nccl_tests(text)


# --------------------------------------------------------------------------------------------------- IOR


def test_ior_json_and_text_agree() -> None:
    j = p.parse_ior(read("ior/ior_easy.json"))
    t = p.parse_ior(read("ior/ior_easy_text.txt"))
    assert j.bw("write") == pytest.approx(38512.12 * 2**20) == t.bw("write")
    assert j.bw("read") == pytest.approx(t.bw("read"))
    assert j.tasks == 64 and t.tasks == 64


def test_ior_trailing_commas_tolerated() -> None:
    text = read("ior/ior_easy.json").replace('"xsizeMiB": 262144.0}', '"xsizeMiB": 262144.0,}')
    assert p.parse_ior(text).bw("read") > 0


def test_ior_error() -> None:
    with pytest.raises(ParseError, match="ior ERROR: open64"):
        p.parse_ior(read("ior/ior_error.txt"))


def test_ior_missing_op() -> None:
    d = json.loads(read("ior/ior_easy.json"))
    d["summary"] = [s for s in d["summary"] if s["operation"] == "write"]
    with pytest.raises(ParseError, match="no read result"):
        p.parse_ior(json.dumps(d)).bw("read")


# ------------------------------------------------------------------------------------------------ mdtest


def test_mdtest_rate_table_only() -> None:
    r = p.parse_mdtest(read("mdtest/mdtest_files.txt"))
    assert r.rate("File creation").mean == pytest.approx(48213.512)  # not 1.327 from the SUMMARY time table
    assert r.rate("Tree removal").max == pytest.approx(512.066)


def test_mdtest_old_format() -> None:
    assert p.parse_mdtest(read("mdtest/mdtest_old.txt")).rate("File creation").mean == pytest.approx(21450.337)


def test_mdtest_error_and_missing_row() -> None:
    with pytest.raises(ParseError, match="FAILED in create_remove_directory_tree"):
        p.parse_mdtest(read("mdtest/mdtest_error.txt"))
    with pytest.raises(ParseError, match="no 'Directory creation' row"):
        p.parse_mdtest(read("mdtest/mdtest_files.txt")).rate("Directory creation")


def test_mdtest_non_numeric() -> None:
    text = read("mdtest/mdtest_files.txt").replace("48213.512      48213.512", "48213.512      nan-ish", 1)
    with pytest.raises(ParseError, match="not a number"):
        p.parse_mdtest(text)


# ------------------------------------------------------------------------------------------- GPU copies


def test_bandwidth_test_gb_and_mb() -> None:
    r = p.parse_bandwidth_test(read("cuda/bandwidthTest.txt"))
    assert r.h2d_Bps == pytest.approx(53.9e9) and r.d2h_Bps == pytest.approx(54.6e9)
    old = p.parse_bandwidth_test(read("cuda/bandwidthTest_mbs.txt"))
    assert old.h2d_Bps == pytest.approx(12161.8e6)


def test_bandwidth_test_no_device() -> None:
    with pytest.raises(ParseError, match=r"cudaGetDeviceProperties returned 100|no CUDA-capable"):
        p.parse_bandwidth_test(read("cuda/bandwidthTest_nodevice.txt"))


def test_nvbandwidth() -> None:
    r = p.parse_nvbandwidth(read("cuda/nvbandwidth.txt"))
    assert r.h2d_Bps == pytest.approx(55.41e9) and r.d2h_Bps == pytest.approx(55.73e9)
    with pytest.raises(ParseError, match="no 'SUM"):
        p.parse_nvbandwidth("nvbandwidth Version: v0.5\n")


# -------------------------------------------------------------------------------------- inspection tools


def test_lnetctl() -> None:
    nis = p.parse_lnetctl_net_show(read("lustre/lnetctl_net_show.yaml"))
    assert [(n.nid, n.status) for n in nis] == [("10.20.0.11@o2ib", "up"), ("10.20.1.11@o2ib", "down")]
    assert {n.net for n in nis} == {"o2ib"}  # libcfs_net2str_r() spells network 0 without its number
    assert nis[0].interfaces == ("ib0",)
    with pytest.raises(ParseError, match="no 'net:' list"):
        p.parse_lnetctl_net_show("show:\n    - net:\n          errno: -100\n")


def test_getstripe_layouts_through_the_lustre_library() -> None:
    """kiln verify reads lfs getstripe with kiln.lustre (the lustre_layout module's parser)."""
    pfl = parse_getstripe(read("lustre/getstripe_pfl.txt"))
    assert pfl is not None
    assert [(c.extent_end, c.stripe_count, c.stripe_size) for c in pfl] == [
        (64 << 20, 1, 1 << 20), (4 << 30, 4, 4 << 20), (None, -1, 4 << 20)]
    dom = parse_getstripe(read("lustre/getstripe_dom.txt"))
    assert dom is not None and dom[0].dom and dom[1].stripe_count == 1
    assert parse_getstripe(read("lustre/getstripe_plain.txt")) == [LayoutComponent(None, 1, 1 << 20)]


def test_getstripe_yaml_fixture() -> None:
    """The --yaml form (2.16: a `components:` list, one key per line) gives DoM, pool and overstriping."""
    comps = parse_getstripe(read("lustre/getstripe_yaml_pfl.yaml"))
    assert comps == [
        LayoutComponent(1 << 20, stripe_size=1 << 20, dom=True),
        LayoutComponent(64 << 20, stripe_count=1, stripe_size=1 << 20, pool="flash"),
        LayoutComponent(None, stripe_size=4 << 20, overstripe_count=-1),
    ]
    assert yaml.safe_load(read("lustre/getstripe_yaml_pfl.yaml"))["lcm_entry_count"] == 3  # it is YAML


def test_small_inspection_helpers() -> None:
    assert p.parse_ib_rate("400 Gb/sec (4X NDR)\n") == 400.0
    assert p.parse_ib_state("4: ACTIVE\n") == "ACTIVE"
    with pytest.raises(ParseError):
        p.parse_ib_rate("cat: rate: No such file or directory")
    gpus = p.parse_nvidia_smi_csv(read("gpu/nvidia_smi.csv"))
    assert [g.persistence for g in gpus].count("Disabled") == 1
    with pytest.raises(ParseError, match="NVIDIA-SMI has failed"):
        p.parse_nvidia_smi_csv("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert p.parse_env_file("# c\nNCCL_SOCKET_IFNAME==eth0\nNCCL_IB_DISABLE=1\n") == {
        "NCCL_SOCKET_IFNAME": "=eth0", "NCCL_IB_DISABLE": "1"}
    assert parse_size("16M") == 16 << 20 and parse_size("1048576") == 1 << 20
    assert normalize_nid("10.0.0.1@tcp0") == normalize_nid("10.0.0.1@tcp") == "10.0.0.1@tcp"
