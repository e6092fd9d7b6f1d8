"""kiln's Lustre exporter against fixture trees of real Lustre output (tests/fixtures/lustre): each file's .source
names the repository, file and commit it was copied from and the lustre-release v2_15_8 function that prints it."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kiln.node.exporters.lustre import LustreCollector, main, parse_job_stats, parse_stats, registry

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "lustre"


def fixture_lnetctl(args: list[str]) -> str | None:
    """Test double for `lnetctl`: returns the recorded output of `net show -v` and `stats show`."""
    name = {"net show -v": "net_show_v.yaml", "stats show": "stats_show.yaml"}.get(" ".join(args))
    return (FIX / "lnetctl" / name).read_text() if name else None


def no_lnetctl(args: list[str]) -> str | None:
    """Test double for a host without lnetctl."""
    return None


def samples(root: str, lnetctl=fixture_lnetctl) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:  # type: ignore[no-untyped-def]
    text = generate_latest(registry(LustreCollector(FIX / root, lnetctl))).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def one(data: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    assert key in data, f"{key} not in {sorted(k for k in data if k[0] == name)}"
    return data[key]


def test_parse_stats_reads_counts_and_sums() -> None:
    c = parse_stats((FIX / "oss/proc/fs/lustre/obdfilter/ai400-OST0000/stats").read_text())
    assert c["write_bytes"].samples == 25001 and c["write_bytes"].sum == 104857600000
    assert c["write_bytes"].unit == "bytes" and c["statfs"].samples == 59816
    assert not {"snapshot_time", "start_time", "elapsed_time"} & set(c)
    # Lustre 2.15.6's llite stats: a counter without min/max/sum keeps its count and no sum
    client = parse_stats((FIX / "client/proc/fs/lustre/llite/krvlrbev-ffff8a0c24d60000/stats").read_text())
    assert client["ioctl"].samples == 153 and client["ioctl"].sum is None and client["read_bytes"].sum == 67108864


def test_parse_job_stats_reads_the_2_10_format() -> None:
    """HPE's 2.10-era OST job_stats: whole-second snapshot_time, [reqs] counters without min/max/sum."""
    jobs = parse_job_stats((FIX / "oss/proc/fs/lustre/obdfilter/ai400-OST0000/job_stats").read_text())
    assert len(jobs) == 35 and {"23", "24", "57"} <= set(jobs)
    assert jobs["24"]["write_bytes"]["sum"] == "215147593728"
    assert jobs["24"]["punch"] == {"samples": "1", "unit": "reqs"}
    assert parse_job_stats((FIX / "oss/proc/fs/lustre/obdfilter/ai400-OST0001/job_stats").read_text()) == {}


def test_parse_job_stats_keeps_job_ids_as_printed() -> None:
    """Unquoted ids are not typed by YAML (1234.10 is not 1234.1, 0123 is not 83); quoted ones are unescaped."""
    text = (FIX / "mds/proc/fs/lustre/mdt/ai400-MDT0000/job_stats").read_text()
    first = text.index("- job_id:")
    second = text.index("- job_id:", first + 1)
    item = text[first:second]  # job 43 of the real file
    ids = ("1234.10", "0123", '"rsync\\x20stage"')
    doc = "job_stats:\n" + "".join(item.replace("job_id:          43", f"job_id:          {i}") for i in ids)
    jobs = parse_job_stats(doc)
    assert list(jobs) == ["1234.10", "0123", "rsync stage"]
    assert jobs["0123"]["setattr"]["samples"] == "1"


def test_oss_targets_space_inodes_and_recovery() -> None:
    d = samples("oss")
    assert one(d, "lustre_exporter_applicable", reason="") == 1
    assert one(d, "lustre_health_healthy") == 1
    ai = {"kind": "ost", "fsname": "ai400"}
    assert one(d, "lustre_target_info", target="ai400-OST0001", osd="ldiskfs", **ai) == 1
    assert one(d, "lustre_target_capacity_bytes", target="ai400-OST0000", **ai) == 3978095168 * 1024
    assert one(d, "lustre_target_free_bytes", target="ai400-OST0000", **ai) == 3875693364 * 1024
    assert one(d, "lustre_target_available_bytes", target="ai400-OST0001", **ai) == 3937811756 * 1024
    used = 1 - one(d, "lustre_target_free_bytes", target="ai400-OST0000", **ai) / one(
        d, "lustre_target_capacity_bytes", target="ai400-OST0000", **ai)
    assert used == pytest.approx(1 - 3875693364 / 3978095168)  # 2.6 % used
    assert one(d, "lustre_target_files", target="ai400-OST0000", **ai) == 31457280
    assert one(d, "lustre_target_files_free", target="ai400-OST0000", **ai) == 31456558
    assert one(d, "lustre_target_recovery_status", target="ai400-OST0000", status="COMPLETE") == 1
    assert one(d, "lustre_target_recovery_status", target="ai400-OST0001", status="WAITING_FOR_CLIENTS") == 1


def test_oss_bulk_rpcs_and_jobstats() -> None:
    d = samples("oss")
    assert one(d, "lustre_target_write_bytes_total", target="ai400-OST0000", kind="ost") == 104857600000
    assert not [k for k in d if k[0] == "lustre_target_read_bytes_total"]  # neither OST has served a read
    assert not [k for k in d if k[0] == "lustre_target_write_bytes_total" and ("target", "ai400-OST0001") in k[1]]
    assert one(d, "lustre_target_ops_total", target="ai400-OST0000", kind="ost", op="write") == 25001
    assert one(d, "lustre_target_ops_total", target="ai400-OST0001", kind="ost", op="statfs") == 59814
    assert one(d, "lustre_job_write_bytes_total", target="ai400-OST0000", job_id="24") == 215147593728
    assert one(d, "lustre_job_read_bytes_total", target="ai400-OST0000", job_id="24") == 0
    assert one(d, "lustre_job_ops_total", target="ai400-OST0000", job_id="24", op="punch") == 1
    assert one(d, "lustre_job_ops_total", target="ai400-OST0000", job_id="24", op="getattr") == 0


def test_mds_unhealthy_and_metadata_ops() -> None:
    d = samples("mds")
    assert one(d, "lustre_health_healthy") == 0
    assert one(d, "lustre_target_info", target="ai400-MDT0000", kind="mdt", fsname="ai400", osd="ldiskfs") == 1
    assert one(d, "lustre_target_ops_total", target="ai400-MDT0000", kind="mdt", op="getattr") == 23
    assert one(d, "lustre_target_ops_total", target="ai400-MDT0000", kind="mdt", op="statfs") == 44863
    assert one(d, "lustre_job_ops_total", target="ai400-MDT0000", job_id="43", op="setattr") == 1
    assert one(d, "lustre_job_ops_total", target="ai400-MDT0000", job_id="43", op="open") == 0
    assert one(d, "lustre_target_recovery_status", target="ai400-MDT0000", status="COMPLETE") == 1
    mdt = {"target": "ai400-MDT0000", "kind": "mdt", "fsname": "ai400"}
    assert one(d, "lustre_target_files", **mdt) == 85908496
    inodes_used = 1 - one(d, "lustre_target_files_free", **mdt) / one(d, "lustre_target_files", **mdt)
    assert inodes_used == pytest.approx(296 / 85908496)


def test_client_mount_bytes() -> None:
    d = samples("client")
    assert one(d, "lustre_health_healthy") == 1
    mount = {"fsname": "krvlrbev", "instance_id": "ffff8a0c24d60000"}
    assert one(d, "lustre_client_read_bytes_total", **mount) == 67108864
    assert one(d, "lustre_client_write_bytes_total", **mount) == 276824064
    assert not [k for k in d if k[0] == "lustre_target_info"]


def test_lnet_nis_and_stats() -> None:
    d = samples("oss")
    assert one(d, "lustre_lnet_ni_up", net="lo", nid="0@lo") == 1
    assert one(d, "lustre_lnet_ni_up", net="tcp", nid="172.16.0.25@tcp") == 1
    assert one(d, "lustre_lnet_ni_health_value", net="tcp", nid="172.16.0.24@tcp") == 1000
    assert one(d, "lustre_lnet_ni_send_count_total", net="tcp", nid="172.16.0.24@tcp") == 464970
    assert one(d, "lustre_lnet_ni_drop_count_total", net="tcp", nid="172.16.0.25@tcp") == 3
    assert one(d, "lustre_lnet_send_count_total") == 1110532
    assert one(d, "lustre_lnet_drop_count_total") == 11


def test_lnet_ni_down_is_zero() -> None:
    """No published `lnetctl net show -v` has an NI down: the real output with one NI's status changed."""
    real = (FIX / "lnetctl" / "net_show_v.yaml").read_text()
    ni = "- nid: 172.16.0.25@tcp\n          status: "
    down = real.replace(ni + "up", ni + "down")
    assert down != real
    d = samples("oss", lambda args: down if args == ["net", "show", "-v"] else None)
    assert one(d, "lustre_lnet_ni_up", net="tcp", nid="172.16.0.25@tcp") == 0
    assert one(d, "lustre_lnet_ni_up", net="tcp", nid="172.16.0.24@tcp") == 1


def test_without_lnetctl_the_rest_is_still_exported() -> None:
    d = samples("oss", no_lnetctl)
    assert not [k for k in d if k[0] == "lustre_lnet_ni_up"]
    assert one(d, "lustre_health_healthy") == 1


def test_not_applicable_without_lustre(capsys: pytest.CaptureFixture[str]) -> None:
    d = samples("none")
    (key,) = [k for k in d if k[0] == "lustre_exporter_applicable"]
    assert d[key] == 0 and "no Lustre modules loaded" in dict(key[1])["reason"]
    assert [k[0] for k in d] == ["lustre_exporter_applicable"]
    assert main(["--root", str(FIX / "none"), "--once"]) == 0
    captured = capsys.readouterr()
    assert "NOT APPLICABLE on this host" in captured.err and "lustre_exporter_applicable" in captured.out


# Fixtures written from the printing code rather than copied from real output (none today); list any new one here.
FORMAT_EXAMPLES: set[str] = set()


def test_every_fixture_names_its_source() -> None:
    """Real output says so first and names where it was copied from; the format examples say they are."""
    files = [p for p in FIX.rglob("*") if p.is_file() and not p.name.endswith(".source")]
    assert files
    for p in files:
        rel = p.relative_to(FIX).as_posix()
        src = p.with_name(p.name + ".source")
        assert src.is_file(), rel
        text = src.read_text()
        if p.name == ".keep":
            continue
        assert "v2_15_8" in text, f"{rel}: its .source names no lustre-release function"
        if rel in FORMAT_EXAMPLES:
            assert text.startswith("FORMAT EXAMPLE"), rel
        else:
            assert text.startswith("REAL OUTPUT") and "github.com/" in text and "commit " in text, rel
