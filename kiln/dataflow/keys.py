"""Which keys and paths the mover accepts, and the names it keeps for itself.

An object key becomes a path under the link's directory, and a path becomes a line of rclone's
`--files-from-raw` list. So kiln refuses, itself and before anything moves, a key that would leave the
directory (a `..` or `.` segment, a leading `/`, an empty segment), one that would split the list or a log
line (a control character), and one that takes a name the mover keeps for itself (the partial suffix, the
staging directory). A refused key is reported, escaped, and nothing is written for it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Downloads in progress (rclone's temporary names, kiln's ranged downloads) end with this suffix.
PARTIAL_SUFFIX = ".kiln-partial"
#: The link's directory holds this kiln-owned directory: every download lands here first and is renamed into
#: place only once verified.
STAGING = ".kiln-staging"
#: A symlink travels as an object named <path><LINK_SUFFIX> whose bytes are its target (rclone's --links).
LINK_SUFFIX = ".rclonelink"


def escape(key: str) -> str:
    """The key with control characters and backslashes escaped, safe on one line of a log or a report."""
    return "".join(c if c.isprintable() and c != "\\" else c.encode("unicode_escape").decode("ascii") for c in key)


def refusal(key: str) -> str | None:
    """Why the mover refuses this key (relative to the link's prefix), or None where it is acceptable."""
    if key.startswith("/"):
        return "it starts with '/', so it would name a path outside the link's directory"
    if any(not c.isprintable() for c in key):
        return "it holds a control character, which would split the mover's file list"
    parts = key.rstrip("/").split("/")
    if ".." in parts or "." in parts:
        return "it has a '.' or '..' segment, so it would name a path outside the link's directory"
    if "" in parts:
        return "it has an empty segment ('//'), which two different keys would share as one path"
    if parts[0] == STAGING or any(p.endswith(PARTIAL_SUFFIX) for p in parts):
        return f"it takes a name the mover keeps for itself ({STAGING}/ or *{PARTIAL_SUFFIX})"
    if any(len(p.encode()) > 255 for p in parts):
        return "a segment is longer than 255 bytes, the longest file name Linux takes"
    return None


def inside(root: Path, rel: str) -> bool:
    """Whether root/rel, with every existing parent resolved, stays inside root: no symlink on the way (a symlink
    the lake delivered, say) leads a write outside the link's directory."""
    parent, real_root = os.path.realpath((root / rel).parent), os.path.realpath(root)
    return parent == real_root or parent.startswith(real_root + "/")
