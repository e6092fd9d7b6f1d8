"""Parsers on real tool output (fio, iperf3, warp: produced by tests/fixtures/tools/regen.sh; IOR and mdtest
4.0.0 and main: real runs named in their .source; published nccl-tests and perftest output, cited) and on the
documented formats of the tools that need hardware (nvbandwidth, bandwidthTest, lnetctl, lfs)."""

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
# The parser fixtures of the Ansible collection's module_utils (plugins/module_utils/lustre_*.py).
MODULE_FIX = Path(__file__).resolve().parents[1] / "ansible_modules" / "fixtures"


def read(rel: str) -> str:
    return (FIX / rel).read_text(encoding="utf-8")


# The only fixtures still written from a documented format: no real output was found for them (docs/acceptance.md).
FORMAT_EXAMPLES = {
    "tools/lustre/getstripe_yaml_pfl.yaml",
    "ansible_modules/getdirstripe_default_yaml.txt",
    "ansible_modules/quota_default_prj_2_16.txt",
    "ansible_modules/quota_default_usr_2_15.txt",
    "ansible_modules/getstripe_no_layout.txt",
    "ansible_modules/getstripe_plain_overstriped.txt",
    "ansible_modules/getstripe_verbose_components.txt",
    "ansible_modules/getstripe_yaml_pfl_dom_pool.txt",
    "ansible_modules/getstripe_yaml_plain.txt",
    "ansible_modules/lctl_get_param_dirty.txt",
    "ansible_modules/lctl_get_param_osc_multi.txt",
    "ansible_modules/tunefs_ldiskfs_mdt_mgs_failnode.txt",
    "ansible_modules/tunefs_ldiskfs_ost_servicenode.txt",
    "ansible_modules/tunefs_not_formatted.txt",
    "ansible_modules/tunefs_zfs_ost.txt",
}
FIXTURE_DIRS = {"tools": FIX, "ansible_modules": MODULE_FIX}


@pytest.mark.parametrize("tree", sorted(FIXTURE_DIRS))
def test_every_fixture_says_where_it_came_from(tree: str) -> None:
    """A fixture is a run (NAME.cmd: regen.sh, regen-blkid.sh) or real output named in NAME.source; hand-written
    ones are listed in FORMAT_EXAMPLES and their .source names the code they were written from."""
    fixtures = [f for f in FIXTURE_DIRS[tree].rglob("*") if f.suffix in (".json", ".txt", ".yaml", ".csv")]
    assert fixtures
    for f in fixtures:
        rel = f"{tree}/{f.relative_to(FIXTURE_DIRS[tree]).as_posix()}"
        cmd, src = f.with_suffix(".cmd"), f.with_suffix(".source")
        assert cmd.exists() or src.exists(), f"{rel}: add NAME.cmd (a regen run) or NAME.source (provenance)"
        if cmd.exists():
            assert rel not in FORMAT_EXAMPLES, f"{rel}: a run is not a format example"
            assert cmd.read_text(encoding="utf-8").strip(), f"{rel}: its .cmd is empty"
        if src.exists():
            label = "FORMAT EXAMPLE" if rel in FORMAT_EXAMPLES else "REAL OUTPUT"
            assert src.read_text(encoding="utf-8").startswith(label), f"{rel}: its .source must start with {label!r}"


def test_format_examples_exist() -> None:
    for rel in FORMAT_EXAMPLES:
        tree, _, name = rel.partition("/")
        assert (FIXTURE_DIRS[tree] / name).exists(), f"FORMAT_EXAMPLES lists {rel}, which is gone"


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


def test_fio_interrupted_by_a_signal_is_not_a_measurement() -> None:
    # real fio 3.33 run stopped with SIGINT: JSON with error 0 and "fio: terminating on signal 2"
    with pytest.raises(ParseError, match="interrupted by signal 2"):
        p.parse_fio(read("fio/interrupted.json"), read("fio/interrupted.stderr"))


def test_fio_2x_units_are_kib() -> None:
    # published fio 2.1.4 JSON (PerfKitBenchmarker's captured output): io_bytes in KiB, bw in KiB/s, no bw_bytes
    r = p.parse_fio(read("fio/fio_2.1.4_pkb.json"))
    seq = next(j for j in r.jobs if j.name == "sequential_write")
    assert r.version == "fio-2.1.4" and seq.write_bytes == 361984 * 1024 and seq.write_bw_Bps == 68118 * 1024
    # the two figures agree only when both are read as KiB: bytes / runtime = fio's own bw
    assert seq.write_bytes / (seq.write_runtime_ms / 1000) == pytest.approx(seq.write_bw_Bps, rel=0.01)
    d = json.loads(read("fio/write_2jobs.json"))
    d["fio version"] = "fio-4.0"
    with pytest.raises(ParseError, match=r"unsupported fio version fio-4.0"):
        p.parse_fio(json.dumps(d))


def test_malformed_json_is_a_parse_error_not_an_attribute_error() -> None:
    d = json.loads(read("fio/write_2jobs.json"))
    d["jobs"][0]["write"] = "oops"
    with pytest.raises(ParseError, match=r"job .* write is not a JSON object"):
        p.parse_fio(json.dumps(d))
    d = json.loads(read("fio/write_2jobs.json"))
    d["jobs"] = ["x"]
    with pytest.raises(ParseError, match="jobs\\[\\] entry is not a JSON object"):
        p.parse_fio(json.dumps(d))
    w = p._json_object_after("warp", p._strip_ansi(read("warp/put.json")), "operations")
    w["operations"] = [1]
    with pytest.raises(ParseError, match="not a JSON object"):
        p.parse_warp(json.dumps(w))
    i = json.loads(read("iperf3/tcp_4streams.json"))
    i["end"] = []
    with pytest.raises(ParseError, match="end is not a JSON object"):
        p.parse_iperf3(json.dumps(i))


def test_iperf3_interrupted_short_and_empty_runs() -> None:
    with pytest.raises(ParseError, match="interrupt - the client has terminated"):
        p.parse_iperf3(read("iperf3/interrupted.json"), read("iperf3/interrupted.stderr"))
    d = json.loads(read("iperf3/tcp_4streams.json"))  # 3 s requested
    d["end"]["sum_received"]["seconds"] = 0.1
    with pytest.raises(ParseError, match=r"cut short: 0.10 s of the requested 3 s"):
        p.parse_iperf3(json.dumps(d))
    d = json.loads(read("iperf3/tcp_4streams.json"))
    d["end"]["sum_received"]["bytes"] = 0
    with pytest.raises(ParseError, match="receiver got 0 bytes"):
        p.parse_iperf3(json.dumps(d))


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


def test_warp_failed_requests_are_an_error() -> None:
    text = read("warp/put.json")
    d = p._json_object_after("warp", p._strip_ansi(text), "operations")
    for o in d["operations"]:
        o["errors"] = 999 if o["type"] == "PUT" else 0
        o["n"] = 1000 if o["type"] == "PUT" else o["n"]
    with pytest.raises(ParseError, match="999 of 1000 PUT requests failed"):
        p.parse_warp(json.dumps(d)).op("PUT")


def test_warp_versions() -> None:
    assert p.parse_warp_version("warp version v1.0.0 - b3452c34f08a") == "1.0.0"
    with pytest.raises(ValueError, match=r"unsupported warp version 1.1.0"):
        p.parse_warp_version("warp version v1.1.0 - abc")
    with pytest.raises(ValueError, match="cannot read the warp version"):
        p.parse_warp_version("sh: warp: not found")


def test_warp_error_from_the_server() -> None:
    with pytest.raises(ParseError, match="SignatureDoesNotMatch"):
        p.parse_warp(read("warp/bad_secret.json"), read("warp/bad_secret.stderr"))


def test_warp_1_1_layout_is_refused_clearly() -> None:
    # test-made input, not a published run (none was found): the top-level keys warp v1.1.0 writes for --json,
    # from the json tags of pkg/aggregate/live.go (Realtime: v, commandline, final, warp_version, total, by_op_type)
    newer = {"v": 2, "commandline": "warp get", "final": True, "warp_version": "1.1.2",
             "total": {"total_requests": 10, "total_errors": 0}, "by_op_type": {"GET": {"total_requests": 10}}}
    with pytest.raises(ParseError, match=r"warp >= 1.1's layout \(warp 1.1.2\).*supported: warp v1.0.x"):
        p.parse_warp("warp: Benchmark starting...\n" + json.dumps(newer, indent=2))


def test_warp_without_json() -> None:
    with pytest.raises(ParseError, match="no analysis JSON"):
        p.parse_warp("warp: Benchmark starting...\nOperation: PUT. Concurrency: 4\n")


# ---------------------------------------------------------------------------------------------- perftest


def test_perftest_clock_warning_inside_the_table() -> None:
    r = p.parse_perftest(read("perftest/ib_write_bw_cpufreq.txt"))  # published output, NVIDIA/deepops docs
    assert r.test == "RDMA_Write BW Test" and r.device == "mlx5_0" and r.unit == "Gb/sec"
    assert r.bw_avg_Bps == pytest.approx(92.40 * 125e6) and r.rows[0].size_bytes == 65536


def test_perftest_truncated_table() -> None:
    text = read("perftest/ib_write_bw_cpufreq.txt").rstrip().rsplit("\n", 1)[0]  # closing line cut off
    with pytest.raises(ParseError, match="truncated"):
        p.parse_perftest(text)
    # a real --run_infinitely run stopped by hand (NVIDIA/dgx-spark-playbooks): rows, but no closing line
    with pytest.raises(ParseError, match="truncated"):
        p.parse_perftest(read("perftest/ib_write_bw_infinite.txt"))


def test_perftest_mb_is_mebibytes() -> None:
    r = p.parse_perftest(read("perftest/ib_write_bw_mbs.txt"))  # published output, alogfans/RDMA101
    assert r.unit == "MB/sec" and r.device == "mlx5_1"
    assert r.bw_avg_Bps == pytest.approx(44276.64 * 2**20)


def test_perftest_connection_failure_and_no_device() -> None:
    with pytest.raises(ParseError, match=r"Couldn't connect to 192\.168\.125\.211:18515"):
        p.parse_perftest(read("perftest/connect_failed.txt"))  # published in linux-rdma/perftest PR #228
    # real run of perftest 4.5 on a host without RDMA devices: nothing on stdout, the reason on stderr
    with pytest.raises(ParseError, match=r"no output; the tool said: Unable to find the Infiniband/RoCE device"):
        p.parse_perftest(read("perftest/no_device.txt"), read("perftest/no_device.stderr"))
    assert read("perftest/no_device.rc").strip() == "1"


def test_perftest_non_numeric_row() -> None:
    text = read("perftest/ib_write_bw_cpufreq.txt").replace("92.40", "n/a")
    with pytest.raises(ParseError, match="BW average is not a number"):
        p.parse_perftest(text)


# -------------------------------------------------------------------------------------------- nccl-tests


def test_nccl_intra() -> None:
    r = p.parse_nccl_tests(read("nccl/all_reduce_intra_8gpu.txt"))  # published: 8 × A100, oracle-japan/ocitutorials
    assert r.ranks == 8 and len(r.rows) == 1
    assert r.rows[0].size_bytes == 10 << 30 and r.rows[0].oop_wrong == 0 and r.rows[0].ip_wrong == 0
    assert r.busbw_GBps == pytest.approx(232.20) and r.avg_busbw_GBps == pytest.approx(232.167)


def test_nccl_inter() -> None:
    r = p.parse_nccl_tests(read("nccl/all_reduce_inter_16rank.txt"))  # published: 2 × 8 A100, oci-hpc-oke
    assert r.ranks == 16 and len(r.rows) == 31
    big = max(r.rows, key=lambda x: x.size_bytes)
    assert big.size_bytes == 8 << 30 and r.busbw_GBps == pytest.approx(237.94)
    assert r.avg_busbw_GBps == pytest.approx(66.4834) and r.avg_busbw_GBps < r.busbw_GBps  # small sizes count too


def test_nccl_old_table_without_root_and_with_float_error() -> None:
    r = p.parse_nccl_tests(read("nccl/all_reduce_old_4gpu.txt"))  # published output, Azure/azureml-examples
    assert len(r.rows) == 7 and r.busbw_GBps == pytest.approx(2.56) and r.avg_busbw_GBps == pytest.approx(2.54225)
    assert r.rows[0].oop_wrong is None  # a float max error, not a count; "Out of bounds values" decides
    bad = read("nccl/all_reduce_old_4gpu.txt").replace("Out of bounds values : 0 OK", "Out of bounds values : 2 FAILED")
    with pytest.raises(ParseError, match="2 out-of-bounds values"):
        p.parse_nccl_tests(bad)


def test_nccl_header_is_never_the_reported_error() -> None:
    head = read("nccl/all_reduce_old_4gpu.txt").split("2e3f9af7241040529530e810ce60fe5d000002:195:195")[0]
    with pytest.raises(ParseError, match="no rows"):
        p.parse_nccl_tests(head)


def test_nccl_unchecked_column_reads_na() -> None:
    r = p.parse_nccl_tests(read("nccl/alltoall_inplace_na.txt"))  # published: nccl-tests issue #287
    assert r.rows[0].oop_wrong == 0 and r.rows[0].ip_wrong is None and r.avg_busbw_GBps == 0


def test_nccl_data_corruption_is_an_error() -> None:
    # the real 8-GPU output with its out-of-place #wrong turned into 3 (a test-made variant, not a published run)
    text = read("nccl/all_reduce_intra_8gpu.txt").replace("232.20      0", "232.20      3")
    with pytest.raises(ParseError, match=r"data corruption: 1 sizes with #wrong > 0 .*out-of-place 3"):
        p.parse_nccl_tests(text)


def test_nccl_abort() -> None:
    with pytest.raises(ParseError, match=r"Test CUDA failure common\.cu:986 'invalid device ordinal'"):
        p.parse_nccl_tests(read("nccl/abort_invalid_device.txt"))  # published: nccl-tests issue #289


def test_nccl_unfinished_run() -> None:
    text = read("nccl/all_reduce_inter_16rank.txt").split("# Out of bounds")[0]
    with pytest.raises(ParseError, match="did not finish"):
        p.parse_nccl_tests(text)


# --------------------------------------------------------------------------------------------------- IOR


def test_ior_4_0_real_run() -> None:
    r = p.parse_ior(read("ior/ior_4.0.0_write.json"))
    assert r.write_Bps == pytest.approx(485.3483 * p.MIB) and r.read_Bps is None and r.tasks == 2


def test_ior_other_versions_refused() -> None:
    d = json.loads(read("ior/ior_4.0.0_write.json"))
    d["Version"] = "2.10.3"
    with pytest.raises(ParseError, match=r"unsupported IOR version 2\.10\.3"):
        p.parse_ior(json.dumps(d))


def test_ior_4_0_json_and_text_agree() -> None:
    # two real IOR 4.0.0 runs (write + read): JSON summary, and the text 'Summary of all tests:' table
    j = p.parse_ior(read("ior/ior_4.0.0_write_read.json"))
    assert j.bw("write") == pytest.approx(375.4458 * p.MIB) and j.bw("read") == pytest.approx(12480.7261 * p.MIB)
    t = p.parse_ior(read("ior/ior_4.0.0_text.txt"))  # 4.0 prints no 'Max Write:' line
    assert t.bw("write") == pytest.approx(817.01 * p.MIB) and t.bw("read") == pytest.approx(19474.42 * p.MIB)
    assert j.tasks == t.tasks == 2


def test_ior_text_without_summary_table() -> None:
    text = read("ior/ior_4.0.0_text.txt").split("Summary of all tests:")[0]
    with pytest.raises(ParseError, match="Summary of all tests"):
        p.parse_ior(text)


def test_ior_trailing_commas_tolerated() -> None:
    text = read("ior/ior_4.0.0_write_read.json")
    assert '"xsizeMiB": 32.0000\n  }' in text
    assert p.parse_ior(text.replace('"xsizeMiB": 32.0000\n  }', '"xsizeMiB": 32.0000,\n  }')).bw("read") > 0


def test_ior_error() -> None:
    with pytest.raises(ParseError, match=r"ERROR: open64\("):
        p.parse_ior(read("ior/ior_4.0.0_error.txt"), read("ior/ior_4.0.0_error.stderr"))
    assert read("ior/ior_4.0.0_error.rc").strip() == "255"


def test_ior_missing_op() -> None:
    with pytest.raises(ParseError, match="no read result"):
        p.parse_ior(read("ior/ior_4.0.0_write.json")).bw("read")


# ------------------------------------------------------------------------------------------------ mdtest


def test_mdtest_4_0_real_run_rows_without_colons() -> None:
    r = p.parse_mdtest(read("mdtest/mdtest_files.txt"))  # mdtest 4.0.0, the version roles/bench_tools builds
    assert r.rate("File creation").mean == pytest.approx(2220.260)
    assert r.rate("Tree removal").max == pytest.approx(109.793)
    assert set(r.rates) == {"File creation", "File stat", "File read", "File removal", "Tree creation",
                            "Tree removal"}


def test_mdtest_main_rate_header_with_units() -> None:
    r = p.parse_mdtest(read("mdtest/mdtest_main.txt"))  # "SUMMARY rate (in ops/sec):"
    assert r.rate("File creation").mean == pytest.approx(1661.965)


def test_mdtest_rate_table_not_the_time_table() -> None:
    # mdtest prints "SUMMARY time" after the rate table with -i > 1; a table after it must not be read as rates
    text = read("mdtest/mdtest_files.txt").replace(
        "-- finished at", "\nSUMMARY time: (of 1 iterations)\n   File creation      9.9 9.9 9.9 0.0\n-- finished at")
    assert p.parse_mdtest(text).rate("File creation").mean == pytest.approx(2220.260)


def test_mdtest_other_versions_refused() -> None:
    text = read("mdtest/mdtest_files.txt").replace("mdtest-4.0.0 was launched", "mdtest-1.9.3 was launched")
    with pytest.raises(ParseError, match=r"unsupported mdtest version 1.9.3; supported: mdtest 4.0"):
        p.parse_mdtest(text)


def test_mdtest_error_and_missing_row() -> None:
    with pytest.raises(ParseError, match=r"the tool reported: ERROR: open64\("):
        p.parse_mdtest(read("mdtest/mdtest_error.txt"), read("mdtest/mdtest_error.stderr"))
    with pytest.raises(ParseError, match="no 'Directory creation' row"):
        p.parse_mdtest(read("mdtest/mdtest_files.txt")).rate("Directory creation")


def test_mdtest_abort_after_the_table_and_truncated_output() -> None:
    good = read("mdtest/mdtest_files.txt")
    with pytest.raises(ParseError, match="MPI_ABORT"):
        p.parse_mdtest(good, "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\n")
    with pytest.raises(ParseError, match="truncated"):
        p.parse_mdtest(good.split("-- finished at")[0])


def test_mdtest_non_numeric() -> None:
    text = read("mdtest/mdtest_files.txt").replace("2220.260       2220.260", "2220.260       nan-ish", 1)
    with pytest.raises(ParseError, match="not a number"):
        p.parse_mdtest(text)


# ------------------------------------------------------------------------------------------- GPU copies


def test_bandwidth_test_gb_and_mb() -> None:
    r = p.parse_bandwidth_test(read("cuda/bandwidthTest.txt"))  # CUDA 11.3 samples, range mode (jdh4/della-gpu-A100)
    assert r.h2d_Bps == pytest.approx(25.9e9) and r.d2h_Bps == pytest.approx(25.8e9)  # the 1 GB row, not the first
    old = p.parse_bandwidth_test(read("cuda/bandwidthTest_mbs.txt"))  # pre-10.1 samples on a K80 (PerfKitBenchmarker)
    assert old.h2d_Bps == pytest.approx(9254.7 * 1_024_000) and old.d2h_Bps == pytest.approx(9686.1 * 1_024_000)
    with pytest.raises(ParseError, match="truncated"):
        p.parse_bandwidth_test(read("cuda/bandwidthTest.txt").split("Result = PASS")[0])


def test_bandwidth_test_device_not_ready() -> None:
    with pytest.raises(ParseError, match=r"the tool reported: cudaGetDeviceProperties returned 802"):
        p.parse_bandwidth_test(read("cuda/bandwidthTest_not_ready.txt"))  # published: pytorch/pytorch #35710


def test_nvbandwidth() -> None:
    r = p.parse_nvbandwidth(read("cuda/nvbandwidth_v0.2_8gpu.txt"))  # published: NVIDIA/nvbandwidth #15
    assert r.h2d_Bps == pytest.approx(205.04e9) and r.d2h_Bps == pytest.approx(214.28e9)
    sm = p.parse_nvbandwidth(read("cuda/nvbandwidth_v0.8_sm.txt"))  # published: NVIDIA/nvbandwidth #42
    assert sm.h2d_Bps == pytest.approx(25.13e9) and sm.d2h_Bps is None
    with pytest.raises(ParseError, match="ASSERT in expression h_errorFlag == 0"):
        p.parse_nvbandwidth(read("cuda/nvbandwidth_assert.txt"))  # published: NVIDIA/nvbandwidth #34
    with pytest.raises(ParseError, match="no 'SUM"):
        p.parse_nvbandwidth(read("cuda/nvbandwidth_v0.8_sm.txt").split("SUM ")[0])


# -------------------------------------------------------------------------------------- inspection tools


def test_lnetctl() -> None:
    nis = p.parse_lnetctl_net_show(read("lustre/lnetctl_net_show.yaml"))  # published: Lustre 2.15.6 client, tcp + efa
    assert [(n.net, n.nid, n.status) for n in nis] == [("tcp", "10.1.1.61@tcp", "up"), ("efa", "1.61.92.0@efa", "up")]
    assert nis[0].interfaces == ("enp71s0",) and nis[1].interfaces == ("efa_0",)  # the loopback net is left out
    with pytest.raises(ParseError, match="no 'net:' list"):
        p.parse_lnetctl_net_show("show:\n    - net:\n          errno: -100\n")


def test_getstripe_layouts_through_the_lustre_library() -> None:
    """kiln verify reads lfs getstripe with kiln.lustre (the lustre_layout module's parser); published 2.15 outputs."""
    pfl = parse_getstripe(read("lustre/getstripe_pfl.txt"))  # directory default: one settings line per component
    assert pfl is not None
    assert [(c.extent_end, c.stripe_count, c.stripe_size) for c in pfl] == [
        (100 << 20, 1, 1 << 20), (10 << 30, 8, 1 << 20), (100 << 30, 16, 1 << 20), (None, 32, 1 << 20)]
    dom = parse_getstripe(read("lustre/getstripe_dom.txt"))
    assert dom == [LayoutComponent(64 << 10, stripe_size=64 << 10, dom=True),
                   LayoutComponent(None, stripe_count=-1, stripe_size=1 << 20)]
    assert parse_getstripe(read("lustre/getstripe_plain.txt")) == [LayoutComponent(None, 1, 1 << 20)]


def test_getstripe_yaml_fixture() -> None:
    """The --yaml form (2.16: a `components:` list, one key per line) gives DoM, pool and overstriping.
    This fixture is still written from lustre-release's printing code (its .source says so): no published
    `lfs getstripe --yaml` output of a directory default was found."""
    comps = parse_getstripe(read("lustre/getstripe_yaml_pfl.yaml"))
    assert comps == [
        LayoutComponent(1 << 20, stripe_size=1 << 20, dom=True),
        LayoutComponent(64 << 20, stripe_count=1, stripe_size=1 << 20, pool="flash"),
        LayoutComponent(None, stripe_size=4 << 20, overstripe_count=-1),
    ]
    assert yaml.safe_load(read("lustre/getstripe_yaml_pfl.yaml"))["lcm_entry_count"] == 3  # it is YAML


def test_nvidia_smi_real_captures_read_by_header() -> None:
    """Real --query-gpu CSV of 590.48.01 (H100, 212 columns) and 595.80 (L40S, 202 columns): the parser picks
    index, name and persistence_mode by the header, wherever they stand."""
    h100 = read("gpu/nvidia_smi_h100_590.csv")
    assert h100.splitlines()[0].split(", ").index("index") == 28  # not the first column in a wide query
    assert p.parse_nvidia_smi_csv(h100) == (p.GpuSeen(0, "NVIDIA H100 80GB HBM3", "Enabled"),)
    assert p.parse_nvidia_smi_csv(read("gpu/nvidia_smi_l40s_595.csv")) == (p.GpuSeen(0, "NVIDIA L40S", "Disabled"),)
    rows = p.parse_nvidia_smi_query(h100, ("driver_version", "memory.total", "pstate"))
    assert rows == [{**rows[0], "driver_version": "590.48.01", "memory.total": "81559 MiB", "pstate": "P0"}]


def test_nvidia_smi_needs_the_header_and_its_columns() -> None:
    h100 = read("gpu/nvidia_smi_h100_590.csv")
    with pytest.raises(ParseError, match=r"no column index, name, persistence_mode in the first line '0, NVIDIA"):
        p.parse_nvidia_smi_csv("0, NVIDIA H100 80GB HBM3, Enabled\n")  # --format=csv,noheader
    without_name = h100.replace(", name, ", ", gpu_name, ", 1)
    with pytest.raises(ParseError, match="no column name in the first line"):
        p.parse_nvidia_smi_csv(without_name)
    header, row = h100.splitlines()
    with pytest.raises(ParseError, match="a row has 211 cells, the header 212"):
        p.parse_nvidia_smi_csv(f"{header}\n{row.rsplit(',', 1)[0]}\n")
    with pytest.raises(ParseError, match="no output; the tool said: No devices were found"):
        p.parse_nvidia_smi_csv("", "No devices were found\n")


def test_small_inspection_helpers() -> None:
    assert p.parse_ib_rate("400 Gb/sec (4X NDR)\n") == 400.0
    assert p.parse_ib_state("4: ACTIVE\n") == "ACTIVE"
    with pytest.raises(ParseError):
        p.parse_ib_rate("cat: rate: No such file or directory")
    with pytest.raises(ParseError, match="NVIDIA-SMI has failed"):
        p.parse_nvidia_smi_csv("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert p.parse_env_file("# c\nNCCL_SOCKET_IFNAME==eth0\nNCCL_IB_DISABLE=1\n") == {
        "NCCL_SOCKET_IFNAME": "=eth0", "NCCL_IB_DISABLE": "1"}
    assert parse_size("16M") == 16 << 20 and parse_size("1048576") == 1 << 20
    assert normalize_nid("10.0.0.1@tcp0") == normalize_nid("10.0.0.1@tcp") == "10.0.0.1@tcp"
