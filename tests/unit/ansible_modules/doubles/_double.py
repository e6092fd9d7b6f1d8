# TEST DOUBLE: records calls; not Lustre
"""Shared plumbing for the fake Lustre/util-linux tools in this directory.

Each fake tool appends its argv to the JSON-lines log named by KILN_DOUBLE_LOG
and keeps its state in the JSON file named by KILN_DOUBLE_STATE, so that one
tool sees what another did (mkfs.lustre then tunefs.lustre --dryrun, lctl
set_param then get_param, lfs setstripe then getstripe). The output formats
copy what the real tools print (see each tool's docstring for the source);
the behaviour is only as deep as kiln's modules need.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

STATE_KEYS = (
    "targets", "signatures", "params", "llogs", "layouts", "dir_defaults", "default_quotas", "zpools", "datasets",
    "quirks",
)


def _path(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        sys.stderr.write(f"test double: {var} is not set\n")
        sys.exit(70)
    return value


def record(prog: str, argv: list[str]) -> None:
    """Append one call to the log."""
    with open(_path("KILN_DOUBLE_LOG"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"prog": prog, "argv": argv}) + "\n")


def load_state() -> dict[str, Any]:
    path = _path("KILN_DOUBLE_STATE")
    state: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    for key in STATE_KEYS:
        state.setdefault(key, {})
    return state


def save_state(state: dict[str, Any]) -> None:
    path = _path("KILN_DOUBLE_STATE")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
    os.replace(tmp, path)


def fail(prog: str, message: str, rc: int) -> None:
    sys.stderr.write(f"{prog}: {message}\n")
    sys.exit(rc)


def quirk(state: dict[str, Any], name: str) -> Any:
    """A fault a test asked for, e.g. state["quirks"]["tunefs_fail"]."""
    return state["quirks"].get(name)


def nid2str(value: str) -> str:
    """libcfs_nid2str() prints network number 0 without the number: ``@o2ib0`` -> ``@o2ib``."""
    return re.sub(r"@(o2ib|tcp|kfi|gni|efa)0(?=$|[,:])", r"@\1", value)


def split_option(arg: str) -> tuple[str, str | None]:
    """``--fsname=lab`` -> (``--fsname``, ``lab``); ``--mgs`` -> (``--mgs``, None)."""
    if arg.startswith("--") and "=" in arg:
        key, value = arg.split("=", 1)
        return key, value
    return arg, None


# -- Lustre on-disk data as print_ldd() shows it (lustre/utils/mkfs_lustre.c) --

LDD_F_SV_TYPE_MDT = 0x0001
LDD_F_SV_TYPE_OST = 0x0002
LDD_F_SV_TYPE_MGS = 0x0004
LDD_F_NEED_INDEX = 0x0010
LDD_F_VIRGIN = 0x0020
LDD_F_UPDATE = 0x0040
LDD_F_WRITECONF = 0x0100
LDD_F_NO_PRIMNODE = 0x1000


def append_param(params: str, key: str, value: str) -> str:
    """mount_utils.c append_param(): ``key=old`` becomes ``key=old:value``."""
    tokens = params.split()
    for position, token in enumerate(tokens):
        if token.startswith(key + "="):
            tokens[position] = f"{token}:{value}"
            return " " + " ".join(tokens)
    return f"{params} {key}={value}"


def erase_param(params: str, key: str) -> str:
    tokens = [token for token in params.split() if not token.startswith(key + "=")]
    return (" " + " ".join(tokens)) if tokens else ""


def server_name(target: dict[str, Any]) -> str:
    """server_make_name(): ``lab:OST0003`` until first registration, ``MGS`` for an MGT."""
    flags = target["flags"]
    if not flags & (LDD_F_SV_TYPE_MDT | LDD_F_SV_TYPE_OST):
        return "MGS"
    sep = ":" if flags & LDD_F_VIRGIN else ("=" if flags & LDD_F_WRITECONF else "-")
    kind = "MDT" if flags & LDD_F_SV_TYPE_MDT else "OST"
    return f"{target['fsname'][:8]}{sep}{kind}{target['index']:04x}"


def flag_words(flags: int) -> str:
    words = [
        (LDD_F_SV_TYPE_MDT, "MDT "),
        (LDD_F_SV_TYPE_OST, "OST "),
        (LDD_F_SV_TYPE_MGS, "MGS "),
        (LDD_F_NEED_INDEX, "needs_index "),
        (LDD_F_VIRGIN, "first_time "),
        (LDD_F_UPDATE, "update "),
        (LDD_F_WRITECONF, "writeconf "),
        (LDD_F_NO_PRIMNODE, "no_primnode "),
    ]
    return "".join(word for bit, word in words if flags & bit)


def print_ldd(title: str, target: dict[str, Any], svname: str) -> str:
    index = "unassigned" if target.get("index") is None else str(target["index"])
    lines = [
        "",
        f"   {title}:",
        f"Target:     {svname}",
        f"Index:      {index}",
        f"Lustre FS:  {target.get('fsname', '')}",
        f"Mount type: {target['mount_type']}",
        f"Flags:      {target['flags']:#x}",
        f"              ({flag_words(target['flags'])})",
        f"Persistent mount opts: {target.get('mount_opts', '')}",
        f"Parameters:{target.get('params', '')}",
        "",
    ]
    return "\n".join(lines) + "\n"
