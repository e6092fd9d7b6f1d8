"""Filters that read what ``weed shell`` prints (SeaweedFS 3.x), for the objectstore role.

``weed version`` prints ``version <size> <release> <commit> <os> <arch>``, e.g. ``version 30GB 3.39 51d4a4b2
linux amd64`` (weed/command/version.go: util.Version() and the build's GOOS/GOARCH).

``weed shell`` reads commands on stdin and writes a ``> `` prompt before each one. ``s3.bucket.list``
(weed/shell/command_s3_bucket_list.go) prints one line per bucket, ``  <name>\\tsize:<bytes>\\tfile:<count>``,
the first one right after the prompt. ``weed shell`` exits 0 even when a command fails; the failures are
the lines it prints starting with ``error:`` or ``unknown command:``.
"""

from __future__ import annotations

import re
from typing import Any

VERSION_LINE = re.compile(r"version\s+\S+\s+(\S+)")
BUILD_LINE = re.compile(r"version\s+(\d+GB)\s")
BUCKET_LINE = re.compile(r"(?m)^(?:> )?\s+(\S+)\tsize:")
ERROR_LINE = re.compile(r"(?m)^(?:error:|unknown command:).*$")


def weed_release(output: str | None) -> str:
    """The release ``weed version`` printed (``3.39``); '' when the output has none."""
    found = VERSION_LINE.search(output or "")
    return found.group(1) if found else ""


def weed_build(output: str | None) -> str:
    """The build's volume size limit ``weed version`` printed: ``30GB`` (4-byte offsets) or ``8000GB`` (the
    5BytesOffset build; weed/util/constants_4bytes.go, constants_5bytes.go); '' when the output has none."""
    found = BUILD_LINE.search(output or "")
    return found.group(1) if found else ""


def weed_bucket_names(output: str | None) -> list[str]:
    """The bucket names ``s3.bucket.list`` printed, in its order."""
    return BUCKET_LINE.findall(output or "")


def weed_shell_errors(output: str | None) -> list[str]:
    """The lines of ``weed shell`` output that report a failed command."""
    return ERROR_LINE.findall(output or "")


class FilterModule:
    """weed shell output."""

    def filters(self) -> dict[str, Any]:
        return {
            "weed_release": weed_release,
            "weed_build": weed_build,
            "weed_bucket_names": weed_bucket_names,
            "weed_shell_errors": weed_shell_errors,
        }
