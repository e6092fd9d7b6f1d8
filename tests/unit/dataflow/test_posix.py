"""POSIX metadata as object metadata (kiln/dataflow/posix.py): FSx's names and rclone's, never a set-id bit."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kiln.dataflow.posix import Posix, apply, from_metadata, modified_ns, strip_setid, to_metadata


def test_fsx_names_are_read_first_and_written() -> None:
    fsx = {"file-permissions": "0100640", "file-owner": "1234", "file-group": "99",
           "file-mtime": "1600000000123456789ns"}
    assert from_metadata(fsx) == Posix(0o640, 1234, 99, 1600000000123456789)
    assert from_metadata({"file-mtime": "1600000000123"}).mtime_ns == 1600000000123 * 10**6  # milliseconds
    rclone = {"mode": "100755", "uid": "7", "gid": "8", "mtime": "1600000000.5"}
    assert from_metadata(rclone) == Posix(0o755, 7, 8, 1600000000500000000)
    assert from_metadata({"mode": "104755"}).mode == 0o755  # setuid never comes back


def test_metadata_round_trips_through_a_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x")
    os.chmod(f, 0o640)
    os.utime(f, ns=(1, 1_600_000_000_000_000_001))
    meta = to_metadata(f.lstat())
    assert meta["file-permissions"] == "0100640" and meta["file-mtime"] == "1600000000000000001ns"
    g = tmp_path / "g"
    g.write_bytes(b"x")
    apply(str(g), from_metadata(meta))
    assert stat.S_IMODE(g.stat().st_mode) == 0o640 and g.stat().st_mtime_ns == 1_600_000_000_000_000_001


def test_set_id_bits_are_stripped(tmp_path: Path) -> None:
    f = tmp_path / "prog"
    f.write_bytes(b"#!/bin/sh\n")
    os.chmod(f, 0o4755)
    strip_setid(str(f))
    assert stat.S_IMODE(f.stat().st_mode) == 0o755


def test_last_modified_in_both_spellings() -> None:
    assert modified_ns("2026-01-01T00:00:00.000Z") == modified_ns("Thu, 01 Jan 2026 00:00:00 GMT") \
        == 1767225600 * 10**9
