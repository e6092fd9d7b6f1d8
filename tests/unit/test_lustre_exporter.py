"""kiln's Lustre exporter against fixture trees in the formats of lustre-release v2_15_8
(tests/fixtures/lustre; each file's .source names the function that prints it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kiln.exporters.lustre import LustreCollector, main, parse_job_stats, parse_stats, registry

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "lustre"


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
    c = parse_stats((FIX / "oss/proc/fs/lustre/obdfilter/lab-OST0000/stats").read_text())
    assert c["read_bytes"].samples == 1200 and c["read_bytes"].sum == 4831838208 and c["read_bytes"].unit == "bytes"
    assert "snapshot_time" not in c and c["statfs"].samples == 5012


def test_parse_job_stats_unescapes_quoted_job_ids() -> None:
    jobs = parse_job_stats((FIX / "oss/proc/fs/lustre/obdfilter/lab-OST0000/job_stats").read_text())
    assert set(jobs) == {"train.1234", "rsync stage"}
    assert jobs["train.1234"]["write_bytes"]["sum"] == 3221225472


def test_oss_targets_space_inodes_and_recovery() -> None:
    d = samples("oss")
    assert one(d, "lustre_exporter_applicable", reason="") == 1
    assert one(d, "lustre_health_healthy") == 1
    lab = {"kind": "ost", "fsname": "lab"}
    assert one(d, "lustre_target_info", target="lab-OST0001", osd="ldiskfs", **lab) == 1
    assert one(d, "lustre_target_capacity_bytes", target="lab-OST0000", **lab) == 976562500 * 1024
    used = 1 - one(d, "lustre_target_free_bytes", target="lab-OST0001", **lab) / one(
        d, "lustre_target_capacity_bytes", target="lab-OST0001", **lab)
    assert used == pytest.approx(0.95)
    assert one(d, "lustre_target_files_free", target="lab-OST0000", **lab) == 61050000
    assert one(d, "lustre_target_recovery_status", target="lab-OST0000", status="COMPLETE") == 1
    assert one(d, "lustre_target_recovery_status", target="lab-OST0001", status="RECOVERING") == 1


def test_oss_bulk_rpcs_and_jobstats() -> None:
    d = samples("oss")
    assert one(d, "lustre_target_read_bytes_total", target="lab-OST0000", kind="ost") == 4831838208
    assert one(d, "lustre_target_write_bytes_total", target="lab-OST0001", kind="ost") == 10485760
    assert one(d, "lustre_target_ops_total", target="lab-OST0000", kind="ost", op="punch") == 3
    assert one(d, "lustre_job_read_bytes_total", target="lab-OST0000", job_id="train.1234") == 4194304000
    assert one(d, "lustre_job_read_bytes_total", target="lab-OST0000", job_id="rsync stage") == 637534208
    assert one(d, "lustre_job_ops_total", target="lab-OST0000", job_id="train.1234", op="setattr") == 2


def test_mds_unhealthy_and_metadata_ops() -> None:
    d = samples("mds")
    assert one(d, "lustre_health_healthy") == 0
    assert one(d, "lustre_target_info", target="lab-MDT0000", kind="mdt", fsname="lab", osd="ldiskfs") == 1
    assert one(d, "lustre_target_ops_total", target="lab-MDT0000", kind="mdt", op="mknod") == 12000
    assert one(d, "lustre_job_ops_total", target="lab-MDT0000", job_id="train.1234", op="open") == 52000
    inodes_used = 1 - one(d, "lustre_target_files_free", target="lab-MDT0000", kind="mdt", fsname="lab") / one(
        d, "lustre_target_files", target="lab-MDT0000", kind="mdt", fsname="lab")
    assert inodes_used == pytest.approx(0.9)


def test_client_mount_bytes() -> None:
    d = samples("client")
    assert one(d, "lustre_client_read_bytes_total", fsname="lab", instance_id="ffff8a1b2c3d4000") == 20971520000
    assert not [k for k in d if k[0] == "lustre_target_info"]


def test_lnet_nis_and_stats() -> None:
    d = samples("oss")
    assert one(d, "lustre_lnet_ni_up", net="tcp", nid="10.89.20.5@tcp") == 1
    assert one(d, "lustre_lnet_ni_up", net="tcp", nid="10.89.21.5@tcp") == 0
    assert one(d, "lustre_lnet_ni_health_value", net="tcp", nid="10.89.20.5@tcp") == 1000
    assert one(d, "lustre_lnet_ni_drop_count_total", net="tcp", nid="10.89.21.5@tcp") == 40
    assert one(d, "lustre_lnet_send_count_total") == 123466
    assert one(d, "lustre_lnet_drop_count_total") == 43


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


def test_every_fixture_names_its_source() -> None:
    files = [p for p in FIX.rglob("*") if p.is_file() and not p.name.endswith(".source")]
    assert files
    for p in files:
        src = p.with_name(p.name + ".source")
        assert src.is_file(), p
        assert "v2_15_8" in src.read_text() or p.name == ".keep"
