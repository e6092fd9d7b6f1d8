"""Checkpoint write-back, release and restore against the session's real SeaweedFS: one checkpoint's trouble does
not hold up the others, a directory name used again never shows a marker over mixed files, and `kiln data restore
--latest` finds the newest complete checkpoint, fast tier first."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from kiln.dataflow import engine
from kiln.dataflow.checkpoints import INDEX, VERSION_META, Root, export_checkpoints, restore_latest
from kiln.dataflow.lake import Credentials, client, list_prefix
from kiln.dataflow.lock import LockBusy
from kiln.dataflow.mover import Mover
from tests.dataflow.conftest import ensure_bucket

ROOT = Path(__file__).resolve().parents[2]


def _checkpoint(root: Path, name: str, step: int, shards: dict[str, bytes], marker: bytes = b"meta") -> Path:
    d = root / name
    d.mkdir(parents=True)
    for rel, data in shards.items():
        (d / rel).write_bytes(data)
    (d / ".metadata").write_bytes(marker)
    os.utime(d / ".metadata", ns=(step * 10**9, step * 10**9))  # the marker's mtime orders checkpoints
    return d


def _root(tmp_path: Path, prefix: str) -> Root:
    return Root(name="ck", root=tmp_path / "ckpt", bucket="lake", prefix=prefix, marker=".metadata")


def test_a_symlink_or_a_failing_checkpoint_does_not_hold_up_the_others(seaweedfs: Credentials, tmp_path: Path) -> None:
    ck = _root(tmp_path, "ckh/")
    s1 = _checkpoint(ck.root, "step1", 1, {"__0_0.distcp": os.urandom(4096)})
    os.symlink("__0_0.distcp", s1 / "latest.distcp")  # a symlink inside a checkpoint
    s2 = _checkpoint(ck.root, "step2", 2, {"__0_0.distcp": b"x"})
    (s2 / "bad\nname.distcp").write_bytes(b"y")  # a name the mover refuses: this checkpoint fails
    _checkpoint(ck.root, "step3", 3, {"__0_0.distcp": os.urandom(4096)})
    mover = Mover(seaweedfs, tmp_path / "state")
    r = export_checkpoints(mover, ck, keep=1, release=True)
    assert r.exported == ("step1", "step3") and [n for n, _ in r.failed] == ["step2"]
    assert "refused" in r.failed[0][1]
    assert r.released == ("step1",)  # verified, symlink and all; step2 is not, so it stays
    keys = {o.key for o in list_prefix(client(seaweedfs), "lake", "ckh/")}
    assert {"step1/latest.distcp.rclonelink", "step1/.metadata", "step3/.metadata"} <= keys
    assert "step2/.metadata" not in keys  # a failed checkpoint never gets its marker
    status = json.loads((tmp_path / "state" / "ck.checkpoint.status.json").read_text())
    assert status["state"] == "failed" and status["error_class"] == "CheckpointFailures"
    assert "step2" in status["error"]


def test_a_second_write_back_of_one_root_is_told_who_holds_it(seaweedfs: Credentials, tmp_path: Path) -> None:
    ck = _root(tmp_path, "ckl/")
    _checkpoint(ck.root, "step1", 1, {"__0_0.distcp": b"x"})
    holder = Mover(seaweedfs, tmp_path / "state")
    impatient = Mover(seaweedfs, tmp_path / "state", lock_wait_s=0)
    with holder.session("ck.checkpoint"), pytest.raises(LockBusy, match=r"ck\.checkpoint is being moved by .* pid "):
        export_checkpoints(impatient, ck, keep=1, release=True)
    assert not list(list_prefix(client(seaweedfs), "lake", "ckl/"))  # the second touched nothing
    assert (ck.root / "step1" / "__0_0.distcp").exists()


def test_a_reused_checkpoint_name_never_shows_the_old_marker_over_new_files(
    seaweedfs: Credentials, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = client(seaweedfs)
    ck = _root(tmp_path, "ckr/")
    mover = Mover(seaweedfs, tmp_path / "state")
    d = _checkpoint(ck.root, "step5", 5, {"__0_0.distcp": os.urandom(4096), "__1_0.distcp": os.urandom(4096)})
    assert export_checkpoints(mover, ck, keep=2, release=False).exported == ("step5",)
    v1 = s3.head_object(Bucket="lake", Key="ckr/step5/.metadata")["Metadata"][VERSION_META]
    # The job restarts and writes step5 again: other bytes, one file fewer.
    for p in d.iterdir():
        p.unlink()
    new = os.urandom(8192)
    (d / "__0_0.distcp").write_bytes(new)
    (d / ".metadata").write_bytes(b"meta v2")
    seen: list[bool] = []
    real_run = engine.run

    def watching(*args: Any, **kwargs: Any) -> engine.Result:
        keys = {o.key for o in list_prefix(s3, "lake", "ckr/step5/")}
        seen.append(".metadata" in keys)  # is a marker visible while files go up?
        return real_run(*args, **kwargs)

    monkeypatch.setattr(engine, "run", watching)
    assert export_checkpoints(mover, ck, keep=2, release=False).exported == ("step5",)
    assert seen == [False, False]  # neither while the new files went up nor while the marker did
    keys = {o.key for o in list_prefix(s3, "lake", "ckr/step5/")}
    assert keys == {"__0_0.distcp", ".metadata", INDEX}  # the old version's second file is gone
    index = json.loads(s3.get_object(Bucket="lake", Key=f"ckr/step5/{INDEX}")["Body"].read())
    v2 = s3.head_object(Bucket="lake", Key="ckr/step5/.metadata")["Metadata"][VERSION_META]
    assert v2 == index["version"] != v1 and set(index["files"]) == {"step5/__0_0.distcp"}
    assert s3.get_object(Bucket="lake", Key="ckr/step5/__0_0.distcp")["Body"].read() == new


def _stack(tmp_path: Path, prefix: str) -> Path:
    """The lab stack with its checkpoints under another prefix (a lake of this test's own)."""
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.lab.yaml").read_text())
    doc["config"]["kiln:cluster"]["dataflow"]["checkpoints"]["prefix"] = prefix
    path = tmp_path / "Pulumi.labck.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_restore_latest_takes_the_fast_tier_first_the_lake_second_and_skips_incomplete_ones(
    seaweedfs: Credentials, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kiln.cli import main

    ensure_bucket(seaweedfs, "checkpoints")
    s3 = client(seaweedfs)
    root = tmp_path / "lustre/checkpoints/run"  # the lab stack's checkpoint path, re-rooted
    shards = {10: {"__0_0.distcp": os.urandom(6000)}, 20: {"__0_0.distcp": os.urandom(7000)}}
    for step, files in shards.items():
        _checkpoint(root, f"step{step}", step, files)
    (root / "step30").mkdir()
    (root / "step30" / "__0_0.distcp").write_bytes(b"half")  # no marker: never a candidate
    monkeypatch.setenv("KILN_S3_SECRET_KEY", seaweedfs.secret_key)
    common = [str(_stack(tmp_path, "rst/")), "--endpoint", seaweedfs.endpoint, "--mount-point",
              str(tmp_path / "lustre"), "--state-dir", str(tmp_path / "state")]
    assert main(["data", "export", *common, "--checkpoints"]) == 0
    capsys.readouterr()

    def restore() -> dict[str, Any]:
        rc = main(["data", "restore", *common, "--latest"])
        doc: dict[str, Any] = json.loads(capsys.readouterr().out)
        assert rc == (0 if doc["checkpoint"] else 1)
        return doc

    first = restore()
    assert (first["checkpoint"], first["source"], first["bytes_moved"]) == ("step20", "fast-tier", 0)
    (root / "step20" / "__0_0.distcp").unlink()  # the fast tier lost it: the lake has it
    second = restore()
    assert (second["checkpoint"], second["source"], second["bytes_moved"]) == ("step20", "lake", 7000)  # what was lost
    assert (root / "step20" / "__0_0.distcp").read_bytes() == shards[20]["__0_0.distcp"]
    s3.delete_object(Bucket="checkpoints", Key="rst/step20/__0_0.distcp")  # the lake's copy is no longer whole
    third = restore()
    assert (third["checkpoint"], third["source"]) == ("step10", "fast-tier")
    assert third["skipped"] == [{"checkpoint": "step20", "why": "step20/__0_0.distcp is missing or not the indexed "
                                                               "version"}]
    # Nothing complete anywhere: exit 1, and the reasons.
    s3.delete_object(Bucket="checkpoints", Key="rst/step10/.metadata")
    assert restore_latest(Mover(seaweedfs, tmp_path / "state"), Root(
        name="checkpoints", root=root, bucket="checkpoints", prefix="rst/", marker=".metadata"))["checkpoint"] is None
