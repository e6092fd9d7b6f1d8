"""Lustre targets: names, tunefs.lustre --dryrun, blkid, mkfs.lustre arguments.

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

* ``tunefs.lustre --dryrun``: ``print_ldd()`` in lustre/utils/mkfs_lustre.c
  (``Target:``/``Index:``/``Lustre FS:``/``Mount type:``/``Flags:``/
  ``Persistent mount opts:``/``Parameters:``) and the Lustre Operations Manual
  (tunefs.lustre, "Specifying NIDs and Failover").
* ``blkid -p -o export``: util-linux blkid(8), ``KEY=value`` lines; exit code 2
  means "nothing found" (and also "could not open the device"), 8 means
  "ambivalent probing result"; see probe_verdict().
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from .lustre_common import format_nid_groups, nid_groups_key, parse_nid_groups

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
class TargetOnDisk:
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


def parse_tunefs_dryrun(text: str) -> TargetOnDisk | None:
    """Parse ``tunefs.lustre --dryrun DEVICE`` output; None when it shows no target."""
    fields, words = _ldd_fields(_first_ldd_section(text))
    if "Target" not in fields:
        return None
    params = parse_ldd_params(fields.get("Parameters", ""))
    return TargetOnDisk(
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


# Exit codes of blkid (util-linux misc-utils/blkid.c, BLKID_EXIT_*). BLKID_EXIT_NOTFOUND (2) means
# "nothing found" but also: main() silently drops a path it cannot stat(), and lowprobe_device()
# returns it after open() fails (printing "error: DEVICE: <errno text>") or when the probe fails.
# So blkid alone never proves a device blank: wipefs (misc-utils/wipefs.c) lists every signature
# and exits 1 with "probing initialization failed" when it cannot open the device (new_probe()),
# 0 with an empty list when there is nothing. See blank_verdict().
BLKID_NOTHING_FOUND = 2
BLKID_AMBIVALENT = 8
BLANK = "blank"
CONTENT = "content"
UNKNOWN = "unknown"
CONFIRM = "confirm"  # blkid found nothing: run wipefs and ask again


def parse_wipefs_json(text: str) -> list[str]:
    """``wipefs --no-act --json DEVICE`` -> ``["ext4 at 0x438 (LABEL=data)", ...]``; ValueError if not that JSON."""
    data = json.loads(text) if text.strip() else {"signatures": []}
    if not isinstance(data, dict) or not isinstance(data.get("signatures"), list):
        raise ValueError("no signatures list")
    found = []
    for sig in data["signatures"]:
        label = f" (LABEL={sig['label']})" if sig.get("label") else ""
        found.append(f"{sig.get('type', '?')} at {sig.get('offset', '?')}{label}")
    return found


def blank_verdict(blkid: tuple[int, str, str], wipefs: tuple[int, str, str] | None) -> tuple[str, str]:
    """What the probes prove about a device: (BLANK, ""), (CONTENT, what), (UNKNOWN, why) or (CONFIRM, "").

    ``blkid`` is (rc, stdout, stderr) of ``blkid -p -o export DEVICE``; ``wipefs`` the same for
    ``wipefs --no-act --json DEVICE``, which is needed only when blkid found nothing: without it
    that case answers CONFIRM. Blank
    needs both: blkid found nothing without an error, and wipefs opened the device and listed no
    signature. Anything else is content or unknown, and unknown content is refused like content.
    """
    rc, out, err = blkid
    if rc == 0:
        signature = blkid_signature(parse_blkid_export(out))
        if signature:
            return CONTENT, signature
    elif rc == BLKID_AMBIVALENT:
        return CONTENT, "several signatures (blkid: ambivalent result; see wipefs -n)"
    if rc not in (0, BLKID_NOTHING_FOUND) or err.strip():
        detail = err.strip() or out.strip()
        return UNKNOWN, f"blkid -p exited {rc}" + (f": {detail}" if detail else "")
    if wipefs is None:
        return CONFIRM, ""
    wrc, wout, werr = wipefs
    if wrc != 0:
        return UNKNOWN, f"blkid found nothing, but wipefs could not probe it (exit {wrc}: {(werr or wout).strip()})"
    try:
        signatures = parse_wipefs_json(wout)
    except ValueError:
        return UNKNOWN, f"wipefs --json printed something else: {wout.strip()[:200]}"
    if signatures:
        return CONTENT, "signatures " + ", ".join(signatures) + " (wipefs)"
    return BLANK, ""


def device_type_problem(name: str, path: str, kind: str, allow_file: bool, what: str = "device") -> str | None:
    """Why ``path`` (of ``kind`` block/file/missing/other) cannot hold target ``name``; None when it can.

    ldiskfs targets and ZFS vdevs must be block devices. A regular file is accepted only with
    ``allow_file`` (test labs: mkfs.lustre and zpool attach files themselves).
    """
    if kind == "block":
        return None
    if kind == "missing":
        return f"{what} {path} for {name} does not exist; refusing to continue. Check the inventory's device path"
    if kind == "file" and allow_file:
        return None
    if kind == "file":
        return (
            f"refusing to use {path} for {name}: it is a regular file, not a block device. Give the {what}'s "
            "block device (e.g. /dev/disk/by-id/...) in the inventory; for a file-backed test target "
            "set allow_file_device: true on the module (module_defaults for kiln.cluster.lustre_target)"
        )
    return f"refusing to use {path} for {name}: it is {kind}, not a block device. Give the {what}'s block device"


def unknown_content_message(spec: TargetSpec, path: str, why: str, hint_var: str = "kiln_lustre_reformat") -> str:
    """The data-safety error when a device's content cannot be established."""
    return (
        f"refusing to format {spec.name} on {path}: cannot prove the device is blank: {why}. "
        f"Check that {path} is the intended device and readable (ls -l {path}; blkid -p {path}); "
        f'if its content is disposable whatever it is, add "{spec.name}" to {hint_var} (the module\'s reformat list)'
    )


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


# mkfs.lustre's own limits, the same at v2_15_0 and v2_16_0 (kiln/knowledge/lustre_params.yaml mkfs_limits cites
# each): parse_opts() in lustre/utils/mkfs_lustre.c takes --index below INDEX_UNASSIGNED (0xFFFF) and copies
# --mkfsoptions into mo_mkfsopts[512] (mount_utils.h), cutting longer text; append_param() in
# lustre/utils/mount_utils.c gathers every --mgsnode (or --servicenode) into one value of at most 1023 characters
# and add_param() all of them into ldd_params[4096]; ldiskfs_make_lustre() in libmount_utils_ldiskfs.c refuses
# more than one -E inside --mkfsoptions.
MKFS_INDEX_MAX = 0xFFFE
MKFS_OPTIONS_MAX = 511
MKFS_NID_VALUE_MAX = 1023
MKFS_PARAMS_MAX = 4095
_EXTENDED_RE = re.compile(r"(?:^|\s)-E\s*(\S+)")


def mkfs_option_problems(options: list[str], backend: str = "ldiskfs") -> list[str]:
    """Problems mkfs.lustre would have with these extra words, as sentences (empty when it takes them)."""
    errors: list[str] = []
    given = [o for o in options if o.startswith("--mkfsoptions=")]
    if len(given) > 1:
        errors.append("more than one --mkfsoptions: mkfs.lustre keeps only the last; put all options in one")
    for option in given:
        text = option.split("=", 1)[1]
        if len(text) > MKFS_OPTIONS_MAX:
            errors.append(f"--mkfsoptions is {len(text)} characters; mkfs.lustre keeps {MKFS_OPTIONS_MAX}")
        if backend != "ldiskfs":
            continue
        extended = _EXTENDED_RE.findall(text)
        if len(extended) > 1:
            errors.append("more than one -E in --mkfsoptions (ldiskfs_make_lustre refuses it); join them with ','")
        for words in extended:
            errors.extend(_raid_geometry_problems(dict(w.partition("=")[::2] for w in words.split(","))))
    return errors


def _raid_geometry_problems(extended: dict[str, str]) -> list[str]:
    numbers = {k: extended[k] for k in ("stride", "stripe_width", "stripe-width") if k in extended}
    bad = [f"{k}={v}" for k, v in numbers.items() if not (v.isdigit() and int(v) >= 1)]
    if bad:
        return [f"-E {', '.join(bad)}: mke2fs takes a positive block count"]
    stride, width = numbers.get("stride"), numbers.get("stripe_width", numbers.get("stripe-width"))
    if stride and width and int(width) % int(stride):
        return [f"-E stripe_width={width} is not a multiple of stride={stride} (data drives × stride)"]
    return []


def mkfs_param_problems(mgsnode: list[list[str]], servicenode: list[list[str]]) -> list[str]:
    """NID lists too long for the target's stored parameters (append_param/add_param in mount_utils.c)."""
    errors = []
    total = 0
    for key, groups in ((PARAM_MGSNODE, mgsnode), (PARAM_FAILNODE, servicenode)):
        if not groups:
            continue
        value = ":".join(",".join(group) for group in groups)
        if len(value) > MKFS_NID_VALUE_MAX:
            errors.append(f"{key}= would be {len(value)} characters; mkfs.lustre keeps at most {MKFS_NID_VALUE_MAX}")
        total += 2 + len(key) + len(value)
    if total > MKFS_PARAMS_MAX:
        errors.append(f"the NID parameters take {total} characters; a target stores at most {MKFS_PARAMS_MAX}")
    return errors


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
    errors.extend(draid_problems(spec.vdevs))
    errors.extend(mkfs_option_problems(spec.mkfs_options, spec.backend))
    errors.extend(mkfs_param_problems(spec.mgsnode, spec.servicenode))
    return errors


def _validate_identity(spec: TargetSpec) -> list[str]:
    errors: list[str] = []
    if spec.kind != "mgt":
        if not _FSNAME_RE.match(spec.fsname or ""):
            errors.append(f"fsname {spec.fsname!r} must be 1-8 characters of [A-Za-z0-9_-]")
        if spec.index is None or not 0 <= spec.index <= MKFS_INDEX_MAX:
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


def build_tunefs_update_command(tunefs: str, spec: TargetSpec, current: TargetOnDisk) -> list[str]:
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


def target_identity_mismatch(current: TargetOnDisk, spec: TargetSpec) -> list[str]:
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


def target_param_drift(current: TargetOnDisk, spec: TargetSpec) -> list[dict[str, Any]]:
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


def describe_target(target: TargetOnDisk) -> str:
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


# A dRAID vdev word, zpoolconcepts(7): draid[<parity>][:<data>d][:<children>c][:<spares>s]. draid_config_by_type()
# in OpenZFS cmd/zpool/zpool_vdev.c takes parity 1..3 (VDEV_DRAID_MAXPARITY), requires <children> to equal the
# devices listed, data >= 1 and data + parity <= children - spares, and at most 100 spares.
_DRAID_RE = re.compile(r"^draid(?P<parity>[0-9]*)(?P<rest>(?::[0-9]+[cdsCDS])*)$")
DRAID_MAX_PARITY = 3
DRAID_MAX_SPARES = 100
ASHIFT_RANGE = (9, 16)  # ASHIFT_MIN, ASHIFT_MAX in OpenZFS include/sys/spa.h
MD_LEVELS = ("raid1", "raid5", "raid6", "raid10")
_MD_MIN_MEMBERS = {"raid1": 2, "raid5": 3, "raid6": 4, "raid10": 2}  # mdadm(8) --level, md(4)


def is_vdev_keyword(word: str) -> bool:
    """True for a zpool vdev type word (``mirror``, ``raidz2``, ``draid2:6d:8c:0s`` ...), not a device."""
    return word in ZFS_VDEV_KEYWORDS or bool(_DRAID_RE.match(word))


def zfs_vdev_paths(vdevs: list[str]) -> list[str]:
    """The device paths among mkfs.lustre's ZFS vdev words (``mirror``, ``raidz2``, ``draid…`` dropped)."""
    return [vdev for vdev in vdevs if not is_vdev_keyword(vdev)]


def draid_problems(vdevs: list[str]) -> list[str]:
    """Problems zpool create would have with the dRAID words among ``vdevs`` (draid_config_by_type's rules)."""
    errors = []
    for position, word in enumerate(vdevs):
        match = _DRAID_RE.match(word)
        if not match:
            continue
        children = 0
        for later in vdevs[position + 1 :]:
            if is_vdev_keyword(later):
                break
            children += 1
        parity = int(match.group("parity") or 1)
        fields = {part[-1].lower(): int(part[:-1]) for part in match.group("rest").split(":")[1:]}
        spares = fields.get("s", 0)
        data = fields.get("d", min(children - spares - parity, 8))
        if not 1 <= parity <= DRAID_MAX_PARITY:
            errors.append(f"{word}: dRAID parity must be 1..{DRAID_MAX_PARITY}")
        if "c" in fields and fields["c"] != children:
            errors.append(f"{word}: names {fields['c']} children but {children} devices follow it")
        if data < 1 or data + parity > children - spares:
            errors.append(f"{word}: {data} data + {parity} parity do not fit {children} children less {spares} spares")
        if spares > DRAID_MAX_SPARES:
            errors.append(f"{word}: at most {DRAID_MAX_SPARES} distributed spares")
    return errors


def build_zpool_create_command(zpool: str, spec: TargetSpec, ashift: int) -> list[str]:
    """argv creating the target's pool with the pool properties mkfs.lustre cannot pass.

    mkfs.lustre creates a missing pool as ``zpool create -f -O canmount=off POOL VDEVS`` and gives --mkfsoptions to
    ``zfs create`` only (zfs_make_lustre() in lustre/utils/libmount_utils_zfs.c), so ashift must be set here:
    ``zpool create -o ashift=12 -o multihost=on -o cachefile=none -O canmount=off POOL VDEVS`` (no -f: zpool's own
    check of the vdevs stays on). mkfs.lustre then finds the pool and only creates the dataset.
    """
    pool = spec.device.split("/", 1)[0]
    return [
        zpool, "create", "-o", f"ashift={ashift}", "-o", "multihost=on", "-o", "cachefile=none",
        "-O", "canmount=off", pool, *spec.vdevs,
    ]  # fmt: skip


def md_problems(level: str, members: list[str], chunk_KiB: int) -> list[str]:
    """Problems with an md array to create for a target (mdadm(8) --create)."""
    errors = []
    if level not in MD_LEVELS:
        errors.append(f"md_level must be one of {', '.join(MD_LEVELS)}, not {level!r}")
    elif len(members) < _MD_MIN_MEMBERS[level]:
        errors.append(f"{level} needs at least {_MD_MIN_MEMBERS[level]} member devices, got {len(members)}")
    relative = [m for m in members if not m.startswith("/")]
    if relative:
        errors.append(f"md members must be absolute device paths: {', '.join(relative)}")
    if len(set(members)) != len(members):
        errors.append("md members are listed more than once")
    if chunk_KiB and (chunk_KiB < 4 or chunk_KiB & (chunk_KiB - 1)):
        errors.append(f"md chunk {chunk_KiB} KiB: mdadm --chunk takes a power of two of at least 4 KiB")
    return errors


def build_mdadm_create_command(mdadm: str, device: str, level: str, members: list[str], chunk_KiB: int) -> list[str]:
    """argv for ``mdadm --create`` of a target's array (metadata 1.2; no chunk for raid1).

    The array is named after its device (``--name``) with no homehost (``--homehost=<none>``): mdadm records
    ``<homehost>:<name>`` in a 1.x superblock by default, and a host whose name differs treats the array as foreign
    and assembles it under another name (``/dev/md/<name>_0``; mdadm.conf(5) HOMEHOST, mdadm(8) --homehost), so the
    failover partner would not find it where the plan and ocf:heartbeat:mdraid's md_dev say.
    """
    name = device.rstrip("/").rsplit("/", 1)[-1]
    cmd = [mdadm, "--create", device, "--run", "--metadata=1.2", "--homehost=<none>", f"--name={name}",
           f"--level={level}", f"--raid-devices={len(members)}"]
    if chunk_KiB and level != "raid1":
        cmd.append(f"--chunk={chunk_KiB}")
    return [*cmd, *members]


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


def target_state(device: str, target: TargetOnDisk) -> dict[str, Any]:
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
