"""The mover against a real SeaweedFS S3 on loopback: incremental, atomic, verified, resumable."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kiln.dataflow import engine
from kiln.dataflow.checkpoints import Root, export_checkpoints
from kiln.dataflow.keys import PARTIAL_SUFFIX, STAGING
from kiln.dataflow.lake import Credentials, client, list_prefix
from kiln.dataflow.manifest import Manifest
from kiln.dataflow.mover import LinkJob, Mover, selected
from tests.dataflow.conftest import ensure_bucket


def _put_tree(creds: Credentials, bucket: str, prefix: str, files: dict[str, bytes]) -> None:
    s3 = client(creds)
    for key, data in files.items():
        s3.put_object(Bucket=bucket, Key=prefix + key, Body=data)


def _dataset(n: int, size: int, seed: int = 0) -> dict[str, bytes]:
    return {
        f"shard{i // 10}/f{i:04d}.bin": hashlib.sha256(f"{seed}-{i}".encode()).digest() * (size // 32) for i in range(n)
    }


def test_globs_select_like_rclone_filters() -> None:
    assert selected("a/b/c.tar", ["**/*.tar"], [])
    assert selected("c.tar", ["**/*.tar"], [])
    assert not selected("a/c.txt", ["**/*.tar"], [])
    assert selected("deep/x.json", ["*.json"], [])  # no '/' in the pattern: the base name anywhere
    assert not selected("a/tmp/x.bin", [], ["**/tmp/**"])
    assert selected("a/x.{bin", ["a/x.[{]bin"], [])
    assert selected("img/a.png", ["img/*.{png,jpg}"], []) and not selected("img/a.gif", ["img/*.{png,jpg}"], [])


def test_listing_reads_every_page_and_key_as_botocore_does(seaweedfs: Credentials) -> None:
    """kiln's ListObjectsV2 reader (ElementTree) against botocore's on the same prefix: past one page of 1000 keys,
    keys that url-encoding changes (space, '+', '%', non-ASCII), a directory marker left out, ETags unquoted."""
    s3 = client(seaweedfs)
    keys = [f"p{i:04d}.bin" for i in range(1003)] + ["a b+c%25d ü.bin", "sub/x+y.bin", "dir/"]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: s3.put_object(Bucket="lake", Key="listing/" + k, Body=k.encode()), keys[:-1]))
    s3.put_object(Bucket="lake", Key="listing/dir/", Body=b"")  # a directory marker: an empty object ending in '/'
    mine = {o.key: (o.size, o.etag) for o in list_prefix(s3, "lake", "listing/")}
    theirs = {
        o["Key"][len("listing/") :]: (int(o["Size"]), o["ETag"].strip('"'))
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="lake", Prefix="listing/")
        for o in page.get("Contents", [])
        if not o["Key"].endswith("/")
    }
    assert len(mine) == len(keys) - 1 and mine == theirs
    odd = "a b+c%25d ü.bin"
    assert mine[odd] == (len(odd.encode()), hashlib.md5(odd.encode()).hexdigest())
    assert list(list_prefix(s3, "lake", "no-such-prefix/")) == []


def test_stage_is_incremental_and_verified(seaweedfs: Credentials, tmp_path: Path) -> None:
    files = _dataset(40, 64 << 10)
    files["skip/me.tmp"] = b"x" * 100
    _put_tree(seaweedfs, "lake", "ds1/", files)
    mover = Mover(seaweedfs, tmp_path / "state", engine.Tuning(concurrency=8), textfile_dir=tmp_path / "prom")
    job = LinkJob("ds1", "lake", "ds1/", tmp_path / "fast" / "ds1", exclude=("*.tmp",))
    first = mover.stage(job)
    want = {k: v for k, v in files.items() if not k.endswith(".tmp")}
    assert first.failed == () and first.files_verified == len(want) == first.files_moved
    assert first.bytes_moved == sum(len(v) for v in want.values())
    for key, data in want.items():
        assert (job.local / key).read_bytes() == data
    assert not (job.local / "skip/me.tmp").exists()
    # Nothing changed: nothing moves.
    again = mover.stage(job)
    assert (again.bytes_moved, again.files_moved) == (0, 0) and again.files_selected == len(want)
    # One object changes, one local file is deleted: exactly those two move.
    changed = b"new contents" * 1000
    _put_tree(seaweedfs, "lake", "ds1/", {"shard0/f0001.bin": changed})
    (job.local / "shard1/f0010.bin").unlink()
    third = mover.stage(job)
    assert third.files_moved == 2 and third.bytes_moved == len(changed) + len(want["shard1/f0010.bin"])
    assert (job.local / "shard0/f0001.bin").read_bytes() == changed
    status = json.loads((tmp_path / "state" / "ds1.import.status.json").read_text())
    assert status["state"] == "done" and status["backlog_files"] == 0 and status["files_done"] == 2
    prom = (tmp_path / "prom" / "kiln_dataflow_ds1_import.prom").read_text()
    assert 'kiln_dataflow_backlog_bytes{direction="import",link="ds1"} 0.0' in prom


def test_a_corrupted_download_is_not_recorded(
    seaweedfs: Credentials, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _put_tree(seaweedfs, "lake", "ds2/", {"a.bin": b"a" * 5000, "b.bin": b"b" * 5000})
    mover = Mover(seaweedfs, tmp_path / "state")
    job = LinkJob("ds2", "lake", "ds2/", tmp_path / "fast")
    real_run = engine.run

    def corrupting_run(*args, **kwargs):  # type: ignore[no-untyped-def]
        res = real_run(*args, **kwargs)
        # rclone checked and logged both; the staged b.bin is then changed behind its back, and rclone's log is
        # made to not vouch for it (as for a file it skipped as already staged), so kiln must hash it itself.
        assert res.copied == {"a.bin", "b.bin"}
        (job.local / STAGING / "b.bin").write_bytes(b"B" * 5000)  # same size, other bytes
        return dataclasses.replace(res, copied=res.copied - {"b.bin"})

    monkeypatch.setattr(engine, "run", corrupting_run)
    res = mover.stage(job)
    assert res.failed == ("b.bin",) and not (job.local / "b.bin").exists()  # never visible under its name
    with Manifest(tmp_path / "state", "ds2.link") as manifest:
        assert set(manifest.keys()) == {"a.bin"}
    monkeypatch.setattr(engine, "run", real_run)
    fixed = mover.stage(job)  # not in the manifest: moved again and now verified
    assert fixed.failed == () and (job.local / "b.bin").read_bytes() == b"b" * 5000


STAGE_SCRIPT = """
import sys
from pathlib import Path
from kiln.dataflow import engine
from kiln.dataflow.lake import Credentials
from kiln.dataflow.mover import LinkJob, Mover
endpoint, key, secret, state, local = sys.argv[1:6]
m = Mover(Credentials(endpoint, key, secret), Path(state), engine.Tuning(concurrency=2, part_size_MiB=8))
r = m.stage(LinkJob("big", "lake", "big/", Path(local)))
print(r.bytes_moved, r.files_moved, len(r.failed))
"""


def test_kill_mid_transfer_then_resume(seaweedfs: Credentials, tmp_path: Path) -> None:
    big = {f"f{i}.bin": os.urandom(24 << 20) for i in range(6)}
    _put_tree(seaweedfs, "lake", "big/", big)
    state, local = tmp_path / "state", tmp_path / "fast"
    argv = [
        sys.executable,
        "-c",
        STAGE_SCRIPT,
        seaweedfs.endpoint,
        seaweedfs.access_key_id,
        seaweedfs.secret_key,
        str(state),
        str(local),
    ]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill once the first bytes land
        if local.exists() and any(p.stat().st_size > 0 for p in local.rglob("*") if p.is_file()):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # Whatever is visible under a final name is whole and correct; the rest is in the staging directory, where
    # rclone renamed only whole files (verified by the next pass) and left the others under *.kiln-partial.
    visible = {p.name: p for p in local.iterdir() if p.is_file()}
    for name, path in visible.items():
        assert path.read_bytes() == big[name], f"{name} visible but not whole"
    staged = {p.name for p in (local / STAGING).iterdir() if not p.name.endswith(PARTIAL_SUFFIX)} \
        if (local / STAGING).exists() else set()
    for name in staged:
        assert (local / STAGING / name).read_bytes() == big[name]
    assert len(visible) + len(staged) < len(big), "the pass finished before the kill; the test proves nothing"
    # Resume: everything arrives, verified; the files finished before the kill are not sent again.
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout.split()
    moved, files, failed = int(out[0]), int(out[1]), int(out[2])
    assert failed == 0 and files == len(big) - len(visible) - len(staged)
    assert moved == sum(len(big[n]) for n in big if n not in visible and n not in staged)
    assert not (local / STAGING).exists()
    for name, data in big.items():
        assert (local / name).read_bytes() == data


def test_export_and_checkpoint_write_back(seaweedfs: Credentials, tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    mover = Mover(seaweedfs, tmp_path / "state", engine.Tuning(concurrency=4, part_size_MiB=8))
    s3 = client(seaweedfs)
    for step in (100, 200, 300):
        d = root / f"step{step}"
        d.mkdir(parents=True)
        for r in range(2):
            (d / f"__{r}_0.distcp").write_bytes(os.urandom(12 << 20))  # > part size: a multipart upload
        (d / ".metadata").write_bytes(b"meta")
        os.utime(d / ".metadata", ns=(step * 10**9, step * 10**9))
    (root / "step400").mkdir()
    (root / "step400" / "__0_0.distcp").write_bytes(b"partial")  # no marker: never uploaded or released
    ck = Root(name="ck", root=root, bucket="lake", prefix="ck/", marker=".metadata")
    res = export_checkpoints(mover, ck, keep=2, release=True)
    assert res.exported == ("step100", "step200", "step300") and res.pending == ("step400",)
    assert res.released == ("step100",)
    assert sorted(p.name for p in root.iterdir()) == ["step200", "step300", "step400"]
    keys = {o.key: o for o in list_prefix(s3, "lake", "ck/")}
    assert "step100/.metadata" in keys and "step400/__0_0.distcp" not in keys
    # Multipart objects carry an ETag with '-'; the mover verified them through rclone's stored MD5.
    assert "-" in keys["step300/__0_0.distcp"].etag
    body = s3.get_object(Bucket="lake", Key="ck/step300/__1_0.distcp")["Body"].read()
    assert body == (root / "step300" / "__1_0.distcp").read_bytes()
    again = export_checkpoints(mover, ck, keep=2, release=True)
    assert again.exported == () and again.bytes_moved == 0 and again.released == ()


def test_cli_stage_status_for_a_prolog(
    seaweedfs: Credentials, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kiln.cli import main

    ensure_bucket(seaweedfs, "datasets")
    _put_tree(seaweedfs, "datasets", "corpus/", _dataset(12, 32 << 10, seed=3))
    monkeypatch.setenv("KILN_S3_SECRET_KEY", seaweedfs.secret_key)
    argv = [
        "data",
        "stage",
        "lab",
        "corpus",
        "--endpoint",
        seaweedfs.endpoint,
        "--mount-point",
        str(tmp_path / "lustre"),
        "--state-dir",
        str(tmp_path / "state"),
        "--textfile-dir",
        str(tmp_path / "prom"),
    ]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["files_verified"] == 12 and first["bytes_moved"] == 12 * (32 << 10)
    assert (tmp_path / "lustre/datasets/corpus/shard1/f0011.bin").is_file()  # the plan's mount path, re-rooted
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["bytes_moved"] == 0
    assert main(["data", "status", "--state-dir", str(tmp_path / "state"), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["link"], row["direction"], row["state"], row["backlog_bytes"]) == ("corpus", "import", "done", 0)
    monkeypatch.delenv("KILN_S3_SECRET_KEY")
    assert main(argv) == 1
    assert "KILN_S3_SECRET_KEY is not set" in capsys.readouterr().err


def test_cli_run_once_writes_committed_checkpoints_back(
    seaweedfs: Credentials, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kiln.cli import main

    s3 = client(seaweedfs)
    ensure_bucket(seaweedfs, "checkpoints")
    root = tmp_path / "lustre/checkpoints/run"  # the lab stack's dataflow.checkpoints.path, re-rooted
    (root / "step10").mkdir(parents=True)
    (root / "step10" / "__0_0.distcp").write_bytes(b"w" * 4096)
    (root / "step10" / ".metadata").write_bytes(b"m")
    (root / "step20").mkdir()
    (root / "step20" / "__0_0.distcp").write_bytes(b"half")  # no marker yet
    monkeypatch.setenv("KILN_S3_SECRET_KEY", seaweedfs.secret_key)
    argv = [
        "data",
        "run",
        "lab",
        "--once",
        "--endpoint",
        seaweedfs.endpoint,
        "--mount-point",
        str(tmp_path / "lustre"),
        "--state-dir",
        str(tmp_path / "state"),
    ]
    assert main(argv) == 0
    keys = {o.key for o in list_prefix(s3, "checkpoints", "run/")}
    assert keys == {"step10/__0_0.distcp", "step10/.metadata", "step10/.kiln-checkpoint.json"}
    status = json.loads((tmp_path / "state" / "checkpoints.checkpoint.status.json").read_text())
    assert status["state"] == "done" and status["backlog_bytes"] == 0


def test_many_files_list_the_prefix_few_are_addressed_one_by_one() -> None:
    # One LIST page per 1000 keys against one request per file (--no-traverse).
    assert engine.traverse(200, 200)
    assert engine.traverse(4, 2500)
    assert not engine.traverse(3, 2500)
    assert not engine.traverse(1, 5000)  # one model key out of a large prefix: one HEAD
    assert not engine.traverse(500, 0)  # the lake side's size unknown: address each file


def test_one_measurement_pass_gives_every_dataflow_figure(seaweedfs: Credentials, tmp_path: Path) -> None:
    from kiln.dataflow.measure import measure

    f = measure(seaweedfs, "measure", tmp_path / "w", engine.Tuning(4, 8), files=20, file_KiB=64, shards=2,
                shard_MiB=8)
    assert f["stage_failed"] == 0 and f["stage_bytes"] == 20 * 64 << 10
    assert f["resync_bytes"] == 0 and 0 < f["resync_s"] < f["stage_s"]
    assert f["stage_files"] == 20 and f["fast_write_s"] > 0 and f["s3_get_s"] > 0
    assert f["stage_in_efficiency"] == pytest.approx(max(f["fast_write_s"], f["s3_get_s"]) / f["stage_s"])
    assert f["checkpoint_exported"] == 1 and f["checkpoint_blocked_ratio"] > 1
    assert f["checkpoint_restore_ratio"] > 0
    assert f["resume_lost_or_partial"] == 0 and f["resume_restart_rc"] == 0
    assert f["repair_failures"] == 0 and f["repair_caught"] == 1 and f["repair_restored"] == 1
    assert not (tmp_path / "w").exists()  # the work directory is removed
    assert list(list_prefix(client(seaweedfs), "measure", "kiln-measure/")) == []  # and the lake prefix emptied
