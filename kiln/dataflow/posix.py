"""POSIX mode, owner, group and times as object metadata, and back.

Two spellings are read, and kiln writes the first where it writes an object itself (a symlink, a directory):
- FSx for Lustre's (FSx for Lustre User Guide, "POSIX metadata support for data repositories"):
  x-amz-meta-file-permissions (`<octal file type><octal permission mask>`, as st_mode), -file-owner (uid),
  -file-group (gid), -file-mtime and -file-atime (nanoseconds with an `ns` suffix, else milliseconds);
- rclone's, which `rclone copy --metadata` writes on the uploads it makes: x-amz-meta-mode (octal st_mode),
  -uid, -gid, -mtime (seconds, fractions allowed), -atime (RFC 3339).
Restoring never sets setuid, setgid or sticky bits (FSx does not import them either): a mode in the lake must not
make a set-id program on the fast tier.
"""

from __future__ import annotations

import datetime
import email.utils
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Posix:
    mode: int | None = None  # permission bits only (0o7777 masked to 0o777)
    uid: int | None = None
    gid: int | None = None
    mtime_ns: int | None = None


def _int(value: str | None, base: int = 10) -> int | None:
    try:
        return None if value is None else int(value, base)
    except ValueError:
        return None


def _fsx_time(value: str | None) -> int | None:
    if value is None:
        return None
    if value.endswith("ns"):
        return _int(value[:-2])
    ms = _int(value)
    return None if ms is None else ms * 1_000_000


def _rclone_time(value: str | None) -> int | None:
    """rclone's seconds with up to nine decimals, read exactly (a float would lose the nanoseconds)."""
    if value is None:
        return None
    sec, _, frac = value.partition(".")
    if not sec.isdigit() or (frac and not frac.isdigit()):
        return None
    return int(sec) * 10**9 + int((frac + "000000000")[:9])


def from_metadata(meta: Mapping[str, str]) -> Posix:
    """What an object's user metadata (boto3's `Metadata`, keys without x-amz-meta-) says, FSx's names first."""
    mode = _int(meta.get("file-permissions"), 8)
    if mode is None:
        mode = _int(meta.get("mode"), 8)
    uid = _int(meta.get("file-owner")) if "file-owner" in meta else _int(meta.get("uid"))
    gid = _int(meta.get("file-group")) if "file-group" in meta else _int(meta.get("gid"))
    mtime = _fsx_time(meta.get("file-mtime"))
    if mtime is None:
        mtime = _rclone_time(meta.get("mtime"))
    return Posix(None if mode is None else stat.S_IMODE(mode) & 0o777, uid, gid, mtime)


def to_metadata(st: os.stat_result) -> dict[str, str]:
    """FSx's metadata for a local file, directory or symlink (lstat)."""
    return {
        "file-permissions": f"{stat.S_IFMT(st.st_mode) | stat.S_IMODE(st.st_mode) & 0o777:07o}",
        "file-owner": str(st.st_uid),
        "file-group": str(st.st_gid),
        "file-mtime": f"{st.st_mtime_ns}ns",
        "file-atime": f"{st.st_atime_ns}ns",
    }


def modified_ns(last_modified: str) -> int:
    """An S3 LastModified as nanoseconds since the epoch: ISO 8601 as a listing gives it
    (2026-11-27T04:10:35.979Z) or an HTTP date as a HEAD's Last-Modified header does."""
    if "," in last_modified:
        t = email.utils.parsedate_to_datetime(last_modified)
    else:
        t = datetime.datetime.fromisoformat(last_modified.replace("Z", "+00:00"))
    return int(t.timestamp() * 1e9)


def apply(path: str, p: Posix, fallback_mtime_ns: int | None = None) -> None:
    """Give the file (or symlink, not followed) the owner, mode and mtime; owner first, as chown clears set-id
    bits. What is not known stays as it is; the mtime falls back to `fallback_mtime_ns` (LastModified)."""
    link = os.path.islink(path)
    if p.uid is not None or p.gid is not None:
        os.chown(path, -1 if p.uid is None else p.uid, -1 if p.gid is None else p.gid, follow_symlinks=False)
    if p.mode is not None and not link:
        os.chmod(path, p.mode)
    mtime = p.mtime_ns if p.mtime_ns is not None else fallback_mtime_ns
    if mtime is not None:
        os.utime(path, ns=(mtime, mtime), follow_symlinks=False)


def strip_setid(path: str) -> None:
    """Clear setuid, setgid and sticky bits of a regular file the mover is about to expose."""
    st = os.lstat(path)
    if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
        os.chmod(path, stat.S_IMODE(st.st_mode) & 0o777)
