"""Lustre sizes, NIDs and parameter values.

One of the five files of kiln's Lustre library (docs/architecture.md, "Lustre library"):
``lustre_common`` (sizes, NIDs, parameter values), ``lustre_target``, ``lustre_param`` and
``lustre_layout``. The files live once, in the ``kiln.cluster`` collection's
``plugins/module_utils``, and import each other relatively, so the same files are
``ansible_collections.kiln.cluster.plugins.module_utils.*`` for the modules (AnsiballZ ships
them to managed nodes) and ``kiln.lustre.*`` for ``kiln verify`` (the wheel packages them).

Everything here is a pure function of its arguments: no command runs, no file is touched.
The module side runs on managed nodes, so the library keeps to Python 3.9 at runtime
(builtin generics only in annotations) and to the standard library.
"""

from __future__ import annotations

import re
from typing import Any

# --------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------

_SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTPE])(?:I?B)?\s*$", re.IGNORECASE)
_INT_RE = re.compile(r"^\s*[+-]?\d+\s*$")
_FLOAT_RE = re.compile(r"^\s*[+-]?\d+\.\d+\s*$")

KIB = 1 << 10
MIB = 1 << 20


def has_size_suffix(text: str) -> bool:
    """True for strings like ``16M``, ``1.5G``, ``64KiB`` (binary units)."""
    return bool(_SIZE_RE.match(str(text)))


def parse_size(value: Any) -> int:
    """Bytes for ``value``: an int, a digit string, or a K/M/G/T/P/E-suffixed size.

    Lustre tools treat the suffixes as binary (``1M`` = 1048576). Fractions are
    allowed only where they land on a whole byte (``1.5K`` = 1536).
    """
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if _INT_RE.match(text):
        return int(text)
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(f"not a size: {value!r}")
    number, unit = match.group(1), match.group(2).upper()
    scaled = float(number) * _SIZE_UNITS[unit]
    if scaled != int(scaled):
        raise ValueError(f"size {value!r} is not a whole number of bytes")
    return int(scaled)


def format_size(nbytes: int) -> str:
    """Shortest exact binary-suffixed spelling: 67108864 -> ``64M``; 1000 -> ``1000``."""
    if nbytes <= 0:
        return str(nbytes)
    for unit in ("E", "P", "T", "G", "M", "K"):
        factor = _SIZE_UNITS[unit]
        if nbytes % factor == 0:
            return f"{nbytes // factor}{unit}"
    return str(nbytes)


# --------------------------------------------------------------------------
# NIDs
# --------------------------------------------------------------------------

_NET_RE = re.compile(r"^(?P<lnd>[a-z][a-z0-9]*?)(?P<num>\d*)$")


def normalize_lnet_net(net: str) -> str:
    """Canonical LNet network name: number 0 is dropped (``o2ib0`` -> ``o2ib``, ``tcp1`` stays).

    libcfs_net2str() (lnet/libcfs, nidstrings.c) prints network 0 without its number,
    so ``lnetctl net show`` says ``tcp`` where the plan writes ``tcp0``.
    """
    text = net.strip()
    match = _NET_RE.match(text)
    if not match:
        return text
    num = match.group("num")
    return match.group("lnd") + ("" if num and int(num) == 0 else num)


def normalize_nid(nid: str) -> str:
    """Canonical NID text: ``addr@net`` with the network as normalize_lnet_net() writes it.

    libcfs_nid2str() prints network 0 without its number, so ``tunefs.lustre``
    shows ``10.0.0.1@o2ib`` for a target formatted with ``10.0.0.1@o2ib0``.
    """
    text = nid.strip()
    addr, sep, net = text.rpartition("@")
    if not sep or not addr:
        return text
    return f"{addr}@{normalize_lnet_net(net)}"


def parse_nid_groups(text: str) -> list[list[str]]:
    """``a,b:c,d`` -> ``[[a, b], [c, d]]``: ``:`` separates nodes, ``,`` one node's NIDs."""
    groups: list[list[str]] = []
    for node in text.split(":"):
        nids = [nid.strip() for nid in node.split(",") if nid.strip()]
        if nids:
            groups.append(nids)
    return groups


def format_nid_groups(groups: list[list[str]]) -> str:
    """Inverse of parse_nid_groups()."""
    return ":".join(",".join(group) for group in groups)


def nid_groups_key(groups: list[list[str]]) -> frozenset[frozenset[str]]:
    """Order-insensitive comparison key for a list of NID groups."""
    return frozenset(frozenset(normalize_nid(nid) for nid in group) for group in groups)


def coerce_nid_groups(raw: Any) -> list[list[str]]:
    """Accept ``[["a", "b"], ["c"]]`` or ``["a,b", "c"]`` (one string per node)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"expected a list of NID lists, got {raw!r}")
    groups: list[list[str]] = []
    for entry in raw:
        if isinstance(entry, str):
            nids = [nid.strip() for nid in entry.split(",") if nid.strip()]
        elif isinstance(entry, list):
            nids = [str(nid).strip() for nid in entry if str(nid).strip()]
        else:
            raise ValueError(f"expected a NID list or a comma-separated string, got {entry!r}")
        if not nids:
            raise ValueError("empty NID list")
        groups.append(nids)
    return groups


# --------------------------------------------------------------------------
# Parameter values: units from the name, normalisation, comparison
# --------------------------------------------------------------------------


def param_unit(name: str, page_size: int) -> int:
    """Bytes per unit of a parameter's plain number, from its name.

    ``max_pages_per_rpc`` counts pages; ``*_mb`` and ``brw_size`` count MiB;
    ``*_kb`` counts KiB; anything else counts bytes when a size is given.
    """
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "max_pages_per_rpc":
        return page_size
    if leaf.endswith("_mb") or leaf == "brw_size":
        return MIB
    if leaf.endswith("_kb"):
        return KIB
    return 1


def normalize_param_value(name: str, value: Any, page_size: int = 4096) -> str:
    """Canonical text of a parameter value so wanted and read-back values compare.

    ``16M`` for ``max_pages_per_rpc`` is 4096 (pages of 4 KiB); ``2G`` for
    ``max_dirty_mb`` is 2048; ``32M`` for a byte-valued parameter is 33554432;
    plain integers lose leading zeros and ``+``; other text is stripped.
    """
    if isinstance(value, bool):
        return "1" if value else "0"
    text = str(value).strip()
    if _INT_RE.match(text):
        return str(int(text))
    if has_size_suffix(text):
        unit = param_unit(name, page_size)
        nbytes = parse_size(text)
        return str(nbytes // unit) if nbytes % unit == 0 else repr(nbytes / unit)
    if _FLOAT_RE.match(text):
        return repr(float(text))
    return text


def values_equal(name: str, wanted: Any, found: Any, page_size: int = 4096) -> bool:
    """True when a wanted and a read-back value of parameter ``name`` are the same.

    Compared token by token (sysctls such as ``net.ipv4.tcp_rmem`` hold three numbers),
    each token through normalize_param_value() with ``name``'s unit.
    """
    want_tokens = [str(int(wanted))] if isinstance(wanted, bool) else str(wanted).split()
    found_tokens = str(found).split()
    if len(want_tokens) != len(found_tokens):
        return False
    for i, want in enumerate(want_tokens):
        if normalize_param_value(name, want, page_size) != normalize_param_value(name, found_tokens[i], page_size):
            return False
    return True
