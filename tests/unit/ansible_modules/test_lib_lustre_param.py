"""kiln.lustre.lustre_param (and lustre_common): lctl get_param / llog_print parsing, value normalisation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kiln_ansible_support import load_fixture

from kiln.lustre import lustre_common as common
from kiln.lustre import lustre_param as kl

OSC_RPC = "osc.*.max_pages_per_rpc"


def test_get_param_multi_device_lines() -> None:
    """The lctl-get_param(8) man page's example (edited, so a format example): five OSCs of two file systems."""
    entries = kl.parse_get_param(load_fixture("lctl_get_param_osc_multi.txt"))
    assert len(entries) == 5
    assert entries[0] == ("osc.myth-OST0000-osc-ffff8803c9c0f000.max_pages_per_rpc", "1024")
    assert entries[-1] == ("osc.testfs-OST0002-osc-ffff8803c9c0f000.max_pages_per_rpc", "1024")
    assert {value for _, value in entries} == {"1024"}


def test_get_param_multiline_values_are_kept_together() -> None:
    """Real 2.15.6 client output: 11 stats values, each a ``name=`` line and its counter lines."""
    entries = kl.parse_get_param(load_fixture("lctl_get_param_stats.txt"))
    names = [name for name, _ in entries]
    assert len(names) == 11
    assert names[0] == "llite.krvlrbev-ffff8a0c24d60000.stats"
    assert names[1:7] == [f"osc.krvlrbev-OST000{i}-osc-ffff8a0c24d60000.stats" for i in range(6)]
    assert names[-1] == "mdc.krvlrbev-MDT0003-mdc-ffff8a0c24d60000.stats"
    llite = entries[0][1].splitlines()
    assert llite[0] == "snapshot_time             1787281519.945231819 secs.nsecs"
    assert "read_bytes                64 samples [bytes] 1048576 1048576 67108864 70368744177664" in llite
    assert llite[-1] == "opencount                 18 samples [reqs] 1 1 18 18"
    assert entries[-1][1].splitlines()[-1].startswith("obd_ping ")


def test_get_param_real_tunables_one_line_per_device() -> None:
    """Real 2.15.6 client output of seven patterns: 38 devices, names with a NID ('@', dots) kept whole."""
    entries = kl.parse_get_param(load_fixture("lctl_get_param_tunables.txt"))
    assert len(entries) == 38
    assert entries[0] == ("ldlm.namespaces.MGC10.1.1.154@tcp.lru_max_age", "600000")
    assert entries[-1] == ("llite.krvlrbev-ffff8a0c24d60000.statahead_agl", "1")
    rpcs = [(name, value) for name, value in entries if name.endswith(".max_rpcs_in_flight")]
    assert len(rpcs) == 10
    # osc devices run 32 RPCs in flight, mdc devices 64: wanting 32 everywhere names exactly the 4 MDCs
    drift = kl.param_drift("*.*.max_rpcs_in_flight", 32, rpcs)
    mdcs = [f"mdc.krvlrbev-MDT000{i}-mdc-ffff8a0c24d60000.max_rpcs_in_flight" for i in range(4)]
    assert [d["device"] for d in drift] == mdcs
    assert {d["current"] for d in drift} == {"64"}


def test_wildcard_drift_on_multi_device_output() -> None:
    """1024 pages of 4 KiB are 4 MiB: no drift for 4M, every device drifts for 16M."""
    entries = kl.parse_get_param(load_fixture("lctl_get_param_osc_multi.txt"))
    assert kl.param_drift(OSC_RPC, "4M", entries, page_size=4096) == []
    assert kl.param_drift(OSC_RPC, 1024, entries, page_size=4096) == []
    drift = kl.param_drift(OSC_RPC, "16M", entries, page_size=4096)
    assert [d["device"] for d in drift] == [name for name, _ in entries]
    assert {d["current"] for d in drift} == {"1024"}


def test_wildcard_drift_names_only_the_device_that_differs() -> None:
    entries = kl.parse_get_param(load_fixture("lctl_get_param_osc_multi.txt"))
    odd = entries[2][0]
    entries[2] = (odd, "256")  # one device changed
    drift = kl.param_drift(OSC_RPC, "4M", entries, page_size=4096)
    assert drift == [{"name": OSC_RPC, "device": odd, "current": "256", "wanted": "4M"}]


def test_no_drift_when_all_devices_match_in_other_units() -> None:
    entries = kl.parse_get_param(load_fixture("lctl_get_param_dirty.txt"))
    assert kl.param_drift("osc.*.max_dirty_mb", "2G", entries) == []
    assert kl.param_drift("osc.*.max_dirty_mb", 2048, entries) == []
    assert len(kl.param_drift("osc.*.max_dirty_mb", "1G", entries)) == 2


@pytest.mark.parametrize(
    ("name", "value", "page_size", "expected"),
    [
        ("osc.*.max_pages_per_rpc", "16M", 4096, "4096"),
        ("osc.*.max_pages_per_rpc", "16M", 65536, "256"),
        ("osc.*.max_pages_per_rpc", "4096", 4096, "4096"),
        ("osc.*.max_pages_per_rpc", 256, 4096, "256"),
        ("osc.*.max_dirty_mb", "2G", 4096, "2048"),
        ("osc.*.max_dirty_mb", "2048", 4096, "2048"),
        ("osc.*.max_dirty_mb", "512K", 4096, "0.5"),
        ("llite.*.max_read_ahead_mb", "1G", 4096, "1024"),
        ("obdfilter.*.brw_size", "16M", 4096, "16"),
        ("obdfilter.*.readcache_max_filesize", "32M", 4096, "33554432"),
        ("obdfilter.*.readcache_max_filesize", "33554432", 4096, "33554432"),
        ("x.y.some_kb", "1M", 4096, "1024"),
        ("ldlm.namespaces.*.lru_max_age", "+0600000", 4096, "600000"),
        ("osc.*.max_dirty_mb", "29.15", 4096, "29.15"),
        ("mdt.*.identity_upcall", " NONE ", 4096, "NONE"),
        ("osc.*.checksums", True, 4096, "1"),
    ],
)
def test_normalize_param_value(name: str, value: object, page_size: int, expected: str) -> None:
    assert common.normalize_param_value(name, value, page_size) == expected


@given(st.integers(min_value=1, max_value=1 << 20), st.sampled_from(["K", "M", "G"]))
def test_size_suffix_equals_its_byte_count(number: int, unit: str) -> None:
    factor = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit]
    name = "obdfilter.*.readcache_max_filesize"
    assert common.normalize_param_value(name, f"{number}{unit}") == common.normalize_param_value(name, number * factor)


@given(st.integers(min_value=1, max_value=4096))
def test_pages_and_megabytes_agree_for_max_pages_per_rpc(megabytes: int) -> None:
    pages = megabytes * (1 << 20) // 4096
    as_size = common.normalize_param_value(OSC_RPC, f"{megabytes}M", 4096)
    assert as_size == common.normalize_param_value(OSC_RPC, pages, 4096)


def test_drift_uses_the_parameter_name_for_units_not_the_device_label() -> None:
    """A set_param -P record is labelled "params", yet 16M of max_pages_per_rpc is still 4096 pages."""
    assert kl.param_drift(OSC_RPC, "16M", [("params", "4096")], page_size=4096) == []
    assert kl.param_drift(OSC_RPC, "16M", [("params", "16M")], page_size=4096) == []
    assert kl.param_drift("osc.*.max_*", "2G", [("osc.a.max_dirty_mb", "2048")]) == []


def test_llog_params_real_record_and_name_is_exact() -> None:
    """Real output from the operations manual: one set_param -P record."""
    records = kl.parse_llog_records(load_fixture("llog_print_params.txt"))
    assert records == [
        {"index": "2", "event": "set_param", "device": "general", "parameter": "osc.*.max_dirty_mb", "value": "1024"}
    ]
    assert kl.persistent_value(records, "osc.*.max_dirty_mb") == "1024"
    assert kl.persistent_value(records, "osc.testfs-OST*.max_dirty_mb") is None
    assert kl.persistent_value(records, "osc.*.max_dirty") is None


def test_llog_params_latest_record_wins() -> None:
    records = kl.parse_llog_records(load_fixture("llog_print_params.txt"))
    later = dict(records[0], index="5", value="2048")  # the same parameter set again: the next record index
    assert kl.persistent_value([later, *records], "osc.*.max_dirty_mb") == "2048"


def test_llog_record_without_value_reads_as_deleted() -> None:
    records = kl.parse_llog_records(
        "- { index: 2, event: set_param, device: general, parameter: a.b.c, value: 1 }\n"
        "- { index: 3, event: set_param, device: general, parameter: a.b.c }\n"
    )
    assert kl.persistent_value(records, "a.b.c") is None


def test_llog_client_log_real_records_keep_their_own_index() -> None:
    """Real output from the operations manual: four client-log records of one OST (grep-filtered).

    The add_osc record repeats the key ``index`` (the OST index after the record index).
    """
    records = kl.parse_llog_records(load_fixture("llog_print_client_conf.txt"))
    assert [r["index"] for r in records] == ["135", "136", "137", "138"]
    assert [r["event"] for r in records] == ["add_uuid", "attach", "setup", "add_osc"]
    assert records[0]["nid"] == "192.168.10.99@tcp(0x20000c0a80a63)"
    assert records[2] == {
        "index": "137",
        "event": "setup",
        "device": "testfs-OST0003-osc",
        "UUID": "testfs-OST0003_UUID",
        "node": "192.168.10.99@tcp",
    }
    assert records[3]["ost"] == "testfs-OST0003_UUID" and records[3]["gen"] == "1"
    assert kl.conf_param_values(records, "testfs.osc.max_dirty_mb") == {}


def test_conf_param_values_per_device_latest_wins() -> None:
    """conf_param records as parse_llog_records returns them (LCFG_PARAM buffers: parameter)."""

    def rec(index: int, device: str, parameter: str) -> dict[str, str]:
        return {"index": str(index), "event": "conf_param", "device": device, "parameter": parameter}

    records = [
        rec(17, "lab-OST0000-osc", "osc.max_dirty_mb=64"),
        rec(21, "lab-OST0001-osc", "osc.max_dirty_mb=64"),
        rec(25, "lab-OST0000-osc", "osc.max_dirty_mb=512"),
        rec(29, "lab-client", "llite.max_read_ahead_mb=16"),
    ]
    assert kl.conf_param_values(records, "lab-OST0000.osc.max_dirty_mb") == {"lab-OST0000-osc": "512"}
    assert kl.conf_param_values(records[::-1], "lab.osc.max_dirty_mb") == {
        "lab-OST0000-osc": "512",
        "lab-OST0001-osc": "64",
    }
    assert kl.conf_param_values(records, "lab.llite.max_read_ahead_mb") == {"lab-client": "16"}
    assert kl.conf_param_values(records, "lab.llite.max_cached_mb") == {}
    with pytest.raises(ValueError):
        kl.split_conf_param_name("timeout")


def test_module_param_path_is_confined_to_sysfs() -> None:
    assert (
        kl.module_param_path("/sys", "mdt.max_mod_rpcs_per_client")
        == "/sys/module/mdt/parameters/max_mod_rpcs_per_client"
    )
    assert kl.module_param_path("/tmp/sys/", "ptlrpc.ptlrpcd_per_cpt_max").startswith("/tmp/sys/module/")
    for bad in ("mdt", "mdt.a.b", "../etc.passwd", "mdt./x"):
        with pytest.raises(ValueError):
            kl.module_param_path("/sys", bad)


def test_ram_limits_compare_pages_with_memtotal_as_the_kernel_does() -> None:
    from kiln.lustre.lustre_param import memtotal_kib, ram_limit_refusal

    memtotal = memtotal_kib("MemTotal:       16384000 kB\nMemFree: 1 kB\n")
    assert memtotal == 16384000
    # totalram = 4096000 pages of 4 KiB; / 2 = 2048000 pages = 8000 MiB (lproc_llite.c max_read_ahead_mb_store)
    assert ram_limit_refusal("llite.*.max_read_ahead_mb", 8000, memtotal) is None
    assert "at most 8000 MiB" in str(ram_limit_refusal("llite.*.max_read_ahead_mb", 8001, memtotal))
    # / 4 = 4000 MiB, and never 2048 MiB or more (lproc_osc.c max_dirty_mb_store)
    assert "2048 MiB or more" in str(ram_limit_refusal("osc.*.max_dirty_mb", "2G", memtotal))
    assert ram_limit_refusal("osc.*.max_dirty_mb", 2047, memtotal) is None
    assert "at most 250 MiB" in str(ram_limit_refusal("osc.*.max_dirty_mb", 251, 1024000))
    assert ram_limit_refusal("osc.*.max_rpcs_in_flight", 10**9, memtotal) is None
