#!/usr/bin/python
"""Ansible module: ensure a Lustre target (MGT/MDT/OST) is formatted on a device."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: lustre_target
short_description: Ensure a Lustre MGT, MDT or OST is formatted on a device, and never clobber data
description:
  - Probes the device with C(tunefs.lustre --dryrun). If it already holds the wanted target
    (same name, kind, fsname, index and backend) nothing is formatted; stored NID parameters
    (mgsnode, servicenode) that differ are reported in C(drift) and the diff, and rewritten only
    when O(update_params=true).
  - The device (ldiskfs) or every vdev (zfs) must be a block device; a regular file is refused
    unless O(allow_file_device=true), any other kind of path always.
  - If the device holds anything else (a filesystem or partition table seen by
    C(blkid -p -o export), or another Lustre target), the module fails and names the target, the
    device and what it found, unless the exact target name is listed in O(reformat).
  - A device is taken as blank only when C(blkid -p) finds nothing without an error and
    C(wipefs --no-act --json) then opens the device and lists no signature, because blkid also exits 2
    ("nothing found") when it cannot open or even stat the device. Any other result leaves the
    content unknown, and unknown content is refused like existing content.
  - A blank device is formatted with C(mkfs.lustre). C(--reformat) is passed only when reformatting
    a device whose target name is in O(reformat); foreign signatures are first removed with C(wipefs -a).
  - After formatting, the device is probed again and the module fails unless it shows the wanted target.
  - With O(ashift) (zfs with O(vdevs)), a missing pool is created first with C(zpool create -o ashift=N -o
    multihost=on -o cachefile=none -O canmount=off POOL VDEVS), because mkfs.lustre creates pools without pool
    properties (zfs_make_lustre() in lustre/utils/libmount_utils_zfs.c); mkfs.lustre then only creates the
    dataset. dRAID words (C(draid2:6d:8c:0s)) are checked as OpenZFS draid_config_by_type() checks them.
  - With O(md_create=true) (ldiskfs), a missing O(device) is created as an md array with C(mdadm --create) from
    O(md_members) at O(md_level) and O(md_chunk_KiB), after every member passed the same blank-device proof as
    a target device (members with content are refused unless O(name) is in O(reformat), and then wiped).
  - In check mode nothing is run except the read-only probes.
version_added: "0.1.0"
author: Kiln maintainers (@kiln-hpc)
options:
  name:
    description:
      - Lustre's name of the target, e.g. C(lab-OST0003), C(lab-MDT0000) or C(MGS).
      - Must agree with O(kind), O(fsname) and O(index) (the index is hexadecimal in the name).
    type: str
    required: true
  kind:
    description: Target type.
    type: str
    required: true
    choices: [mgt, mdt, ost]
  fsname:
    description: Filesystem name (1-8 characters). Required for mdt and ost.
    type: str
    default: ""
  index:
    description: Target index (decimal). Required for mdt and ost.
    type: int
  device:
    description:
      - For ldiskfs, the block device (a regular file only with O(allow_file_device)).
      - For zfs, C(pool/dataset).
    type: str
    required: true
  backend:
    description: Backing filesystem, passed as C(--backfstype).
    type: str
    default: ldiskfs
    choices: [ldiskfs, zfs]
  vdevs:
    description:
      - For zfs, the vdev words that follow the dataset on the mkfs.lustre command line,
        e.g. C([mirror, /dev/sdb, /dev/sdc]). Empty when the pool exists. Each path must be a
        block device (a regular file only with O(allow_file_device)).
    type: list
    elements: str
    default: []
  with_mgs:
    description: For an MDT only, format it with a co-located MGS (C(--mgs --mdt)).
    type: bool
    default: false
  mgsnode:
    description:
      - One entry per MGS node; each entry is that node's NIDs (a list, or one comma-separated string).
      - Becomes one C(--mgsnode=) per node.
    type: list
    elements: raw
    default: []
  servicenode:
    description:
      - One entry per server that can serve this target (primary and failover); each entry is that
        node's NIDs. Becomes one C(--servicenode=) per node.
    type: list
    elements: raw
    default: []
  mkfs_options:
    description:
      - Extra mkfs.lustre arguments, one argv word each, e.g. C(--mkfsoptions=-E lazy_itable_init=0)
        or C(--param=sys.timeout=40). Not compared on existing targets.
    type: list
    elements: str
    default: []
  ashift:
    description:
      - zfs only; 0 leaves pool creation to mkfs.lustre (no pool properties). 9..16 (ASHIFT_MIN..ASHIFT_MAX in
        OpenZFS include/sys/spa.h) creates a missing pool from O(vdevs) with this ashift first.
    type: int
    default: 0
  md_create:
    description:
      - ldiskfs only. Create O(device) as an md array when it does not exist. Off by default; a role turns it
        on only for targets the operator names.
    type: bool
    default: false
  md_level:
    description: md RAID level for O(md_create) (raid1, raid5, raid6, raid10).
    type: str
    default: ""
  md_members:
    description: Member devices of the md array (absolute paths), in order.
    type: list
    elements: str
    default: []
  md_chunk_KiB:
    description: md chunk in KiB (C(mdadm --chunk)); 0 lets mdadm choose; not used for raid1.
    type: int
    default: 0
  mdadm:
    description: Path of mdadm; by default found on PATH.
    type: path
  reformat:
    description:
      - Target names the operator allows to be formatted over existing content.
        Only an exact match with O(name) counts.
      - Never causes a device that already holds the wanted target to be reformatted.
    type: list
    elements: str
    default: []
  allow_file_device:
    description:
      - Accept a regular file as the ldiskfs device or as a zfs vdev (mkfs.lustre and zpool attach
        files themselves). For test systems only; set it with C(module_defaults) in the play.
    type: bool
    default: false
  update_params:
    description:
      - Rewrite drifted mgsnode/servicenode with C(tunefs.lustre --erase-params); other stored
        parameters are written back with C(--param). The target must be unmounted.
    type: bool
    default: false
  mkfs_lustre:
    description: Path of mkfs.lustre; by default found on PATH, /sbin or /usr/sbin.
    type: path
  tunefs_lustre:
    description: Path of tunefs.lustre; by default found on PATH.
    type: path
  blkid:
    description: Path of blkid from util-linux; by default found on PATH.
    type: path
  wipefs:
    description: Path of wipefs from util-linux, used only for an allowed reformat; by default found on PATH.
    type: path
  zpool:
    description: Path of zpool, used for backend zfs without vdevs; by default found on PATH.
    type: path
  zfs:
    description: Path of zfs, used for backend zfs; by default found on PATH.
    type: path
notes:
  - Supports check mode and diff mode.
  - The data-safety rule lives in the module, not the role; roles pass O(reformat) from
    C(kiln_lustre_reformat).
"""

EXAMPLES = r"""
- name: Format OST 3 of lab (refuses if the device holds anything)
  lustre_target:
    name: lab-OST0003
    kind: ost
    fsname: lab
    index: 3
    device: /dev/disk/by-id/nvme-ost3
    mgsnode:
      - ["10.0.0.1@o2ib0", "10.0.1.1@o2ib0"]
      - ["10.0.0.2@o2ib0", "10.0.1.2@o2ib0"]
    servicenode:
      - ["10.0.0.11@o2ib0"]
      - ["10.0.0.12@o2ib0"]
    reformat: "{{ kiln_lustre_reformat | default([]) }}"

- name: Combined MGS/MDT on ZFS, pool created from a mirror
  lustre_target:
    name: lab-MDT0000
    kind: mdt
    with_mgs: true
    fsname: lab
    index: 0
    backend: zfs
    device: lab-mdt0/mdt0
    vdevs: [mirror, /dev/sdb, /dev/sdc]
"""

RETURN = r"""
operation:
  description:
    - What was done or, in check mode, would be done.
    - One of C(none), C(format), C(reformat), C(update_params).
  returned: always
  type: str
target:
  description:
    - The Lustre target the device held before the run, as parsed from tunefs.lustre --dryrun.
    - Null when none.
  returned: always
  type: dict
found:
  description: The foreign content that was found (e.g. C(TYPE=ext4 LABEL=data)), null when none.
  returned: always
  type: str
drift:
  description: Stored parameters that differ from the wanted ones, each C({field, current, wanted}).
  returned: always
  type: list
  elements: dict
commands:
  description: The commands run (or, in check mode, that would run), each an argv list.
  returned: always
  type: list
  elements: list
"""

import os
import stat
from dataclasses import replace
from typing import Any, NoReturn

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kiln.cluster.plugins.module_utils.lustre_common import coerce_nid_groups
from ansible_collections.kiln.cluster.plugins.module_utils.lustre_target import (
    ASHIFT_RANGE,
    CONFIRM,
    CONTENT,
    UNKNOWN,
    TargetOnDisk,
    TargetSpec,
    blank_verdict,
    build_mdadm_create_command,
    build_mkfs_command,
    build_tunefs_update_command,
    build_zpool_create_command,
    describe_target,
    device_type_problem,
    md_problems,
    parse_tunefs_dryrun,
    refusal_message,
    render_target_state,
    spec_state,
    target_identity_mismatch,
    target_param_drift,
    target_state,
    tunefs_says_not_lustre,
    unknown_content_message,
    validate_target_spec,
    zfs_vdev_paths,
)


ARGUMENT_SPEC: dict[str, Any] = {
    "name": {"type": "str", "required": True},
    "kind": {"type": "str", "required": True, "choices": ["mgt", "mdt", "ost"]},
    "fsname": {"type": "str", "default": ""},
    "index": {"type": "int"},
    "device": {"type": "str", "required": True},
    "backend": {"type": "str", "default": "ldiskfs", "choices": ["ldiskfs", "zfs"]},
    "vdevs": {"type": "list", "elements": "str", "default": []},
    "with_mgs": {"type": "bool", "default": False},
    "mgsnode": {"type": "list", "elements": "raw", "default": []},
    "servicenode": {"type": "list", "elements": "raw", "default": []},
    "mkfs_options": {"type": "list", "elements": "str", "default": []},
    "reformat": {"type": "list", "elements": "str", "default": []},
    "update_params": {"type": "bool", "default": False},
    "allow_file_device": {"type": "bool", "default": False},
    "mkfs_lustre": {"type": "path"},
    "tunefs_lustre": {"type": "path"},
    "blkid": {"type": "path"},
    "wipefs": {"type": "path"},
    "zpool": {"type": "path"},
    "zfs": {"type": "path"},
    "ashift": {"type": "int", "default": 0},
    "md_create": {"type": "bool", "default": False},
    "md_level": {"type": "str", "default": ""},
    "md_members": {"type": "list", "elements": "str", "default": []},
    "md_chunk_KiB": {"type": "int", "default": 0},
    "mdadm": {"type": "path"},
}

SBIN_DIRS = ["/sbin", "/usr/sbin", "/usr/local/sbin"]


class TargetRun:
    """One run of the module: probes, decision, and the commands it runs."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.params = module.params
        self.commands: list[list[str]] = []
        self.spec = self._spec()

    # -- arguments ---------------------------------------------------------

    def _spec(self) -> TargetSpec:
        p = self.params
        try:
            mgsnode = coerce_nid_groups(p["mgsnode"])
            servicenode = coerce_nid_groups(p["servicenode"])
        except ValueError as exc:
            self.module.fail_json(msg=f"invalid NID arguments: {exc}")
        spec = TargetSpec(
            name=p["name"],
            kind=p["kind"],
            fsname=p["fsname"] or "",
            index=p["index"],
            device=p["device"],
            backend=p["backend"],
            vdevs=list(p["vdevs"]),
            mgsnode=mgsnode,
            servicenode=servicenode,
            mkfs_options=list(p["mkfs_options"]),
            with_mgs=p["with_mgs"],
        )
        errors = validate_target_spec(spec)
        ashift = p["ashift"]
        if ashift and (spec.backend != "zfs" or not ASHIFT_RANGE[0] <= ashift <= ASHIFT_RANGE[1]):
            errors.append(f"ashift {ashift}: only for backend zfs, {ASHIFT_RANGE[0]}..{ASHIFT_RANGE[1]} (0: not set)")
        if p["md_create"]:
            if spec.backend != "ldiskfs":
                errors.append("md_create is only for backend ldiskfs")
            errors.extend(md_problems(p["md_level"], list(p["md_members"]), p["md_chunk_KiB"]))
            if spec.device in p["md_members"]:
                errors.append(f"the md array {spec.device} cannot be one of its own members")
        if errors:
            self.module.fail_json(msg="invalid arguments: " + "; ".join(errors))
        return spec

    def tool(self, option: str, program: str) -> str:
        path = self.params.get(option)
        if path:
            return str(path)
        return str(self.module.get_bin_path(program, required=True, opt_dirs=SBIN_DIRS))

    # -- probes ------------------------------------------------------------

    def require_device(self) -> None:
        """ldiskfs: the device must be a block device; zfs: every vdev must be (files only when allowed)."""
        spec = self.spec
        allow_file = bool(self.params["allow_file_device"])
        paths = [spec.device] if spec.backend == "ldiskfs" else zfs_vdev_paths(spec.vdevs)
        what = "device" if spec.backend == "ldiskfs" else "vdev"
        for path in paths:
            problem = device_type_problem(spec.name, path, _path_kind(path), allow_file, what)
            if problem:
                self.fail(problem)
        if spec.backend == "zfs" and not spec.vdevs and not self._zpool_exists():
            pool = spec.device.split("/", 1)[0]
            self.fail(f"ZFS pool {pool} for {spec.name} does not exist and no vdevs were given to create it")

    def _zpool_exists(self) -> bool:
        pool = self.spec.device.split("/", 1)[0]
        rc = self.module.run_command([self.tool("zpool", "zpool"), "list", "-H", "-o", "name", pool])[0]
        return int(rc) == 0

    def probe_lustre(self) -> TargetOnDisk | None:
        cmd = [self.tool("tunefs_lustre", "tunefs.lustre"), "--dryrun", self.spec.device]
        rc, out, err = self.module.run_command(cmd)
        if rc != 0:
            if tunefs_says_not_lustre(rc, out + err):
                return None
            self.fail(f"cannot tell what {self.spec.device} holds: {' '.join(cmd)} exited {rc}: {err or out}")
        target = parse_tunefs_dryrun(out)
        if target is None:
            self.fail(f"tunefs.lustre --dryrun {self.spec.device} succeeded but printed no Target: {out}")
        return target

    def probe_signatures(self) -> tuple[dict[str, str], dict[str, str]]:
        """(foreign content per probed path, why the content is unknown per path) for the device or zfs vdevs."""
        found: dict[str, str] = {}
        unknown: dict[str, str] = {}
        if self.spec.backend == "zfs":
            if self._zfs_dataset_exists():
                found[self.spec.device] = f"an existing ZFS dataset {self.spec.device} that is not a Lustre target"
            paths = zfs_vdev_paths(self.spec.vdevs)
        else:
            paths = [self.spec.device]
        for path in paths:
            verdict, what = self._blkid(path)
            if verdict == CONTENT:
                found[path] = what
            elif verdict == UNKNOWN:
                unknown[path] = what
        return found, unknown

    def _zfs_dataset_exists(self) -> bool:
        cmd = [self.tool("zfs", "zfs"), "list", "-H", "-o", "name", self.spec.device]
        rc = self.module.run_command(cmd)[0]
        return int(rc) == 0

    def _blkid(self, path: str) -> tuple[str, str]:
        """blank_verdict() for path: blkid first; wipefs confirms (or refutes) an empty blkid result."""
        rc, out, err = self.module.run_command([self.tool("blkid", "blkid"), "-p", "-o", "export", path])
        blkid = (int(rc), str(out), str(err))
        verdict, what = blank_verdict(blkid, None)
        if verdict != CONFIRM:
            return verdict, what
        wrc, wout, werr = self.module.run_command([self.tool("wipefs", "wipefs"), "--no-act", "--json", path])
        return blank_verdict(blkid, (int(wrc), str(wout), str(werr)))

    # -- actions -----------------------------------------------------------

    def run(self, cmd: list[str]) -> str:
        self.commands.append(cmd)
        if self.module.check_mode:
            return ""
        rc, out, err = self.module.run_command(cmd)
        if rc != 0:
            self.fail(f"{' '.join(cmd)} exited {rc}: {err or out}")
        return str(out)

    def fail(self, msg: str, **extra: Any) -> NoReturn:
        self.module.fail_json(msg=msg, commands=self.commands, **extra)

    def verify(self) -> TargetOnDisk:
        after = self.probe_lustre()
        if after is None:
            self.fail(f"after formatting, tunefs.lustre --dryrun {self.spec.device} shows no Lustre target")
        mismatch = target_identity_mismatch(after, self.spec)
        if mismatch:
            self.fail(f"after formatting, {self.spec.device} shows {', '.join(mismatch)}")
        return after

    def ensure_md_array(self) -> bool:
        """Create the target's md array when asked and missing; True when it is (or, in check mode, would be) created.

        Every member must be a block device proven blank (blkid, then wipefs), or the target must be named in
        reformat, in which case members with signatures are wiped first.
        """
        if not self.params["md_create"] or _path_kind(self.spec.device) != "missing":
            return False
        members = list(self.params["md_members"])
        allow_file = bool(self.params["allow_file_device"])
        for path in members:
            problem = device_type_problem(self.spec.name, path, _path_kind(path), allow_file, "md member")
            if problem:
                self.fail(problem)
        found: dict[str, str] = {}
        unknown: dict[str, str] = {}
        for path in members:
            verdict, what = self._blkid(path)
            if verdict == CONTENT:
                found[path] = what
            elif verdict == UNKNOWN:
                unknown[path] = what
        if (found or unknown) and self.spec.name not in self.params["reformat"]:
            path, what = next(iter({**found, **unknown}.items()))
            if path in unknown:
                self.fail(unknown_content_message(self.spec, path, what), found=found, unknown=unknown)
            summary = "; ".join(f"{p}: {w}" for p, w in found.items())
            self.fail(refusal_message(self.spec, f"md member content ({summary})"), found=found)
        for path in found:
            self.run([self.tool("wipefs", "wipefs"), "-a", path])
        level, chunk = self.params["md_level"], self.params["md_chunk_KiB"]
        self.run(build_mdadm_create_command(self.tool("mdadm", "mdadm"), self.spec.device, level, members, chunk))
        return True

    def ensure_pool(self) -> None:
        """zfs with ashift: create the pool with its properties before mkfs.lustre (which cannot pass them)."""
        if self.spec.backend != "zfs" or not self.params["ashift"] or not self.spec.vdevs or self._zpool_exists():
            return
        self.run(build_zpool_create_command(self.tool("zpool", "zpool"), self.spec, self.params["ashift"]))

    def main(self) -> None:
        if self.ensure_md_array() and self.module.check_mode:
            self.exit(
                changed=True,
                operation="create_md",
                target=None,
                found=None,
                drift=[],
                before={"device": self.spec.device, "content": "missing (md array to create)"},
                after=spec_state(self.spec),
            )
            return
        self.require_device()
        current = self.probe_lustre()
        if current is not None and not target_identity_mismatch(current, self.spec):
            self.ensure_params(current)
            return
        found, wipe, unknown = self.foreign_content(current)
        allowed = self.spec.name in self.params["reformat"]
        if unknown and not allowed:
            path, why = next(iter(unknown.items()))
            self.fail(unknown_content_message(self.spec, path, why), found=found, unknown=unknown)
        if found and not allowed:
            self.fail(refusal_message(self.spec, found), found=found, target=_dict(current))
        if unknown:
            found = "; ".join(filter(None, [found, *(f"{p}: unknown content ({w})" for p, w in unknown.items())]))
        self.format(current, found, wipe)

    def foreign_content(self, current: TargetOnDisk | None) -> tuple[str | None, list[str], dict[str, str]]:
        """(summary of what is on the device, paths to wipefs, paths whose content is unknown and why).

        (None, [], {}) is a device proven blank.
        """
        if current is not None:
            return describe_target(current), [], {}
        signatures, unknown = self.probe_signatures()
        if not signatures:
            return None, [], unknown
        summary = "; ".join(sig if path == self.spec.device else f"{path}: {sig}" for path, sig in signatures.items())
        wipe = [path for path in signatures if path.startswith("/")]
        return summary, wipe, unknown

    def format(self, current: TargetOnDisk | None, found: str | None, wipe: list[str]) -> None:
        reformat = found is not None
        for path in wipe:
            self.run([self.tool("wipefs", "wipefs"), "-a", path])
        self.ensure_pool()
        spec = self.spec
        if spec.backend == "zfs" and self.params["ashift"]:
            spec = replace(spec, vdevs=[])  # the pool exists now: mkfs.lustre creates only the dataset
        self.run(build_mkfs_command(self.tool("mkfs_lustre", "mkfs.lustre"), spec, reformat))
        after = None if self.module.check_mode else self.verify()
        before = target_state(self.spec.device, current) if current else _content_state(self.spec, found)
        after_state = target_state(self.spec.device, after) if after else spec_state(self.spec)
        if reformat:
            after_state["reformatted"] = f"yes - destroyed {found}"
        self.exit(
            changed=True,
            operation="reformat" if reformat else "format",
            target=current,
            found=found,
            drift=[],
            before=before,
            after=after_state,
        )

    def ensure_params(self, current: TargetOnDisk) -> None:
        drift = target_param_drift(current, self.spec)
        before = target_state(self.spec.device, current)
        if not drift:
            self.exit(changed=False, operation="none", target=current, found=None, drift=[], before=before)
            return
        if not self.params["update_params"]:
            fields = ", ".join(item["field"] for item in drift)
            self.module.warn(
                f"{self.spec.name} on {self.spec.device}: stored {fields} differ from the plan; "
                "set update_params: true to rewrite them "
                "(target must be unmounted; the MGS may need a writeconf)"
            )
            self.exit(changed=False, operation="none", target=current, found=None, drift=drift, before=before)
            return
        self.run(build_tunefs_update_command(self.tool("tunefs_lustre", "tunefs.lustre"), self.spec, current))
        after = spec_state(self.spec)
        if not self.module.check_mode:
            rewritten = self.verify()
            left = target_param_drift(rewritten, self.spec)
            if left:
                self.fail(f"tunefs.lustre ran but {self.spec.device} still differs: {left}")
            after = target_state(self.spec.device, rewritten)
        self.exit(
            changed=True,
            operation="update_params",
            target=current,
            found=None,
            drift=drift,
            before=before,
            after=after,
        )

    def exit(
        self,
        *,
        changed: bool,
        operation: str,
        target: TargetOnDisk | None,
        found: str | None,
        drift: list[dict[str, Any]],
        before: dict[str, Any],
        after: dict[str, Any] | None = None,
    ) -> None:
        after_state = before if after is None else after
        self.module.exit_json(
            changed=changed,
            operation=operation,
            target=_dict(target),
            found=found,
            drift=drift,
            commands=self.commands,
            diff={"before": render_target_state(before), "after": render_target_state(after_state)},
        )


def _path_kind(path: str) -> str:
    """block, file, missing, or a description of another kind of path."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"not inspectable ({exc.strerror})"
    if stat.S_ISBLK(mode):
        return "block"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    return "not a regular file or device"


def _dict(target: TargetOnDisk | None) -> dict[str, Any] | None:
    return None if target is None else target.to_dict()


def _content_state(spec: TargetSpec, found: str | None) -> dict[str, Any]:
    return {"device": spec.device, "content": found or "blank (no filesystem signature)"}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    TargetRun(module).main()


if __name__ == "__main__":
    main()
