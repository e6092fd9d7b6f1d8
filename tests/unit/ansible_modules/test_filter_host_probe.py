"""plugins/filter/host_probe.py: reading host_probe answers (absent, answer_is, answers_where, version_output)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from kiln_filters import filter_plugin

F = filter_plugin("host_probe")

DIR = {"exists": True, "islnk": False, "type": "directory", "owner": "root", "group": "root", "mode": "0755",
       "sha256": None}
LINK = {**DIR, "islnk": True}
MISSING = {"exists": False, "islnk": False, "type": None, "owner": None, "group": None, "mode": None}


def test_absent_reads_exists_of_dicts_and_truth_of_the_rest() -> None:
    assert F.absent({"/etc/kiln": DIR, "/srv": MISSING, "/gone-link": {**MISSING, "exists": True}}) == ["/srv"]
    assert F.absent({"mount.lustre": None, "lctl": "/usr/sbin/lctl", "lfs": ""}) == ["mount.lustre", "lfs"]
    assert F.absent({"ib0": True, "ib1": False}) == ["ib1"]
    assert F.absent({}) == []
    # An answer without `exists` (a unit) is there.
    assert F.absent({"chrony.service": {"enabled": "enabled"}}) == []
    with pytest.raises(AnsibleFilterError, match="absent expects the mapping"):
        F.absent(["/srv"])


def test_answer_is_compares_every_field_given() -> None:
    assert F.answer_is(DIR, type="directory", owner="root", group="root", mode="0755") is True
    assert F.answer_is(DIR, mode="755") is False, "modes are four octal digits"
    assert F.answer_is(LINK, type="directory") is True, "type is the link's target's"
    assert F.answer_is(LINK, islnk=False, type="directory") is False
    assert F.answer_is(DIR, sha256="") is False, "an empty wanted checksum never matches"
    assert F.answer_is({**DIR, "type": "file", "sha256": "ab"}, sha256="ab") is True
    assert F.answer_is(DIR, no_such_field=None) is False
    for missing in (None, {}, "text"):
        assert F.answer_is(missing, type="directory") is False
    with pytest.raises(AnsibleFilterError, match="at least one field"):
        F.answer_is(DIR)


def test_answers_where_keeps_the_order_asked() -> None:
    units = {
        "seaweedfs-master.service": {"enabled": "enabled", "active": "active", "unit_file": True},
        "seaweedfs-volume.service": {"enabled": "enabled", "active": "failed", "unit_file": True},
        "seaweedfs-filer.service": {"enabled": "", "active": "inactive", "unit_file": False},
        "seaweedfs-s3.service": {"enabled": "enabled", "active": "active", "unit_file": True},
    }
    assert F.answers_where(units, enabled="enabled", active="active") == [
        "seaweedfs-master.service", "seaweedfs-s3.service"]
    assert F.answers_where(units, unit_file=False) == ["seaweedfs-filer.service"]
    with pytest.raises(AnsibleFilterError, match="answers_where expects the mapping"):
        F.answers_where(None, unit_file=False)


def test_version_output_is_stdout_or_empty() -> None:
    versions = {"weed": {"rc": 0, "stdout": "version 30GB 3.39 51d4a4b2 linux amd64", "stderr": ""},
                "warp": None}
    assert F.version_output(versions, "weed") == "version 30GB 3.39 51d4a4b2 linux amd64"
    assert F.version_output(versions, "warp") == ""
    assert F.version_output(versions, "nvcc") == ""
    assert F.version_output(None, "weed") == ""


def test_the_filter_module_names_each_filter() -> None:
    assert set(F.FilterModule().filters()) == {"absent", "answer_is", "answers_where", "version_output"}
