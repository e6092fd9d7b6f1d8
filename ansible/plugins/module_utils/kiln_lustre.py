"""Pure helpers shared by kiln's Lustre Ansible modules.

Everything here is a pure function of its arguments: parsers for the text that
Lustre and util-linux tools print, value normalisation, comparison, and
builders for the command lines the modules run. Nothing here runs a command or
touches a file, so it is unit-tested on fixtures (tests/unit/ansible_modules).

Formats parsed here, and where each is documented:

* ``tunefs.lustre --dryrun``: ``print_ldd()`` in lustre/utils/mkfs_lustre.c
  (``Target:``/``Index:``/``Lustre FS:``/``Mount type:``/``Flags:``/
  ``Persistent mount opts:``/``Parameters:``) and the Lustre Operations Manual
  (tunefs.lustre, "Specifying NIDs and Failover").
* ``blkid -p -o export``: util-linux blkid(8), ``KEY=value`` lines; exit code 2
  means "nothing found", 8 means "ambivalent probing result".
* ``lctl get_param NAME``: one ``full.name=value`` line per matching device
  (manual, "Reporting Current Parameter Values").
* ``lctl --device MGS llog_print LOG``: one YAML flow mapping per record,
  ``- { index: 2, event: set_param, device: general, parameter: P, value: V }``
  (manual, "Listing Persistent Parameters"; class_config_yaml_output()).
* ``lfs getstripe -d [--yaml] DIR``: lov_dump_user_lmm_header() and
  lov_dump_comp_v1_entry() in lustre/utils/liblustreapi.c.

The module side runs on managed nodes, so this file keeps to Python 3.9 at
runtime (builtin generics appear only in annotations).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
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

_NID_RE = re.compile(r"^(?P<addr>.+)@(?P<lnd>[a-z][a-z0-9]*?)(?P<num>\d*)$")


def normalize_nid(nid: str) -> str:
    """Canonical NID text: network number 0 is dropped (``o2ib0`` -> ``o2ib``).

    libcfs_nid2str() prints network 0 without its number, so ``tunefs.lustre``
    shows ``10.0.0.1@o2ib`` for a target formatted with ``10.0.0.1@o2ib0``.
    """
    text = nid.strip()
    match = _NID_RE.match(text)
    if not match:
        return text
    num = match.group("num")
    if num and int(num) == 0:
        num = ""
    return f"{match.group('addr')}@{match.group('lnd')}{num}"


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
# Targets: names, tunefs.lustre --dryrun, blkid
# --------------------------------------------------------------------------

TARGET_KINDS = ("mgt", "mdt", "ost")
BACKENDS = ("ldiskfs", "zfs")
LDD_F_SV_TYPE_MDT = 0x0001
LDD_F_SV_TYPE_OST = 0x0002
LDD_F_SV_TYPE_MGS = 0x0004
LDD_F_NO_PRIMNODE = 0x1000
PARAM_MGSNODE = "mgsnode"
PARAM_FAILNODE = "failover.node"
_FSNAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,8}$")
_SVNAME_RE = re.compile(r"^(?P<fs>.+)[-:=+](?P<tgt>(?:MDT|OST)[0-9a-fA-F]{4})$")
_SECTION_RE = re.compile(r"^\s*(Read previous values|Permanent disk data):\s*$")
ZFS_VDEV_KEYWORDS = frozenset(
    {"mirror", "raidz", "raidz1", "raidz2", "raidz3", "draid", "spare", "log", "cache", "special", "dedup"}
)


def target_name(kind: str, fsname: str, index: int | None) -> str:
    """Lustre's own name for a target: ``MGS``, ``lab-MDT0000``, ``lab-OST000a`` (index in hex)."""
    if kind == "mgt":
        return "MGS"
    if index is None:
        raise ValueError(f"{kind} needs an index")
    return f"{fsname}-{kind.upper()}{index:04x}"


def normalize_target_name(svname: str) -> str:
    """``lab:OST0003`` (never registered), ``lab=OST0003`` (writeconf), ``lab+...`` -> ``lab-OST0003``."""
    text = svname.strip()
    match = _SVNAME_RE.match(text)
    if not match:
        return text
    return f"{match.group('fs')}-{match.group('tgt')}"


@dataclass
class LustreTarget:
    """What ``tunefs.lustre --dryrun`` says is on a device."""

    name: str
    index: int | None
    fsname: str
    mount_type: str
    flags: int
    flag_words: list[str]
    mount_opts: str
    params: dict[str, str]
    mgsnode: list[list[str]] = field(default_factory=list)
    servicenode: list[list[str]] = field(default_factory=list)

    @property
    def kinds(self) -> list[str]:
        kinds = []
        if self.flags & LDD_F_SV_TYPE_MGS:
            kinds.append("mgt")
        if self.flags & LDD_F_SV_TYPE_MDT:
            kinds.append("mdt")
        if self.flags & LDD_F_SV_TYPE_OST:
            kinds.append("ost")
        return kinds

    @property
    def no_primnode(self) -> bool:
        return bool(self.flags & LDD_F_NO_PRIMNODE)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kinds"] = self.kinds
        data["no_primnode"] = self.no_primnode
        return data


def parse_ldd_params(text: str) -> dict[str, str]:
    """`` mgsnode=a:b failover.node=c sys.timeout=40`` -> dict; repeated keys are joined with ``:``.

    Older tunefs.lustre wrote one ``failover.node=`` per --failnode; newer ones
    append to one key with ``:``. Both read the same here.
    """
    params: dict[str, str] = {}
    for token in text.split():
        if "=" not in token:
            continue
        key, value = token.split("=", 1)
        params[key] = f"{params[key]}:{value}" if key in params else value
    return params


def _first_ldd_section(text: str) -> list[str]:
    """Lines of the first print_ldd() block ("Read previous values" if present)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _SECTION_RE.match(line)]
    if not starts:
        return lines
    end = starts[1] if len(starts) > 1 else len(lines)
    return lines[starts[0] + 1 : end]


def _ldd_fields(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    fields: dict[str, str] = {}
    words: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("(") and stripped.endswith(")") and "Flags" in fields and not words:
            words = stripped[1:-1].split()
            continue
        if ":" not in line or line.startswith(" "):
            continue
        key, value = line.split(":", 1)
        fields.setdefault(key.strip(), value.strip() if key.strip() != "Parameters" else value)
    return fields, words


def _parse_index(text: str) -> int | None:
    text = text.strip()
    if not text or text == "unassigned":
        return None
    return int(text, 0)


def parse_tunefs_dryrun(text: str) -> LustreTarget | None:
    """Parse ``tunefs.lustre --dryrun DEVICE`` output; None when it shows no target."""
    fields, words = _ldd_fields(_first_ldd_section(text))
    if "Target" not in fields:
        return None
    params = parse_ldd_params(fields.get("Parameters", ""))
    return LustreTarget(
        name=normalize_target_name(fields["Target"]),
        index=_parse_index(fields.get("Index", "")),
        fsname=fields.get("Lustre FS", ""),
        mount_type=fields.get("Mount type", ""),
        flags=int(fields.get("Flags", "0"), 0),
        flag_words=words,
        mount_opts=fields.get("Persistent mount opts", ""),
        params=params,
        mgsnode=parse_nid_groups(params.get(PARAM_MGSNODE, "")),
        servicenode=parse_nid_groups(params.get(PARAM_FAILNODE, "")),
    )


def tunefs_says_not_lustre(rc: int, output: str) -> bool:
    """True when tunefs.lustre failed because the device holds no Lustre target (ENODEV)."""
    return rc == 19 or "has not been formatted with mkfs.lustre" in output


def parse_blkid_export(text: str) -> dict[str, str]:
    """``blkid -p -o export`` lines -> dict (backslash escapes undone)."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        if "=" not in line:
            continue
        key, value = line.split("=", 1)
        props[key.strip()] = re.sub(r"\\(.)", r"\1", value.strip())
    return props


def blkid_signature(props: dict[str, str]) -> str | None:
    """``TYPE=ext4 LABEL=data`` when the probe found a filesystem or partition table, else None.

    Only TYPE and PTTYPE count as a signature: blkid also prints PART_ENTRY_* for
    a blank partition, which is not content.
    """
    if "TYPE" not in props and "PTTYPE" not in props:
        return None
    return " ".join(f"{key}={props[key]}" for key in ("TYPE", "PTTYPE", "LABEL") if key in props)


BLKID_NOTHING_FOUND = 2
BLKID_AMBIVALENT = 8


@dataclass
class TargetSpec:
    """The target the planner wants on a device."""

    name: str
    kind: str
    fsname: str
    index: int | None
    device: str
    backend: str = "ldiskfs"
    vdevs: list[str] = field(default_factory=list)
    mgsnode: list[list[str]] = field(default_factory=list)
    servicenode: list[list[str]] = field(default_factory=list)
    mkfs_options: list[str] = field(default_factory=list)
    with_mgs: bool = False


def validate_target_spec(spec: TargetSpec) -> list[str]:
    """Problems with the arguments, as sentences; empty when the spec is usable."""
    errors: list[str] = []
    if spec.kind not in TARGET_KINDS:
        return [f"kind must be one of {', '.join(TARGET_KINDS)}, not {spec.kind!r}"]
    if spec.backend not in BACKENDS:
        errors.append(f"backend must be one of {', '.join(BACKENDS)}, not {spec.backend!r}")
    errors.extend(_validate_identity(spec))
    errors.extend(_validate_nids(spec))
    errors.extend(_validate_backend_device(spec))
    return errors


def _validate_identity(spec: TargetSpec) -> list[str]:
    errors: list[str] = []
    if spec.kind != "mgt":
        if not _FSNAME_RE.match(spec.fsname or ""):
            errors.append(f"fsname {spec.fsname!r} must be 1-8 characters of [A-Za-z0-9_-]")
        if spec.index is None or not 0 <= spec.index < 0xFFFF:
            errors.append(f"{spec.kind} needs an index between 0 and 65534, got {spec.index!r}")
            return errors
    if spec.with_mgs and spec.kind != "mdt":
        errors.append("with_mgs is only for an MDT that shares its device with the MGS")
    if not errors:
        expected = target_name(spec.kind, spec.fsname, spec.index)
        if spec.name != expected:
            errors.append(f"name {spec.name!r} does not match kind/fsname/index, which make {expected!r}")
    return errors


def _validate_nids(spec: TargetSpec) -> list[str]:
    errors: list[str] = []
    if spec.kind == "mgt" and spec.mgsnode:
        errors.append("an MGT takes no mgsnode; give its failover partners as servicenode")
    if spec.kind != "mgt" and not spec.with_mgs and not spec.mgsnode:
        errors.append(f"{spec.kind} {spec.name} needs mgsnode (one NID list per MGS node)")
    for group in spec.mgsnode + spec.servicenode:
        bad = [nid for nid in group if "@" not in nid]
        if bad:
            errors.append(f"not a NID (address@network): {', '.join(bad)}")
    return errors


def _validate_backend_device(spec: TargetSpec) -> list[str]:
    if spec.backend == "zfs":
        errors = []
        if "/" not in spec.device or spec.device.startswith("/"):
            errors.append(f"for backend zfs, device is pool/dataset, not {spec.device!r}")
        relative = [vdev for vdev in zfs_vdev_paths(spec.vdevs) if not vdev.startswith("/")]
        if relative:
            errors.append(
                f"vdevs must be absolute device paths (or {'/'.join(sorted(ZFS_VDEV_KEYWORDS))}): {', '.join(relative)}"
            )
        return errors
    if spec.vdevs:
        return ["vdevs are only for backend zfs"]
    return []


def build_mkfs_command(mkfs: str, spec: TargetSpec, reformat: bool) -> list[str]:
    """argv for mkfs.lustre. ``--reformat`` only when ``reformat`` (an allowed reformat)."""
    cmd = [mkfs]
    if spec.kind == "mgt":
        cmd.append("--mgs")
    else:
        cmd.append(f"--fsname={spec.fsname}")
        if spec.with_mgs:
            cmd.append("--mgs")
        cmd.append(f"--{spec.kind}")
        cmd.append(f"--index={spec.index}")
    cmd.extend(f"--mgsnode={','.join(group)}" for group in spec.mgsnode)
    cmd.extend(f"--servicenode={','.join(group)}" for group in spec.servicenode)
    cmd.append(f"--backfstype={spec.backend}")
    if reformat:
        cmd.append("--reformat")
    cmd.extend(spec.mkfs_options)
    cmd.append(spec.device)
    cmd.extend(spec.vdevs)
    return cmd


def build_tunefs_update_command(tunefs: str, spec: TargetSpec, current: LustreTarget) -> list[str]:
    """argv that rewrites a target's NID parameters and keeps its other parameters.

    ``--erase-params`` drops every stored parameter, so the ones kiln does not
    manage (e.g. ``sys.timeout``) are written back with ``--param``.
    """
    cmd = [tunefs, "--erase-params"]
    cmd.extend(f"--mgsnode={','.join(group)}" for group in spec.mgsnode)
    cmd.extend(f"--servicenode={','.join(group)}" for group in spec.servicenode)
    for key, value in current.params.items():
        if key not in (PARAM_MGSNODE, PARAM_FAILNODE):
            cmd.append(f"--param={key}={value}")
    cmd.append(spec.device)
    return cmd


def target_identity_mismatch(current: LustreTarget, spec: TargetSpec) -> list[str]:
    """Why ``current`` is not the target ``spec`` wants; empty when it is."""
    reasons: list[str] = []
    if current.name != spec.name:
        reasons.append(f"target name {current.name} (wanted {spec.name})")
    kinds = current.kinds
    if spec.kind not in kinds:
        reasons.append(f"kind {'+'.join(kinds) or 'unknown'} (wanted {spec.kind})")
    if spec.with_mgs and "mgt" not in kinds:
        reasons.append("no co-located MGS (wanted with_mgs)")
    if spec.kind != "mgt":
        if current.fsname != spec.fsname:
            reasons.append(f"fsname {current.fsname} (wanted {spec.fsname})")
        if current.index != spec.index:
            reasons.append(f"index {current.index} (wanted {spec.index})")
    if not current.mount_type.startswith(spec.backend):
        reasons.append(f"backend {current.mount_type} (wanted {spec.backend})")
    return reasons


def target_param_drift(current: LustreTarget, spec: TargetSpec) -> list[dict[str, Any]]:
    """Stored NID parameters that differ from the spec, as {field, current, wanted}."""
    drift: list[dict[str, Any]] = []
    pairs = (
        ("mgsnode", current.mgsnode, spec.mgsnode),
        ("servicenode", current.servicenode, spec.servicenode),
    )
    for name, have, want in pairs:
        if nid_groups_key(have) != nid_groups_key(want):
            drift.append({"field": name, "current": format_nid_groups(have), "wanted": format_nid_groups(want)})
    if spec.servicenode and current.servicenode and not current.no_primnode:
        drift.append({"field": "no_primnode", "current": False, "wanted": True})
    return drift


def describe_target(target: LustreTarget) -> str:
    """One line for messages: ``Lustre target lab-OST0001 (fsname lab, index 1, ldiskfs)``."""
    return (
        f"Lustre target {target.name} (fsname {target.fsname or '-'}, "
        f"index {'-' if target.index is None else target.index}, {target.mount_type})"
    )


def refusal_message(spec: TargetSpec, found: str, hint_var: str = "kiln_lustre_reformat") -> str:
    """The data-safety error: which target, which device, what is there, and how to proceed."""
    return (
        f"refusing to format {spec.name} on {spec.device}: the device already holds {found}. "
        f'If that content is disposable, add "{spec.name}" to {hint_var} (the module\'s reformat list) '
        "to allow reformatting this device; this destroys its data"
    )


def zfs_vdev_paths(vdevs: list[str]) -> list[str]:
    """The device paths among mkfs.lustre's ZFS vdev words (``mirror``, ``raidz2`` ... dropped)."""
    return [vdev for vdev in vdevs if vdev not in ZFS_VDEV_KEYWORDS]


def render_target_state(state: dict[str, Any]) -> str:
    """Stable ``key: value`` text of a target state, for Ansible's --diff."""
    return "".join(f"{key}: {state[key]}\n" for key in sorted(state) if state[key] not in (None, "", []))


def spec_state(spec: TargetSpec) -> dict[str, Any]:
    kind = "mdt+mgt" if spec.with_mgs else spec.kind
    return {
        "device": spec.device,
        "target": spec.name,
        "kind": kind,
        "fsname": spec.fsname if spec.kind != "mgt" else None,
        "index": spec.index if spec.kind != "mgt" else None,
        "backend": spec.backend,
        "mgsnode": format_nid_groups(spec.mgsnode),
        "servicenode": format_nid_groups(spec.servicenode),
    }


def target_state(device: str, target: LustreTarget) -> dict[str, Any]:
    kinds = target.kinds
    kind = "mdt+mgt" if kinds == ["mgt", "mdt"] else "+".join(kinds)
    is_mgt_only = kinds == ["mgt"]
    return {
        "device": device,
        "target": target.name,
        "kind": kind,
        "fsname": None if is_mgt_only else target.fsname,
        "index": None if is_mgt_only else target.index,
        "backend": target.mount_type,
        "mgsnode": format_nid_groups(target.mgsnode),
        "servicenode": format_nid_groups(target.servicenode),
    }


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
    """``lctl --device MGS llog_print LOG`` -> list of records (dicts of strings)."""
    records = []
    for line in text.splitlines():
        match = _LLOG_RECORD.match(line)
        if match:
            records.append({key: value.strip() for key, value in _LLOG_FIELD.findall(match.group("body"))})
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
# Layouts: lfs getstripe -d, lfs setstripe
# --------------------------------------------------------------------------

STRIPE_SIZE_GRANULE = 64 * KIB
_GETSTRIPE_TOKEN = re.compile(r"([A-Za-z_][\w.]*):[ \t]*(\S*)")
_STRIPE_KEYS = ("stripe_count", "stripe_size", "pattern", "pool", "stripe_offset")


@dataclass
class LayoutComponent:
    """One component of a directory default layout. ``extent_end`` None means EOF."""

    extent_end: int | None
    stripe_count: int | None = None
    stripe_size: int | None = None
    overstripe_count: int | None = None
    pool: str | None = None
    dom: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["extent_end"] = "EOF" if self.extent_end is None else format_size(self.extent_end)
        data["stripe_size"] = None if self.stripe_size is None else format_size(self.stripe_size)
        return data


def _parse_extent_end(value: Any) -> int | None:
    if isinstance(value, str) and value.strip().lower() in ("eof", "-1"):
        return None
    if value == -1:
        return None
    return parse_size(value)


def _optional_int(raw: dict[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{key} must be an integer, not {value!r}")
    return int(value)


def layout_from_spec(raw: list[dict[str, Any]]) -> list[LayoutComponent]:
    """The module's ``layout`` argument -> components (sizes in bytes, EOF as None).

    The planner's inventory repeats an overstriped component's count in ``stripe_count``;
    an equal ``stripe_count`` is dropped so only ``overstripe_count`` remains.
    """
    components = []
    for entry in raw:
        size = entry.get("stripe_size")
        count = _optional_int(entry, "stripe_count")
        over = _optional_int(entry, "overstripe_count")
        components.append(
            LayoutComponent(
                extent_end=_parse_extent_end(entry.get("extent_end", "EOF")),
                stripe_count=None if over is not None and count == over else count,
                stripe_size=None if size in (None, "") else parse_size(size),
                overstripe_count=over,
                pool=entry.get("pool") or None,
                dom=bool(entry.get("dom", False)),
            )
        )
    return components


def validate_layout(components: list[LayoutComponent]) -> list[str]:
    """Problems with a wanted layout, as sentences; empty when ``lfs setstripe`` can take it."""
    if not components:
        return ["layout needs at least one component"]
    errors: list[str] = []
    previous_end = 0
    for position, comp in enumerate(components):
        label = f"component {position}"
        last = position == len(components) - 1
        if last and comp.extent_end is not None:
            errors.append(f"{label}: the last component must end at EOF")
        if not last and comp.extent_end is None:
            errors.append(f"{label}: only the last component may end at EOF")
        if comp.extent_end is not None:
            if comp.extent_end <= previous_end:
                errors.append(f"{label}: extent_end {format_size(comp.extent_end)} must grow")
            if comp.extent_end % STRIPE_SIZE_GRANULE:
                errors.append(f"{label}: extent_end must be a multiple of 64K")
            previous_end = comp.extent_end
        errors.extend(_validate_component(label, position, comp))
    return errors


def _validate_component(label: str, position: int, comp: LayoutComponent) -> list[str]:
    if comp.dom:
        errors = [] if position == 0 else [f"{label}: only the first component can be Data-on-MDT"]
        if comp.stripe_count not in (None, 0) or comp.overstripe_count is not None or comp.pool:
            errors.append(f"{label}: a Data-on-MDT component takes no stripe_count, overstripe_count or pool")
        if comp.stripe_size is not None and comp.stripe_size != comp.extent_end:
            errors.append(f"{label}: a Data-on-MDT component's size is its extent_end; leave stripe_size unset")
        return errors
    errors = []
    if comp.stripe_count is not None and comp.overstripe_count is not None:
        errors.append(f"{label}: give stripe_count or overstripe_count, not both")
    if comp.stripe_count is not None and comp.stripe_count < -1:
        errors.append(f"{label}: stripe_count must be -1 (all OSTs) or more")
    if comp.overstripe_count is not None and (comp.overstripe_count == 0 or comp.overstripe_count < -1):
        errors.append(f"{label}: overstripe_count must be -1 or at least 1")
    if comp.stripe_size is not None:
        if comp.stripe_size <= 0 or comp.stripe_size % STRIPE_SIZE_GRANULE:
            errors.append(f"{label}: stripe_size must be a positive multiple of 64K")
        elif comp.extent_end is not None and comp.extent_end % comp.stripe_size:
            errors.append(f"{label}: extent_end must be a multiple of its stripe_size")
    return errors


def build_setstripe_args(components: list[LayoutComponent]) -> list[str]:
    """``lfs setstripe`` options for a layout (without the path).

    One EOF component without DoM is a plain layout (no ``-E``); anything else
    is composite: ``-E 64M -c 1 -S 1M -E -1 -c -1 -S 4M``, DoM ``-E 1M -L mdt``,
    overstriping ``-C n``, pool ``-p name``.
    """
    plain = len(components) == 1 and components[0].extent_end is None and not components[0].dom
    args: list[str] = []
    for comp in components:
        if not plain:
            args += ["-E", "-1" if comp.extent_end is None else format_size(comp.extent_end)]
        if comp.dom:
            args += ["-L", "mdt"]
            continue
        if comp.overstripe_count is not None:
            args += ["-C", str(comp.overstripe_count)]
        elif comp.stripe_count is not None:
            args += ["-c", str(comp.stripe_count)]
        if comp.stripe_size is not None:
            args += ["-S", format_size(comp.stripe_size)]
        if comp.pool:
            args += ["-p", comp.pool]
    return args


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens = []
    for key, value in _GETSTRIPE_TOKEN.findall(text):
        tokens.append((key[4:] if key.startswith("lmm_") else key, value))
    return tokens


def _component_from_fields(fields: dict[str, str], extent_end: int | None) -> LayoutComponent:
    pattern = fields.get("pattern", "raid0")
    count = int(fields["stripe_count"]) if "stripe_count" in fields else None
    size = int(fields["stripe_size"]) if "stripe_size" in fields else None
    if pattern.startswith("mdt"):
        return LayoutComponent(extent_end=extent_end, stripe_size=size, dom=True)
    overstriped = "overstriped" in pattern.split(",")
    return LayoutComponent(
        extent_end=extent_end,
        stripe_count=None if overstriped else count,
        stripe_size=size,
        overstripe_count=count if overstriped else None,
        pool=fields.get("pool") or None,
    )


def parse_getstripe(text: str) -> list[LayoutComponent] | None:
    """``lfs getstripe -d [--yaml] DIR`` -> components, or None when no default layout is shown.

    Reads the three documented shapes with one tokenizer: the one-line plain form
    (``stripe_count:  1 stripe_size:   1048576 pattern:       raid0 stripe_offset: -1``),
    the composite text form (``lcm_layout_gen:`` ... ``lcme_extent.e_end:``) and the
    ``--yaml`` form (``component0:`` ... ``sub_layout:``). A component runs from one
    ``lcme_extent.e_start`` to the next.
    """
    tokens = _tokens(text)
    if not any(key in _STRIPE_KEYS[:3] for key, _ in tokens):
        return None
    if not any(key == "lcme_extent.e_start" for key, _ in tokens):
        fields: dict[str, str] = {}
        for key, value in tokens:
            if key in _STRIPE_KEYS:
                fields.setdefault(key, value)
        return [_component_from_fields(fields, None)]
    return _parse_composite(tokens)


def _parse_composite(tokens: list[tuple[str, str]]) -> list[LayoutComponent]:
    components: list[LayoutComponent] = []
    fields: dict[str, str] | None = None
    end: int | None = None
    for key, value in tokens:
        if key == "lcme_extent.e_start":
            if fields is not None:
                components.append(_component_from_fields(fields, end))
            fields, end = {}, None
        elif key == "lcme_extent.e_end" and fields is not None:
            end = None if value == "EOF" else int(value)
        elif key in _STRIPE_KEYS and fields is not None:
            fields.setdefault(key, value)
    if fields is not None:
        components.append(_component_from_fields(fields, end))
    return components


def _component_drift(position: int, have: LayoutComponent, want: LayoutComponent) -> list[dict[str, Any]]:
    drift: list[dict[str, Any]] = []

    def add(field_name: str, current: Any, wanted: Any) -> None:
        drift.append({"component": position, "field": field_name, "current": current, "wanted": wanted})

    if have.extent_end != want.extent_end:
        add("extent_end", have.to_dict()["extent_end"], want.to_dict()["extent_end"])
    if have.dom != want.dom:
        add("dom", have.dom, want.dom)
    if want.dom or have.dom:
        return drift
    if have.overstripe_count != want.overstripe_count and (
        want.overstripe_count is not None or have.overstripe_count is not None
    ):
        add("overstripe_count", have.overstripe_count, want.overstripe_count)
    # stripe_count 0 is lfs's "filesystem default": the read-back shows the default, so skip it.
    count_wanted = want.overstripe_count is None and want.stripe_count not in (None, 0)
    if count_wanted and have.stripe_count != want.stripe_count:
        add("stripe_count", have.stripe_count, want.stripe_count)
    if want.stripe_size is not None and have.stripe_size != want.stripe_size:
        add("stripe_size", have.to_dict()["stripe_size"], want.to_dict()["stripe_size"])
    if (have.pool or None) != (want.pool or None):
        add("pool", have.pool, want.pool)
    return drift


def layout_drift(current: list[LayoutComponent] | None, wanted: list[LayoutComponent]) -> list[dict[str, Any]]:
    """What differs between the directory's default layout and the wanted one.

    Each entry is {component, field, current, wanted}. A wanted field left
    unset (stripe_count, stripe_size) is not compared, nor is stripe_count 0 (the
    filesystem default); pool unset means "no pool".
    """
    if current is None:
        return [{"component": None, "field": "layout", "current": None, "wanted": render_layout(wanted)}]
    drift: list[dict[str, Any]] = []
    if len(current) != len(wanted):
        drift.append({"component": None, "field": "components", "current": len(current), "wanted": len(wanted)})
    for position in range(min(len(current), len(wanted))):
        drift.extend(_component_drift(position, current[position], wanted[position]))
    return drift


def render_layout(components: list[LayoutComponent] | None) -> str:
    """One line per component, for --diff: ``[1M, EOF) raid0 count=-1 size=4M pool=flash``."""
    if components is None:
        return "(no default layout)\n"
    lines = []
    start = "0"
    for comp in components:
        end = "EOF" if comp.extent_end is None else format_size(comp.extent_end)
        lines.append(f"[{start}, {end}) {_render_component(comp)}")
        start = end
    return "\n".join(lines) + "\n"


def _render_component(comp: LayoutComponent) -> str:
    if comp.dom:
        return "mdt (Data-on-MDT)"
    parts = ["raid0,overstriped" if comp.overstripe_count is not None else "raid0"]
    count = comp.overstripe_count if comp.overstripe_count is not None else comp.stripe_count
    if count is not None:
        parts.append(f"count={count}")
    if comp.stripe_size is not None:
        parts.append(f"size={format_size(comp.stripe_size)}")
    if comp.pool:
        parts.append(f"pool={comp.pool}")
    return " ".join(parts)
