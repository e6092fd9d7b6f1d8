"""Lustre parameters: lctl get_param, the MGS configuration llog, module parameters.

One of the five files of kiln's Lustre library (docs/architecture.md, "Lustre library"):
``lustre_common`` (sizes, NIDs, parameter values), ``lustre_target``, ``lustre_param`` and
``lustre_layout``. The files live once, in the ``kiln.cluster`` collection's
``plugins/module_utils``, and import each other relatively, so the same files are
``ansible_collections.kiln.cluster.plugins.module_utils.*`` for the modules (AnsiballZ ships
them to managed nodes) and ``kiln.lustre.*`` for ``kiln verify`` (the wheel packages them).

Everything here is a pure function of its arguments: no command runs, no file is touched.
The module side runs on managed nodes, so the library keeps to Python 3.9 at runtime
(builtin generics only in annotations) and to the standard library.

Formats parsed here, and where each is documented:

* ``lctl get_param NAME``: one ``full.name=value`` line per matching device
  (manual, "Reporting Current Parameter Values").
* ``lctl --device MGS llog_print LOG``: one YAML flow mapping per record,
  ``- { index: 2, event: set_param, device: general, parameter: P, value: V }``
  (manual, "Listing Persistent Parameters"; class_config_yaml_output()).
"""

from __future__ import annotations

import re
from typing import Any

from .lustre_common import MIB, normalize_param_value

# --------------------------------------------------------------------------
# Parameters: lctl get_param / llog_print, value normalisation
# --------------------------------------------------------------------------

_GET_PARAM_LINE = re.compile(r"^(?P<name>[^\s=]+)=(?P<value>.*)$")
_LLOG_RECORD = re.compile(r"^\s*-\s*\{\s*(?P<body>.*?)\s*\}\s*$")
_LLOG_FIELD = re.compile(r"(\w+): ((?:(?!, \w+: ).)*)")


def parse_get_param(text: str) -> list[tuple[str, str]]:
    """``lctl get_param NAME`` -> [(full name, value)], one per matching device.

    A ``name=`` line followed by lines without ``=`` is a multi-line value; its
    lines are joined with newlines.
    """
    entries: list[tuple[str, str]] = []
    for line in text.splitlines():
        match = _GET_PARAM_LINE.match(line)
        if match:
            entries.append((match.group("name"), match.group("value").strip()))
        elif entries and line.strip():
            name, value = entries[-1]
            entries[-1] = (name, f"{value}\n{line.strip()}" if value else line.strip())
    return entries


def param_drift(name: str, wanted: Any, entries: list[tuple[str, str]], page_size: int = 4096) -> list[dict[str, Any]]:
    """Devices whose value differs from ``wanted``, as {name, device, current, wanted}.

    Both sides are normalised with the unit of ``name``'s last part; only when that
    part is itself a wildcard does each device's full name decide its unit.
    """
    leaf_is_glob = any(char in name.rsplit(".", 1)[-1] for char in "*?[")
    drift = []
    for device, current in entries:
        unit_name = device if leaf_is_glob else name
        want = normalize_param_value(unit_name, wanted, page_size)
        if normalize_param_value(unit_name, current, page_size) != want:
            drift.append({"name": name, "device": device, "current": current, "wanted": str(wanted)})
    return drift


def parse_llog_records(text: str) -> list[dict[str, str]]:
    """``lctl --device MGS llog_print LOG`` -> list of records (dicts of strings).

    A key that appears twice keeps its first value: class_config_yaml_output()
    (lustre/obdclass/obd_config.c) prints the record's own ``index`` first, and the
    command's buffers after it may reuse a name (``add_osc`` has an ``index`` buffer,
    lcfg_data_table in lustre/include/uapi/linux/lustre/lustre_cfg.h), e.g.
    ``- { index: 138, event: add_osc, device: testfs-clilov, ost: testfs-OST0003_UUID, index: 3, gen: 1 }``.
    """
    records = []
    for line in text.splitlines():
        match = _LLOG_RECORD.match(line)
        if match:
            record: dict[str, str] = {}
            for key, value in _LLOG_FIELD.findall(match.group("body")):
                record.setdefault(key, value.strip())
            records.append(record)
    return records


def _record_index(record: dict[str, str]) -> int:
    try:
        return int(record.get("index", "0"))
    except ValueError:
        return 0


def persistent_value(records: list[dict[str, str]], name: str) -> str | None:
    """The value ``lctl set_param -P`` last stored for exactly ``name`` (None: no record).

    A record without a value (what ``set_param -P -d`` leaves on some releases)
    counts as deleted.
    """
    value: str | None = None
    for record in sorted(records, key=_record_index):
        if record.get("event") == "set_param" and record.get("parameter") == name:
            value = record.get("value") or None
    return value


def split_conf_param_name(name: str) -> tuple[str, str]:
    """``lab-OST0000.osc.max_dirty_mb`` -> (``lab-OST0000``, ``osc.max_dirty_mb``)."""
    if "." not in name:
        raise ValueError(f"conf_param name {name!r} must look like fsname.obdtype.param or target.obdtype.param")
    device, rest = name.split(".", 1)
    return device, rest


def conf_param_values(records: list[dict[str, str]], name: str) -> dict[str, str]:
    """Latest ``lctl conf_param`` value per config-log device for ``name``.

    conf_param records read ``device: lab-OST0000-osc, parameter: osc.max_dirty_mb=64``.
    A record belongs to ``name`` when its parameter key is the part after the
    first dot and its device is the part before it, or starts with it plus ``-``.
    """
    prefix, key = split_conf_param_name(name)
    values: dict[str, str] = {}
    for record in sorted(records, key=_record_index):
        if record.get("event") != "conf_param" or "=" not in record.get("parameter", ""):
            continue
        rec_key, rec_value = record["parameter"].split("=", 1)
        device = record.get("device", "")
        if rec_key == key and (device == prefix or device.startswith(prefix + "-")):
            values[device] = rec_value
    return values


def module_param_path(sysfs_root: str, name: str) -> str:
    """``mdt.max_mod_rpcs_per_client`` -> ``<sysfs_root>/module/mdt/parameters/max_mod_rpcs_per_client``."""
    if name.count(".") != 1:
        raise ValueError(f"module parameter {name!r} must be module.parameter")
    module, param = name.split(".")
    for part in (module, param):
        if not re.match(r"^[A-Za-z0-9_]+$", part):
            raise ValueError(f"module parameter {name!r} has an invalid part {part!r}")
    return f"{sysfs_root.rstrip('/')}/module/{module}/parameters/{param}"


# --------------------------------------------------------------------------
# Limits the kernel sets from the node's RAM
# --------------------------------------------------------------------------

#: Client parameters whose store function refuses a value above a share of the node's kernel-managed RAM,
#: cfs_totalram_pages() (totalram_pages(); /proc/meminfo MemTotal is the same count, fs/proc/meminfo.c):
#: leaf name -> (divisor, store function). Identical at v2_15_0 and v2_16_0.
RAM_LIMITS = {
    # pages_number = round_up(MiB, 1 MiB) >> PAGE_SHIFT; -ERANGE if pages_number > totalram / 2
    "max_read_ahead_mb": (2, "lustre/llite/lproc_llite.c max_read_ahead_mb_store"),
    # pages_number = MiB_TO_PAGES(MiB); -ERANGE if pages_number >= MiB_TO_PAGES(2048) or > totalram / 4
    "max_dirty_mb": (4, "lustre/osc/lproc_osc.c max_dirty_mb_store"),
}
#: osc max_dirty_mb refuses OSC_MAX_DIRTY_MB_MAX (2048) MiB and more, whatever the RAM (lustre/include/obd.h).
OSC_MAX_DIRTY_MB_MAX = 2048

_MEMTOTAL = re.compile(r"^MemTotal:\s+(\d+)\s+kB\s*$", re.MULTILINE)


def memtotal_kib(meminfo: str) -> int | None:
    """MemTotal of ``/proc/meminfo`` in KiB (totalram_pages() in KiB), or None when absent."""
    match = _MEMTOTAL.search(meminfo)
    return int(match.group(1)) if match else None


def ram_limit_refusal(name: str, value: Any, memtotal: int, page_size: int = 4096) -> str | None:
    """Why the kernel would refuse ``value`` for ``name`` on a node with ``memtotal`` KiB of MemTotal (None: it
    accepts it, or ``name`` has no RAM limit). Compares in pages, as the store functions in RAM_LIMITS do."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf not in RAM_LIMITS:
        return None
    divisor, where = RAM_LIMITS[leaf]
    text = normalize_param_value(name, value, page_size)
    if not text.isdigit():
        return None  # not a whole MiB count: the value check is the caller's
    mib = int(text)
    pages = mib * (MIB // page_size)
    limit = memtotal * 1024 // page_size // divisor
    if leaf == "max_dirty_mb" and mib >= OSC_MAX_DIRTY_MB_MAX:
        return f"{name}={mib} MiB: the kernel refuses {OSC_MAX_DIRTY_MB_MAX} MiB or more ({where})"
    if pages > limit:
        most = limit * page_size // MIB
        return (
            f"{name}={mib} MiB is more than 1/{divisor} of this node's RAM as the kernel counts it (MemTotal "
            f"{memtotal} kB: at most {most} MiB); the kernel refuses it ({where})"
        )
    return None

