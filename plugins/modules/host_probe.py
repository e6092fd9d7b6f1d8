#!/usr/bin/python
"""Ansible module: read what a role needs to know about a host, in one run, as structured data."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_probe
short_description: Read paths, systemd units, users, kernel modules, devices and tool versions in one run
description:
  - Answers the questions a role asks about a host before it changes anything, in one module run (one round
    trip), and returns the answers as structured data instead of text for the role to parse.
  - Each option names what to look at; nothing else is read. Every answer is keyed by what was asked, e.g.
    C(result.paths['/usr/bin/nvidia-smi'].exists) or C(result.units['chrony.service'].enabled).
  - Read-only. It never changes the host, so it runs the same in check mode and always reports
    C(changed=false).
  - Like C(stat), a dangling symbolic link counts as present (C(exists)); the type, owner, group and mode
    are those of the link's target and are null when the target is missing.
  - Runs on the managed node with the Python standard library only (Python 3.9 or later).
version_added: "0.1.0"
author:
  - kiln maintainers (@kiln)
options:
  paths:
    description:
      - Paths to stat. Each answer is under C(paths[path]).
    type: list
    elements: str
    default: []
  checksums:
    description:
      - Paths whose SHA-256 to compute, under C(paths[path].sha256). Only a regular file that is not a symbolic
        link is read; for anything else C(sha256) is null. A file that cannot be read fails the module.
      - These paths are also stat'ed (no need to list them in I(paths)).
    type: list
    elements: str
    default: []
  read:
    description:
      - Small text files to read, under C(paths[path].content), without trailing newlines (as the shell's
        C($(cat FILE)) reads them); null when the file is missing or cannot be read.
      - These paths are also stat'ed.
    type: list
    elements: str
    default: []
  list_dirs:
    description:
      - Directories whose entries to list, under C(paths[path].entries) as the names that do not start with a
        dot (what a shell glob lists), sorted; null when the path is not a directory. A dangling link inside
        counts as an entry.
      - These paths are also stat'ed.
    type: list
    elements: str
    default: []
  units:
    description:
      - systemd units to ask about, under C(units[unit]) as C(load_state) (C(systemctl show -p LoadState);
        C(not-found) for a unit that is only referenced), C(enabled) (what C(systemctl is-enabled) prints),
        C(active) (what C(systemctl is-active) prints) and C(unit_file) (whether I(unit_dir)/UNIT exists). An
        empty string where systemctl printed nothing; C(load_state) is empty where systemd does not run.
    type: list
    elements: str
    default: []
  unit_dir:
    description: Where the roles install unit files; C(unit_file) answers whether the unit's file is there.
    type: path
    default: /etc/systemd/system
  mount_points:
    description:
      - Mount points whose systemd mount unit to name (C(systemd-escape --path --suffix=mount), one call for
        all), under C(mounts[mount_point]) as C(unit), C(unit_file) (the unit's file in I(unit_dir)) and
        C(exists) (the mount point itself).
    type: list
    elements: str
    default: []
  users:
    description:
      - Users to look up (the passwd database, as C(getent passwd)), under C(users[name]) as C(exists), C(uid),
        C(gid), C(comment), C(home) and C(shell).
    type: list
    elements: str
    default: []
  groups:
    description: Groups to look up (as C(getent group)), under C(groups[name]) as C(exists), C(gid) and C(members).
    type: list
    elements: str
    default: []
  kernel_modules:
    description:
      - Kernel modules, under C(kernel_modules[name]) as C(loaded) (C(/sys/module/NAME) exists) and
        C(available) (C(modprobe --dry-run --quiet NAME) succeeds, i.e. the running kernel has a module file;
        nothing is loaded).
    type: list
    elements: str
    default: []
  module_parameters:
    description:
      - Kernel module parameters, each a dict with C(module) and C(name) (other keys, such as C(value), are
        kept). Returned in C(module_parameters) in the same order, each with C(present) added
        (C(/sys/module/MODULE/parameters/NAME) exists, so its module is loaded).
    type: list
    elements: dict
    default: []
  interfaces:
    description: Network interfaces, under C(interfaces[name]) as true when C(/sys/class/net/NAME) exists.
    type: list
    elements: str
    default: []
  tools:
    description:
      - Programs to find, under C(tools[name]) as the path found (as C(command -v) answers), or null. The
        directories in I(tool_dirs) are searched first, then C(PATH).
    type: list
    elements: str
    default: []
  tool_dirs:
    description: Directories searched for I(tools) before C(PATH), in this order.
    type: list
    elements: path
    default: []
  packages:
    description:
      - Debian packages to ask dpkg about (C(dpkg-query -W)). C(packages) holds the installed version of each one
        dpkg has unpacked; a package dpkg does not know, or whose status is C(not-installed) or
        C(config-files), is left out. With several architectures the first installed one counts.
    type: list
    elements: str
    default: []
  versions:
    description:
      - Commands whose output to return, under C(versions[name]) as C(rc), C(stdout) and C(stderr) (each
        without trailing newlines); null when the program (the first element of I(argv)) is not there or not
        executable. Meant for C(TOOL --version); runs without a shell.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The key of the answer.
        type: str
        required: true
      argv:
        description: The command; the first element is a path or a program searched on C(PATH).
        type: list
        elements: str
        required: true
      fail_on_error:
        description: Fail the module when the command exits non-zero.
        type: bool
        default: false
  container:
    description:
      - Whether to tell if this host is a container, under C(container) as C(kind) (C(podman), C(docker),
        C(lxc), ... or C(none)), C(in_container), C(source) and C(markers).
      - C(systemd-detect-virt --container) decides when it is installed (exit 0 a container, exit 1 none, any
        other exit fails the module). Without it, C(/run/.containerenv) means podman, C(/.dockerenv) docker,
        and a C(container=) variable in PID 1's environment names the kind (lxc, systemd-nspawn, ...).
    type: bool
    default: false
  pci_vendors:
    description:
      - PCI vendor ids (C(0x10de)); C(pci) lists the functions under C(/sys/bus/pci/devices) of these vendors
        (compared without regard to case), sorted by address, as C(address), C(vendor) and C(class).
    type: list
    elements: str
    default: []
  pci_classes:
    description: Only list PCI functions whose class starts with one of these (C(0x0302)); empty for any class.
    type: list
    elements: str
    default: []
  systemd_version:
    description: Whether to return systemd's major version (C(systemctl --version)) as C(systemd_version).
    type: bool
    default: false
  systemctl:
    description: Path of systemctl; found on C(PATH), C(/sbin) or C(/usr/sbin) when not given.
    type: str
  systemd_detect_virt:
    description: Path of systemd-detect-virt; found like I(systemctl) when not given. A path that does not exist
      counts as not installed.
    type: str
  systemd_escape:
    description: Path of systemd-escape; found like I(systemctl) when not given.
    type: str
  dpkg_query:
    description: Path of dpkg-query; found like I(systemctl) when not given.
    type: str
  modprobe:
    description: Path of modprobe; found like I(systemctl) when not given.
    type: str
  root:
    description:
      - Directory the fixed system paths are read under (C(/sys/module), C(/sys/class/net), C(/sys/bus/pci),
        C(/run/.containerenv), C(/.dockerenv), C(/proc/1/environ)); tests point it at a tree. The paths given
        in the other options are read as given.
    type: path
    default: /
notes:
  - Supports check mode; it reads only.
"""

EXAMPLES = r"""
- name: Look for NVIDIA GPUs and ask whether this is a container
  kiln.cluster.host_probe:
    container: true
    paths:
      - /proc/driver/nvidia/gpus
      - /etc/systemd/system/nvidia-persistenced.service.d
    pci_vendors: ["0x10de"]
    pci_classes: ["0x0300", "0x0302"]
    tools: [nvidia-smi]
  register: gpu_probe

- name: Say what was found
  ansible.builtin.debug:
    msg: >-
      container: {{ gpu_probe.container.kind }}; driver: {{ gpu_probe.paths['/proc/driver/nvidia/gpus'].exists }};
      GPUs on the bus: {{ gpu_probe.pci | map(attribute='address') | join(', ') or 'none' }};
      nvidia-smi: {{ gpu_probe.tools['nvidia-smi'] or 'not installed' }}

- name: Look at the object store's user, directories, units and staged binary
  kiln.cluster.host_probe:
    users: [seaweedfs]
    groups: [seaweedfs]
    paths: [/srv/seaweedfs, /usr/local/bin/weed]
    checksums: [/var/lib/kiln/staging/weed]
    units: [seaweedfs-master.service, seaweedfs-s3.service]
    versions:
      - {name: weed, argv: [/var/lib/kiln/staging/weed, version], fail_on_error: true}
  register: probe
"""

RETURN = r"""
paths:
  description:
    - One entry per path of I(paths), I(checksums), I(read) and I(list_dirs). C(exists) is true for a dangling
      link; C(type), C(owner), C(group), C(uid), C(gid), C(mode), C(dev) and C(inode) describe the link's
      target and are null when there is none. C(type) is one of C(file), C(directory), C(block), C(char),
      C(fifo), C(socket). C(mode) is four octal digits. C(writable) and C(executable) answer C(access(2)) for
      this user. C(sha256), C(content) and C(entries) are there for the paths of those options.
  returned: always
  type: dict
  sample:
    /etc/kiln: {exists: true, islnk: false, type: directory, owner: root, group: root, uid: 0, gid: 0,
                mode: "0755", dev: 2049, inode: 131090, writable: true, executable: true}
units:
  description: One entry per unit of I(units).
  returned: always
  type: dict
  sample: {chrony.service: {load_state: loaded, enabled: enabled, active: active, unit_file: false}}
mounts:
  description: One entry per mount point of I(mount_points).
  returned: always
  type: dict
  sample: {/lustre/lab: {unit: lustre-lab.mount, unit_file: true, exists: true}}
users:
  description: One entry per user of I(users); C(exists) false and the rest null for an unknown user.
  returned: always
  type: dict
  sample: {seaweedfs: {exists: true, uid: 998, gid: 998, comment: "SeaweedFS object store (kiln)",
                       home: /srv/seaweedfs, shell: /usr/sbin/nologin}}
groups:
  description: One entry per group of I(groups).
  returned: always
  type: dict
  sample: {seaweedfs: {exists: true, gid: 998, members: []}}
kernel_modules:
  description: One entry per module of I(kernel_modules).
  returned: always
  type: dict
  sample: {lnet: {loaded: false, available: false}}
module_parameters:
  description: The entries of I(module_parameters), in order, each with C(present) added.
  returned: always
  type: list
  elements: dict
  sample: [{module: mdt, name: max_mod_rpcs_per_client, value: 50, present: false}]
interfaces:
  description: One entry per interface of I(interfaces), true when it exists.
  returned: always
  type: dict
  sample: {ib0: true, eth9: false}
tools:
  description: One entry per program of I(tools), the path found or null.
  returned: always
  type: dict
  sample: {lctl: /usr/sbin/lctl, mount.lustre: null}
packages:
  description: The installed version of each package of I(packages) that dpkg has unpacked.
  returned: always
  type: dict
  sample: {fio: "3.33-3"}
versions:
  description: One entry per command of I(versions), or null when its program is not there.
  returned: always
  type: dict
  sample: {weed: {rc: 0, stdout: "version 30GB 3.39 51d4a4b2 linux amd64", stderr: ""}}
container:
  description: With I(container), what kind of host this is; null otherwise. C(source) names what decided.
  returned: always
  type: dict
  sample: {kind: podman, in_container: true, source: systemd-detect-virt, markers: [/run/.containerenv]}
pci:
  description: The PCI functions of I(pci_vendors) (and I(pci_classes)), sorted by address.
  returned: always
  type: list
  elements: dict
  sample: [{address: "0000:17:00.0", vendor: "0x10de", class: "0x030200"}]
systemd_version:
  description: With I(systemd_version), systemd's major version; null otherwise.
  returned: always
  type: int
  sample: 252
"""

import grp  # noqa: E402
import hashlib  # noqa: E402
import os  # noqa: E402
import pwd  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import stat  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

#: stat(2) file types by the names the answers use.
FILE_TYPES = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISREG, "file"),
    (stat.S_ISBLK, "block"),
    (stat.S_ISCHR, "char"),
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
)
#: Files container engines leave in their containers, and the kind each one means.
CONTAINER_MARKERS = (("/run/.containerenv", "podman"), ("/.dockerenv", "docker"))
#: dpkg statuses of a package that is not (or no longer) unpacked.
NOT_INSTALLED = ("not-installed", "config-files")
SYSTEMD_VERSION = re.compile(r"^systemd (\d+)", re.MULTILINE)


class ProbeError(Exception):
    """A question the host could not answer; the module fails with this message."""


def lexists(path: str) -> bool:
    return os.path.lexists(path)


def _access(path: str, mode: int) -> bool:
    if os.access in os.supports_effective_ids:
        return os.access(path, mode, effective_ids=True)
    return os.access(path, mode)


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def stat_path(path: str) -> dict[str, Any]:
    """What stat -L says of PATH, plus whether PATH itself is a link (a dangling link exists, with no type)."""
    answer: dict[str, Any] = {
        "exists": False, "islnk": False, "type": None, "owner": None, "group": None, "uid": None, "gid": None,
        "mode": None, "dev": None, "inode": None, "writable": False, "executable": False,
    }
    try:
        own = os.lstat(path)
    except OSError:
        return answer
    answer["exists"] = True
    answer["islnk"] = stat.S_ISLNK(own.st_mode)
    try:
        target = os.stat(path)
    except OSError:
        return answer
    answer.update(
        type=next((name for test, name in FILE_TYPES if test(target.st_mode)), None),
        owner=_user_name(target.st_uid),
        group=_group_name(target.st_gid),
        uid=target.st_uid,
        gid=target.st_gid,
        mode=f"{stat.S_IMODE(target.st_mode):04o}",
        dev=target.st_dev,
        inode=target.st_ino,
        writable=_access(path, os.W_OK),
        executable=_access(path, os.X_OK),
    )
    return answer


def sha256_of(path: str, answer: dict[str, Any]) -> str | None:
    """The SHA-256 of a regular file that is not a link; None for anything else."""
    if answer["islnk"] or answer["type"] != "file":
        return None
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise ProbeError(f"cannot read {path} to checksum it: {exc.strerror}") from exc
    return digest.hexdigest()


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().rstrip("\n")
    except OSError:
        return None


def list_entries(path: str) -> list[str] | None:
    """The names in a directory that do not start with a dot (what a shell glob lists), sorted."""
    try:
        return sorted(name for name in os.listdir(path) if not name.startswith("."))
    except OSError:
        return None


def under(root: str, path: str) -> str:
    """PATH (absolute) read under ROOT."""
    return os.path.join(root, path.lstrip("/"))


def find_program(name: str, dirs: list[str]) -> str | None:
    """Where `command -v NAME` finds it with DIRS before PATH; a name with a slash is taken as it is."""
    if "/" in name:
        return name if os.path.isfile(name) and _access(name, os.X_OK) else None
    search = [d for d in dirs if d] + [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    return shutil.which(name, path=os.pathsep.join(search))


class Probe:
    """One module run: the tools it calls and the answers so far."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.params = module.params
        self.root = module.params["root"]

    def tool(self, option: str, name: str, required: bool = True) -> str | None:
        given = self.params.get(option)
        if given:
            if os.path.isfile(given) and _access(given, os.X_OK):
                return str(given)
            if required:
                raise ProbeError(f"{option} {given} is not an executable file")
            return None
        found = self.module.get_bin_path(name, required=False)
        if found is None and required:
            raise ProbeError(f"{name} is not installed on this host (looked on PATH, /sbin, /usr/sbin)")
        return found

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        rc, out, err = self.module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})
        return rc, out, err

    # -- paths ------------------------------------------------------------------------------------

    def paths(self) -> dict[str, dict[str, Any]]:
        p = self.params
        answers: dict[str, dict[str, Any]] = {}
        for path in p["paths"] + p["checksums"] + p["read"] + p["list_dirs"]:
            if path not in answers:
                answers[path] = stat_path(path)
        for path in p["checksums"]:
            answers[path]["sha256"] = sha256_of(path, answers[path])
        for path in p["read"]:
            answers[path]["content"] = read_text(path) if answers[path]["exists"] else None
        for path in p["list_dirs"]:
            answers[path]["entries"] = list_entries(path) if answers[path]["type"] == "directory" else None
        return answers

    # -- systemd ----------------------------------------------------------------------------------

    def units(self, names: list[str]) -> dict[str, dict[str, Any]]:
        if not names:
            return {}
        systemctl = self.tool("systemctl", "systemctl")
        assert systemctl is not None
        answers: dict[str, dict[str, Any]] = {}
        for unit in names:
            if unit in answers:
                continue
            # NOTE: is-enabled stops at the first unit it cannot find, so each unit is asked on its own.
            # `show` answers only while systemd runs (is-enabled reads the unit files without it); without
            # it the load state is unknown ('').
            rc, load, _ = self.run([systemctl, "show", "--property=LoadState", "--value", unit])
            if rc != 0:
                load = ""
            _, enabled, _ = self.run([systemctl, "is-enabled", unit])
            _, active, _ = self.run([systemctl, "is-active", unit])
            answers[unit] = {
                "load_state": load.strip(),
                "enabled": enabled.strip(),
                "active": active.strip(),
                "unit_file": lexists(os.path.join(self.params["unit_dir"], unit)),
            }
        return answers

    def mount_units(self) -> dict[str, str]:
        points = self.params["mount_points"]
        if not points:
            return {}
        escape = self.tool("systemd_escape", "systemd-escape")
        assert escape is not None
        rc, out, err = self.run([escape, "--path", "--suffix=mount", "--", *points])
        names = out.split()
        if rc != 0 or len(names) != len(points):
            raise ProbeError(f"systemd-escape --path --suffix=mount {' '.join(points)} exited {rc}: {err.strip()}")
        return dict(zip(points, names))

    def systemd_version(self) -> int | None:
        if not self.params["systemd_version"]:
            return None
        systemctl = self.tool("systemctl", "systemctl")
        assert systemctl is not None
        rc, out, err = self.run([systemctl, "--version"])
        found = SYSTEMD_VERSION.search(out)
        if rc != 0 or not found:
            raise ProbeError(f"systemctl --version exited {rc} without a version: {(err or out).strip()}")
        return int(found.group(1))

    # -- accounts ---------------------------------------------------------------------------------

    def users(self) -> dict[str, dict[str, Any]]:
        answers: dict[str, dict[str, Any]] = {}
        for name in self.params["users"]:
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                answers[name] = {"exists": False, "uid": None, "gid": None, "comment": None, "home": None,
                                 "shell": None}
                continue
            answers[name] = {"exists": True, "uid": entry.pw_uid, "gid": entry.pw_gid, "comment": entry.pw_gecos,
                             "home": entry.pw_dir, "shell": entry.pw_shell}
        return answers

    def groups(self) -> dict[str, dict[str, Any]]:
        answers: dict[str, dict[str, Any]] = {}
        for name in self.params["groups"]:
            try:
                entry = grp.getgrnam(name)
            except KeyError:
                answers[name] = {"exists": False, "gid": None, "members": []}
                continue
            answers[name] = {"exists": True, "gid": entry.gr_gid, "members": list(entry.gr_mem)}
        return answers

    # -- kernel -----------------------------------------------------------------------------------

    def kernel_modules(self) -> dict[str, dict[str, bool]]:
        names = self.params["kernel_modules"]
        if not names:
            return {}
        modprobe = self.tool("modprobe", "modprobe", required=False)
        answers: dict[str, dict[str, bool]] = {}
        for name in names:
            available = False
            if modprobe is not None:
                rc, _, _ = self.run([modprobe, "--dry-run", "--quiet", name])
                available = rc == 0
            answers[name] = {"loaded": lexists(under(self.root, f"/sys/module/{name}")), "available": available}
        return answers

    def module_parameters(self) -> list[dict[str, Any]]:
        answers = []
        for item in self.params["module_parameters"]:
            if not isinstance(item, dict) or not item.get("module") or not item.get("name"):
                raise ProbeError(f"each module parameter needs a module and a name; got {item!r}")
            path = under(self.root, f"/sys/module/{item['module']}/parameters/{item['name']}")
            answers.append(dict(item, present=lexists(path)))
        return answers

    def interfaces(self) -> dict[str, bool]:
        return {name: lexists(under(self.root, f"/sys/class/net/{name}")) for name in self.params["interfaces"]}

    def pci(self) -> list[dict[str, str]]:
        vendors = [v.lower() for v in self.params["pci_vendors"]]
        if not vendors:
            return []
        classes = [c.lower() for c in self.params["pci_classes"]]
        devices = under(self.root, "/sys/bus/pci/devices")
        found = []
        for address in list_entries(devices) or []:
            vendor = read_text(os.path.join(devices, address, "vendor"))
            if vendor is None:
                raise ProbeError(f"cannot read {os.path.join(devices, address, 'vendor')}")
            if vendor.strip().lower() not in vendors:
                continue
            klass = (read_text(os.path.join(devices, address, "class")) or "").strip()
            if classes and not any(klass.lower().startswith(c) for c in classes):
                continue
            found.append({"address": address, "vendor": vendor.strip(), "class": klass})
        return found

    # -- software ---------------------------------------------------------------------------------

    def tools(self) -> dict[str, str | None]:
        dirs = self.params["tool_dirs"]
        return {name: find_program(name, dirs) for name in self.params["tools"]}

    def packages(self) -> dict[str, str]:
        names = self.params["packages"]
        if not names:
            return {}
        dpkg_query = self.tool("dpkg_query", "dpkg-query")
        assert dpkg_query is not None
        rc, out, err = self.run([dpkg_query, "-W", "-f=${Package}\\t${db:Status-Status}\\t${Version}\\n", "--",
                                 *names])
        # NOTE: dpkg-query exits 1 when it does not know one of the packages; that is an answer.
        if rc > 1:
            raise ProbeError(f"dpkg-query -W exited {rc}: {err.strip()}")
        versions: dict[str, str] = {}
        for line in out.splitlines():
            fields = line.split("\t")
            if len(fields) != 3 or fields[1] in NOT_INSTALLED:
                continue
            versions.setdefault(fields[0], fields[2])
        return versions

    def versions(self) -> dict[str, dict[str, Any] | None]:
        answers: dict[str, dict[str, Any] | None] = {}
        for item in self.params["versions"]:
            argv = [str(a) for a in item["argv"]]
            if not argv:
                raise ProbeError(f"versions entry {item['name']} has an empty argv")
            program = find_program(argv[0], [])
            if program is None:
                answers[item["name"]] = None
                continue
            rc, out, err = self.run([program, *argv[1:]])
            if rc != 0 and item["fail_on_error"]:
                raise ProbeError(f"{' '.join(argv)} exited {rc}: {(err or out).strip()}")
            answers[item["name"]] = {"rc": rc, "stdout": out.rstrip("\n"), "stderr": err.rstrip("\n")}
        return answers

    # -- container --------------------------------------------------------------------------------

    def container(self) -> dict[str, Any] | None:
        if not self.params["container"]:
            return None
        markers = [path for path, _ in CONTAINER_MARKERS if lexists(under(self.root, path))]
        detect = self.tool("systemd_detect_virt", "systemd-detect-virt", required=False)
        if detect is not None:
            rc, out, err = self.run([detect, "--container"])
            # rc 1 with "none" means "not a container"; anything else is an error.
            if rc > 1:
                raise ProbeError(f"systemd-detect-virt --container exited {rc}: {err.strip()}")
            kind = out.strip() if rc == 0 else "none"
            return {"kind": kind, "in_container": rc == 0, "source": "systemd-detect-virt", "markers": markers}
        for path, kind in CONTAINER_MARKERS:
            if path in markers:
                return {"kind": kind, "in_container": True, "source": path, "markers": markers}
        environ = read_text(under(self.root, "/proc/1/environ")) or ""
        for variable in environ.split("\0"):
            if variable.startswith("container=") and len(variable) > len("container="):
                return {"kind": variable.split("=", 1)[1], "in_container": True, "source": "/proc/1/environ",
                        "markers": markers}
        return {"kind": "none", "in_container": False, "source": "markers", "markers": markers}


def probe(module: AnsibleModule) -> dict[str, Any]:
    host = Probe(module)
    mounts = host.mount_units()
    unit_dir = module.params["unit_dir"]
    return {
        "changed": False,
        "paths": host.paths(),
        "units": host.units(module.params["units"]),
        "mounts": {
            point: {"unit": unit, "unit_file": lexists(os.path.join(unit_dir, unit)), "exists": lexists(point)}
            for point, unit in mounts.items()
        },
        "users": host.users(),
        "groups": host.groups(),
        "kernel_modules": host.kernel_modules(),
        "module_parameters": host.module_parameters(),
        "interfaces": host.interfaces(),
        "tools": host.tools(),
        "packages": host.packages(),
        "versions": host.versions(),
        "container": host.container(),
        "pci": host.pci(),
        "systemd_version": host.systemd_version(),
    }


ARGUMENT_SPEC: dict[str, Any] = {
    "paths": {"type": "list", "elements": "str", "default": []},
    "checksums": {"type": "list", "elements": "str", "default": []},
    "read": {"type": "list", "elements": "str", "default": []},
    "list_dirs": {"type": "list", "elements": "str", "default": []},
    "units": {"type": "list", "elements": "str", "default": []},
    "unit_dir": {"type": "path", "default": "/etc/systemd/system"},
    "mount_points": {"type": "list", "elements": "str", "default": []},
    "users": {"type": "list", "elements": "str", "default": []},
    "groups": {"type": "list", "elements": "str", "default": []},
    "kernel_modules": {"type": "list", "elements": "str", "default": []},
    "module_parameters": {"type": "list", "elements": "dict", "default": []},
    "interfaces": {"type": "list", "elements": "str", "default": []},
    "tools": {"type": "list", "elements": "str", "default": []},
    "tool_dirs": {"type": "list", "elements": "path", "default": []},
    "packages": {"type": "list", "elements": "str", "default": []},
    "versions": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "name": {"type": "str", "required": True},
            "argv": {"type": "list", "elements": "str", "required": True},
            "fail_on_error": {"type": "bool", "default": False},
        },
    },
    "container": {"type": "bool", "default": False},
    "pci_vendors": {"type": "list", "elements": "str", "default": []},
    "pci_classes": {"type": "list", "elements": "str", "default": []},
    "systemd_version": {"type": "bool", "default": False},
    "systemctl": {"type": "str"},
    "systemd_detect_virt": {"type": "str"},
    "systemd_escape": {"type": "str"},
    "dpkg_query": {"type": "str"},
    "modprobe": {"type": "str"},
    "root": {"type": "path", "default": "/"},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = probe(module)
    except ProbeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
