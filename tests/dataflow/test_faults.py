"""The mover under faults, against the session's real SeaweedFS and real rclone: corrupted downloads, two movers on
one link, conflicts on a two-way link, a lake outage under the service loop, one bad key among many, hostile
keys, deletions, renames and POSIX metadata, a large download killed and resumed, a file changed while exported.

Faults come from a loopback proxy (TEST DOUBLE, tests/dataflow/faulty_s3.py) or from real I/O on the fast tier.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig  # type: ignore[import-untyped]

from kiln.dataflow import engine, progress, service
from kiln.dataflow.keys import STAGING
from kiln.dataflow.lake import Credentials, client, list_prefix
from kiln.dataflow.lock import LockBusy
from kiln.dataflow.manifest import Manifest
from kiln.dataflow.mover import LinkJob, Mover
from kiln.plan import build_plan
from kiln.spec import validate
from tests.conftest import stack_data
from tests.dataflow.conftest import ensure_bucket
from tests.dataflow.faulty_s3 import FaultyS3, Rule

ROOT = Path(__file__).resolve().parents[2]


def _put(creds: Credentials, prefix: str, files: dict[str, bytes], bucket: str = "lake") -> None:
    s3 = client(creds)
    for key, data in files.items():
        s3.put_object(Bucket=bucket, Key=prefix + key, Body=data)


def _multipart(creds: Credentials, key: str, data: bytes) -> None:
    """An object written in 8 MiB parts by boto3 (no whole-object MD5 for rclone to check)."""
    cfg = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20)
    client(creds).upload_fileobj(io.BytesIO(data), "lake", key, Config=cfg)


def test_a_corrupted_large_download_is_never_visible_and_the_next_pass_repairs_it(
    faulty: tuple[FaultyS3, Credentials], tmp_path: Path
) -> None:
    proxy, creds = faulty
    data = os.urandom(20 << 20)
    _multipart(creds, "rep/big.bin", data)
    assert "-" in next(iter(list_prefix(client(creds), "lake", "rep/"))).etag  # rclone has no MD5 to check
    proxy.add(Rule("GET", r"^/lake/rep/big\.bin", "corrupt"))  # the bytes of the first download flip in transit
    mover = Mover(creds, tmp_path / "state", engine.Tuning(concurrency=2, part_size_MiB=8))
    job = LinkJob("rep", "lake", "rep/", tmp_path / "fast")
    first = mover.stage(job)
    assert first.failed == ("big.bin",) and "not verified" in dict(first.reasons)["big.bin"]
    assert not (job.local / "big.bin").exists() and not (job.local / STAGING).exists()  # deleted, never visible
    second = mover.stage(job)  # fetched again, verified, in place
    assert second.ok and second.files_verified == 1 and (job.local / "big.bin").read_bytes() == data
    assert mover.stage(job).bytes_moved == 0


def test_two_movers_on_one_link_take_turns_and_the_second_finds_it_done(
    seaweedfs: Credentials, tmp_path: Path
) -> None:
    _put(seaweedfs, "two/", {f"f{i:03d}.bin": os.urandom(64 << 10) for i in range(60)})
    job = LinkJob("two", "lake", "two/", tmp_path / "fast")
    results: list[Any] = []

    def one() -> None:
        results.append(Mover(seaweedfs, tmp_path / "state", engine.Tuning(concurrency=4)).stage(job))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.ok for r in results)
    assert sorted(r.files_moved for r in results) == [0, 60]  # the lake was read once
    with Manifest(tmp_path / "state", "two.link") as m:
        assert len(m) == 60
    # A mover that may not wait is told who holds the link, and touches nothing.
    holder = Mover(seaweedfs, tmp_path / "state")
    impatient = Mover(seaweedfs, tmp_path / "state", lock_wait_s=0)
    with holder.session("two.link"), pytest.raises(LockBusy, match=r"two\.link is being moved by .* pid "):
        impatient.stage(job)


def test_a_two_way_link_keeps_local_edits_and_settles_conflicts_by_its_policy(
    seaweedfs: Credentials, tmp_path: Path
) -> None:
    s3 = client(seaweedfs)
    _put(seaweedfs, "tw/", {"a.txt": b"lake v1", "b.txt": b"lake b"})
    mover = Mover(seaweedfs, tmp_path / "state")

    def job(policy: str) -> LinkJob:
        return LinkJob("tw", "lake", "tw/", tmp_path / "fast", conflict=policy, two_way=True)

    assert mover.stage(job("fail")).ok
    a = tmp_path / "fast" / "a.txt"
    a.write_bytes(b"local edit")  # the user edits; the lake did not change
    again = mover.stage(job("fail"))  # the import runs first in the service: it must not revert the edit
    assert again.ok and a.read_bytes() == b"local edit"
    exported = mover.export(job("fail"))
    assert exported.ok and exported.files_moved == 1
    assert s3.get_object(Bucket="lake", Key="tw/a.txt")["Body"].read() == b"local edit"
    # Both sides change: a conflict, settled by the policy.
    a.write_bytes(b"local v3")
    s3.put_object(Bucket="lake", Key="tw/a.txt", Body=b"lake v3")
    fail = mover.stage(job("fail"))
    assert fail.failed == ("a.txt",) and "conflict" in dict(fail.reasons)["a.txt"] and a.read_bytes() == b"local v3"
    assert not mover.export(job("fail")).ok  # the export refuses too
    assert s3.get_object(Bucket="lake", Key="tw/a.txt")["Body"].read() == b"lake v3"
    skip = mover.stage(job("skip"))
    assert skip.ok and [k for k, _ in skip.conflicts] == ["a.txt"] and a.read_bytes() == b"local v3"
    # overwrite-if-dirty: the local file is the newer one (written after the object): kept.
    os.utime(a, ns=(time.time_ns() + 10**12, time.time_ns() + 10**12))
    newer = mover.stage(job("overwrite-if-dirty"))
    assert newer.failed == ("a.txt",) and "newer" in dict(newer.reasons)["a.txt"] and a.read_bytes() == b"local v3"
    over = mover.stage(job("overwrite"))
    assert over.ok and over.overwritten == ("a.txt",) and a.read_bytes() == b"lake v3"  # replaced, and reported


def _continuous_plan(tmp_path: Path) -> Any:
    data = stack_data("lab")
    data["dataflow"]["links"][0].update(import_trigger="continuous", prefix="outage/")
    return build_plan(validate(data, "test"), "test")


def test_a_lake_outage_fails_passes_visibly_and_the_service_loop_goes_on(
    faulty: tuple[FaultyS3, Credentials], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kiln.cli.common import setup_logging

    proxy, creds = faulty
    ensure_bucket(creds, "datasets")
    _put(creds, "outage/", {"x.bin": b"x" * 1000}, bucket="datasets")
    plan = _continuous_plan(tmp_path)
    monkeypatch.setenv("KILN_S3_SECRET_KEY", creds.secret_key)
    site = service.Site(state_dir=tmp_path / "state", mount_point=tmp_path / "lustre", endpoint=creds.endpoint,
                        textfile_dir=tmp_path / "prom")
    setup_logging(debug=False)
    proxy.down()  # the gateway is gone: connections are refused
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        status = json.loads((tmp_path / "state" / "corpus.import.status.json").read_text())
        if len(waits) == 1:  # after the failed cycle: a terminal state, up 0, the error's class, no signature
            assert status["state"] == "failed" and status["error_class"] == "EndpointConnectionError"
            assert "X-Amz-Signature" not in json.dumps(status)
            prom = (tmp_path / "prom" / "kiln_dataflow_corpus_import.prom").read_text()
            assert 'kiln_dataflow_up{direction="import",link="corpus"} 0.0' in prom
            proxy.up()  # the gateway is back
        else:
            assert status["state"] == "done"
            raise StopIteration

    with pytest.raises(StopIteration):
        service.run(plan, site, once=False, sleep=sleep)
    assert waits[0] == 2 * plan.dataflow.poll_s and waits[1] == plan.dataflow.poll_s  # backed off, then not
    assert (tmp_path / "lustre/datasets/corpus/x.bin").read_bytes() == b"x" * 1000
    err = capsys.readouterr().err
    assert "EndpointConnectionError" in err
    assert "X-Amz-Signature" not in err and "X-Amz-Credential" not in err and creds.secret_key not in err
    for p in (tmp_path / "state").glob("*.status.json"):
        assert "X-Amz-Signature" not in p.read_text() and creds.secret_key not in p.read_text()


def test_one_bad_key_fails_alone_and_the_verified_rest_is_kept(
    faulty: tuple[FaultyS3, Credentials], tmp_path: Path
) -> None:
    proxy, creds = faulty
    files = {f"k{i:02d}.bin": os.urandom(32 << 10) for i in range(20)}
    _put(creds, "bad/", files)
    proxy.add(Rule("GET", r"^/lake/bad/k07\.bin", "403", times=-1))  # this key's GETs are denied, every retry
    mover = Mover(creds, tmp_path / "state", engine.Tuning(concurrency=4))
    job = LinkJob("bad", "lake", "bad/", tmp_path / "fast")
    first = mover.stage(job)
    assert first.failed == ("k07.bin",) and first.files_verified == 19
    assert "not copied" in dict(first.reasons)["k07.bin"] and not (job.local / "k07.bin").exists()
    proxy.clear()
    second = mover.stage(job)  # the 19 are not moved or hashed again: only the failed key moves
    assert second.ok and second.files_moved == 1 and second.bytes_moved == len(files["k07.bin"])
    for k, v in files.items():
        assert (job.local / k).read_bytes() == v


def test_hostile_keys_are_refused_by_kiln_with_the_key_escaped(
    faulty: tuple[FaultyS3, Credentials], tmp_path: Path
) -> None:
    proxy, creds = faulty
    # Real keys SeaweedFS stores: a tab, the partial suffix. And keys S3 allows that SeaweedFS normalizes away,
    # added to its listing by the proxy: '..', a leading '/', a newline.
    _put(creds, "hostile/", {"ok.bin": b"fine", "tab\t.bin": b"t", "x.kiln-partial": b"p"})
    etag = hashlib.md5(b"evil", usedforsecurity=False).hexdigest()
    hostile = (("hostile/../escape.bin", 4, etag), ("hostile//abs.bin", 4, etag), ("hostile/new\nline.bin", 4, etag))
    proxy.add(Rule("GET", r"^/lake\?.*list-type=2", "list", times=-1, keys=hostile))
    local = tmp_path / "fast" / "hostile"
    local.mkdir(parents=True)
    mine = local / "mine.kiln-partial"
    mine.write_bytes(b"a user's file, not the mover's")
    res = Mover(creds, tmp_path / "state").stage(LinkJob("hostile", "lake", "hostile/", local))
    doc = service.outcome(res)  # what `kiln data stage` prints
    refused = {f["key"]: f["reason"] for f in doc["failed"]}
    assert set(refused) == {"tab\\t.bin", "x.kiln-partial", "../escape.bin", "/abs.bin", "new\\nline.bin"}
    assert all(r.startswith("refused: ") for r in refused.values())
    assert res.files_verified == 1 and (local / "ok.bin").read_bytes() == b"fine"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and "state" not in p.parts) == \
        ["mine.kiln-partial", "ok.bin"]  # nothing written outside the link's directory, nothing else inside
    assert mine.exists()  # the mover deletes partial files only in its own staging directory


def test_deletions_and_renames_propagate_under_the_deletion_guard(seaweedfs: Credentials, tmp_path: Path) -> None:
    s3 = client(seaweedfs)
    files = {f"f{i}.bin": os.urandom(4096) for i in range(10)}
    _put(seaweedfs, "del/", files)
    mover = Mover(seaweedfs, tmp_path / "state")
    job = LinkJob("del", "lake", "del/", tmp_path / "fast", deletions="propagate", max_delete_fraction=0.2)
    assert mover.stage(job).ok
    # Import: one object deleted, one renamed (copied under a new key, old one deleted).
    s3.delete_object(Bucket="lake", Key="del/f0.bin")
    s3.copy_object(Bucket="lake", Key="del/g1.bin", CopySource={"Bucket": "lake", "Key": "del/f1.bin"})
    s3.delete_object(Bucket="lake", Key="del/f1.bin")
    r = mover.stage(job)
    assert r.ok and r.deleted == ("f0.bin",) and r.renamed == (("f1.bin", "g1.bin"),) and r.bytes_moved == 0
    assert not (job.local / "f0.bin").exists() and (job.local / "g1.bin").read_bytes() == files["f1.bin"]
    # The guard: five of the nine vanish at once (more than 0.2): nothing is deleted and the pass fails.
    s3.delete_objects(Bucket="lake", Delete={"Objects": [{"Key": f"del/f{i}.bin"} for i in range(2, 7)]})
    guarded = mover.stage(job)
    assert not guarded.ok and "refusing to delete 5 of 9 files" in guarded.errors[0]
    assert all((job.local / f"f{i}.bin").exists() for i in range(2, 7))
    # Export: a local deletion and a local rename reach the lake; the rename uploads no byte.
    out = LinkJob("delx", "lake", "delx/", tmp_path / "fast", deletions="propagate", max_delete_fraction=0.5)
    assert mover.export(out).ok
    (job.local / "f7.bin").unlink()
    (job.local / "f8.bin").rename(job.local / "h8.bin")
    r = mover.export(out)
    keys = {o.key for o in list_prefix(s3, "lake", "delx/")}
    assert r.ok and r.deleted == ("f7.bin",) and r.renamed == (("f8.bin", "h8.bin"),) and r.bytes_moved == 0
    assert "f7.bin" not in keys and "f8.bin" not in keys and "h8.bin" in keys
    assert s3.get_object(Bucket="lake", Key="delx/h8.bin")["Body"].read() == files["f8.bin"]


def test_posix_metadata_symlinks_and_empty_directories_round_trip(seaweedfs: Credentials, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sub").mkdir(parents=True)
    (src / "empty" / "deeper").mkdir(parents=True)
    f = src / "sub" / "data.bin"
    f.write_bytes(b"payload")
    root = os.geteuid() == 0
    if root:
        os.chown(f, 1234, 99)
    os.chmod(f, 0o640)
    os.utime(f, ns=(1_600_000_000_000_000_000, 1_600_000_000_123_456_789))
    os.symlink("sub/data.bin", src / "link")
    mover = Mover(seaweedfs, tmp_path / "state")
    assert mover.export(LinkJob("px", "lake", "px/", src, posix_metadata=True)).ok
    s3 = client(seaweedfs)
    keys = {o.key for o in list_prefix(s3, "lake", "px/", dirs=True)}
    assert keys == {"sub/data.bin", "link.rclonelink", "empty/deeper/"}
    meta = s3.head_object(Bucket="lake", Key="px/sub/data.bin")["Metadata"]
    assert meta["mode"] == "100640" and (not root or (meta["uid"], meta["gid"]) == ("1234", "99"))
    # A set-id mode in the lake never becomes a set-id file.
    s3.put_object(Bucket="lake", Key="px/suid.bin", Body=b"#!/bin/sh\n", Metadata={"file-permissions": "0104755",
                                                                                   "file-owner": "0"})
    r = mover.stage(LinkJob("pxi", "lake", "px/", dst, posix_metadata=True))
    assert r.ok, r.reasons
    g = (dst / "sub" / "data.bin").stat()
    assert (stat.S_IMODE(g.st_mode), g.st_mtime_ns) == (0o640, 1_600_000_000_123_456_789)
    assert not root or (g.st_uid, g.st_gid) == (1234, 99)
    assert os.readlink(dst / "link") == "sub/data.bin" and (dst / "link").read_bytes() == b"payload"
    assert (dst / "empty" / "deeper").is_dir()
    assert stat.S_IMODE((dst / "suid.bin").stat().st_mode) == 0o755


RESUME = """
import sys
from pathlib import Path
from kiln.dataflow import engine
from kiln.dataflow.lake import Credentials
from kiln.dataflow.mover import LinkJob, Mover
endpoint, key, secret, state, local = sys.argv[1:6]
tuning = engine.Tuning(concurrency=1, part_size_MiB=1, ranged_min_MiB=8)
r = Mover(Credentials(endpoint, key, secret), Path(state), tuning).stage(LinkJob("rg", "lake", "rg/", Path(local)))
print(r.bytes_moved, len(r.failed))
"""


def test_a_large_download_killed_midway_resumes_with_ranged_gets(seaweedfs: Credentials, tmp_path: Path) -> None:
    data = os.urandom(24 << 20)
    _multipart(seaweedfs, "rg/big.bin", data)
    state, local = tmp_path / "state", tmp_path / "fast"
    argv = [sys.executable, "-c", RESUME, seaweedfs.endpoint, seaweedfs.access_key_id, seaweedfs.secret_key,
            str(state), str(local)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.PIPE, text=True)
    journal = local / STAGING / "big.bin.kiln-partial.parts"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:  # kill once a few parts are written
        if journal.exists() and len(journal.read_text().splitlines()) > 4:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert journal.exists(), "the download finished before the kill; the test proves nothing"
    parts_done = len(journal.read_text().splitlines()) - 1
    assert 0 < parts_done < 24, "the download was not interrupted midway; the test proves nothing"
    assert not (local / "big.bin").exists()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout.split()
    moved, failed = int(out[0]), int(out[1])
    assert failed == 0 and (local / "big.bin").read_bytes() == data
    assert moved == len(data) - parts_done * (1 << 20)  # only the parts the killed pass had not written


def test_a_file_that_changes_while_exported_is_reported_as_changed(
    seaweedfs: Credentials, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "out"
    local.mkdir()
    (local / "grow.bin").write_bytes(b"a" * 1000)
    real_run = engine.run

    def growing(*args: Any, **kwargs: Any) -> engine.Result:
        with open(local / "grow.bin", "ab") as f:  # the writer appends after the pass listed the file
            f.write(b"b" * 500)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(engine, "run", growing)
    r = Mover(seaweedfs, tmp_path / "state").export(LinkJob("gx", "lake", "gx/", local))
    why = dict(r.reasons)["grow.bin"]
    assert r.failed == ("grow.bin",) and "changed while it was exported" in why and "md5 = ETag" not in why
    status = json.loads((tmp_path / "state" / "gx.export.status.json").read_text())
    assert status["state"] == "failed" and status["error_class"] == "FileFailures"
    assert progress.read_statuses(tmp_path / "state")[0].state == "failed"
