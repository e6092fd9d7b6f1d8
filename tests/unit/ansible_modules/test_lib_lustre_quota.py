"""kiln.lustre.lustre_quota: lfs quota -U/-G/-P parsing, setquota builder, validation, drift."""

from __future__ import annotations

import pytest
from kiln_ansible_support import load_fixture

from kiln.knowledge import lustre_params
from kiln.lustre import lustre_quota as kq

Q = kq.DefaultQuota


def test_default_quota_tables_of_2_15_and_2_16() -> None:
    assert kq.parse_default_quota(load_fixture("quota_default_usr_2_15.txt"), "user") == Q(
        2147483648, 2306867200, 5000000, 5500000
    )
    assert kq.parse_default_quota(load_fixture("quota_default_prj_2_16.txt"), "project") == Q(
        21474836480, 23622320128, 0, 0
    )
    # the title names the type: a project table is not the user default
    assert kq.parse_default_quota(load_fixture("quota_default_prj_2_16.txt"), "user") is None
    assert kq.parse_default_quota("lfs: quotactl failed: Operation not supported\n", "group") is None


def test_setquota_args_are_kib_and_inodes() -> None:
    want = kq.quota_from_spec({"block_soft_KiB": 2147483648, "inode_hard": 5500000})
    assert kq.build_setquota_args("group", want) == ["-G", "-b", "2147483648", "-B", "0", "-i", "0", "-I", "5500000"]


def test_validation_matches_lfs_setquota_warnings() -> None:
    assert kq.validate_quota(Q(2048, 4096, 0, 2000)) == []
    assert kq.validate_quota(Q(1024, 0, 0, 0)) == [
        "block_soft_KiB 1024: at most 1024 is below the minimum qunit size (lfs setquota warns)"
    ]
    assert kq.validate_quota(Q(0, 0, 3000, 2000)) == ["inode_soft 3000: above inode_hard 2000"]
    assert kq.validate_quota(Q()) == ["no limit given (all four are 0)"]
    assert "must be 0 (no limit) or positive" in kq.validate_quota(Q(-1, 0, 0, 0))[0]
    with pytest.raises(ValueError, match="must be an integer"):
        kq.quota_from_spec({"inode_soft": "many"})


def test_the_minimum_is_the_registrys() -> None:
    limits = lustre_params.load().layout_limits
    assert kq.LIMIT_MIN == limits["quota_block_limit_min_KiB"].value == limits["quota_inode_limit_min"].value


def test_drift_lists_each_limit() -> None:
    assert kq.quota_drift(Q(1, 2, 3, 4), Q(1, 2, 3, 4)) == []
    assert kq.quota_drift(None, Q(2048, 0, 0, 0)) == [{"field": "block_soft_KiB", "current": 0, "wanted": 2048}]
    assert kq.quota_drift(Q(2048, 4096, 0, 0), Q(2048, 8192, 0, 0)) == [
        {"field": "block_hard_KiB", "current": 4096, "wanted": 8192}
    ]
