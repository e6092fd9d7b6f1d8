#!/usr/bin/python
"""Ansible module: ensure Lustre parameters (runtime, persistent, conf_param, module sysfs)."""

from __future__ import annotations

import os
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kiln.cluster.plugins.module_utils.lustre_common import normalize_param_value
from ansible_collections.kiln.cluster.plugins.module_utils.lustre_param import (
    conf_param_values,
    memtotal_kib,
    module_param_path,
    param_drift,
    parse_get_param,
    parse_llog_records,
    persistent_value,
    ram_limit_refusal,
)

DOCUMENTATION = r"""
---
module: lustre_param
short_description: Ensure Lustre tunables have the wanted values, setting only what differs
description:
  - Reads each parameter's current value, normalises both sides (C(16M) and C(4096) pages are the same
    C(max_pages_per_rpc); C(2G) and C(2048) the same C(max_dirty_mb); C(32M) and C(33554432) the same
    byte size) and sets only the parameters that differ. After setting, it reads again and fails if the
    value did not take (e.g. the kernel clamped it).
  - "O(mode=set_param): runtime values on this node. Reads C(lctl get_param NAME); a wildcard name
    (C(osc.*.max_pages_per_rpc)) reads one line per device, and any device that differs is drift. Sets
    with C(lctl set_param NAME=VALUE)."
  - "O(mode=set_param_persistent): run on the MGS. Reads the C(params) configuration log with
    C(lctl --device MGS llog_print params), the documented listing of what C(lctl set_param -P) stored,
    and compares the latest record for exactly NAME. Sets with C(lctl set_param -P NAME=VALUE). The
    record alone does not prove the value took: each target or client applies it and may reject or
    clamp it. So the module then reads the running value with C(lctl get_param NAME) on the host it
    runs on, waiting up to O(readback_timeout) seconds for the MGS to propagate it, and fails if it
    differs. Where no device matches NAME on this host (an MGS has no obdfilter or osc devices), the
    result says C(applied=unknown) with the reason, never that the value is applied; run the module
    with O(readback_only=true) on a host that applies it to read it back there."
  - "O(readback_only=true) with O(mode=set_param_persistent): on a server or client that applies the
    parameters (an OSS for obdfilter.* and the OSTs' osd-*, an MDS for mdt.* and the MDTs' osd-*), neither
    read nor change the MGS's records; only read this host's running values back as above, waiting up to
    O(readback_timeout) seconds, and fail on a value that differs. Nothing is changed."
  - "Before it sets C(llite.*.max_read_ahead_mb) or C(osc.*.max_dirty_mb) at runtime, the module compares
    the value with what the kernel's store function compares it with, a share of this node's
    kernel-managed RAM (MemTotal in O(meminfo): totalram pages / 2 for read-ahead, lustre/llite/lproc_llite.c
    max_read_ahead_mb_store; / 4 and below 2048 MiB for max_dirty_mb, lustre/osc/lproc_osc.c
    max_dirty_mb_store), and fails naming the largest value this node takes, instead of a bare ERANGE."
  - "O(mode=conf_param): run on the MGS. Reads the configuration logs in O(llogs) with C(llog_print) and
    compares the latest C(conf_param) record per device. Sets with C(lctl conf_param NAME=VALUE). The
    manual prefers C(set_param -P) for new parameters."
  - "O(mode=module_params): runtime value of a kernel module parameter, NAME being C(module.parameter)
    (e.g. C(mdt.max_mod_rpcs_per_client)) read from and written to
    C(<sysfs_root>/module/<module>/parameters/<parameter>). Persisting it in modprobe.d is the role's job."
  - Multi-line values (stats, nrs_policies) are compared as text.
version_added: "0.1.0"
author: kiln
options:
  params:
    description: Parameters to ensure, each C({name, value}).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Parameter name as lctl takes it (wildcards allowed for set_param modes).
        type: str
        required: true
      value:
        description: Wanted value; sizes may carry K/M/G suffixes.
        type: raw
        required: true
  mode:
    description: Which kind of parameter, see the description.
    type: str
    default: set_param
    choices: [set_param, set_param_persistent, conf_param, module_params]
  fsname:
    description: Filesystem name; needed for O(mode=conf_param) when O(llogs) is not given.
    type: str
  readback_only:
    description:
      - With O(mode=set_param_persistent), only read this host's running values back (see the description);
        the MGS's records are neither read nor changed.
    type: bool
    default: false
  meminfo:
    description: File with the node's MemTotal (the RAM limits of read-ahead and max_dirty_mb).
    type: path
    default: /proc/meminfo
  readback_timeout:
    description:
      - For O(mode=set_param_persistent), seconds to wait for this host's running value to match the
        stored record (C(set_param -P) reaches the devices asynchronously). 0 reads once.
    type: int
    default: 30
  llogs:
    description:
      - Configuration logs read in O(mode=conf_param).
      - Default C(<fsname>-client) and C(<fsname>-MDT0000).
    type: list
    elements: str
  page_size:
    description: Bytes per page, to convert C(max_pages_per_rpc) sizes. Default this node's page size.
    type: int
  sysfs_root:
    description: Root of sysfs for O(mode=module_params).
    type: path
    default: /sys
  lctl:
    description: Path of lctl (default found on PATH, /sbin, /usr/sbin).
    type: path
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Client RPC tuning (runtime)
  lustre_param:
    mode: set_param
    params:
      - {name: "osc.*.max_pages_per_rpc", value: 16M}
      - {name: "osc.*.max_rpcs_in_flight", value: 32}
      - {name: "osc.*.max_dirty_mb", value: 2048}

- name: Same values persistently, on the MGS
  lustre_param:
    mode: set_param_persistent
    params:
      - {name: "osc.lab-OST*.max_pages_per_rpc", value: 16M}

- name: Let clients have 50 modifying RPCs in flight (MDS runtime value)
  lustre_param:
    mode: module_params
    params:
      - {name: mdt.max_mod_rpcs_per_client, value: 64}
"""

RETURN = r"""
drift:
  description:
    - Values that differed before the run, each C({name, device, current, wanted}).
    - device is the full parameter name, the llog device, or the sysfs path.
  returned: always
  type: list
  elements: dict
changed_params:
  description: Names of the parameters that were set (or would be, in check mode).
  returned: always
  type: list
  elements: str
current:
  description: Values read before the run, per parameter name, per device.
  returned: always
  type: dict
applied:
  description:
    - For O(mode=set_param_persistent), per parameter name, whether this host's running value was read
      back and matches, as C({applied, reason, readback}). C(applied) is C(yes) (read back and equal)
      or C(unknown) (not verifiable here; C(reason) says why). A value read back different fails the task.
  returned: always
  type: dict
commands:
  description:
    - The commands run (or that would run), each an argv list.
    - module_params writes appear as C([write, PATH, VALUE]).
  returned: always
  type: list
  elements: list
"""


ARGUMENT_SPEC: dict[str, Any] = {
    "params": {
        "type": "list",
        "elements": "dict",
        "required": True,
        "options": {"name": {"type": "str", "required": True}, "value": {"type": "raw", "required": True}},
    },
    "mode": {
        "type": "str",
        "default": "set_param",
        "choices": ["set_param", "set_param_persistent", "conf_param", "module_params"],
    },
    "fsname": {"type": "str"},
    "llogs": {"type": "list", "elements": "str"},
    "readback_timeout": {"type": "int", "default": 30},
    "readback_only": {"type": "bool", "default": False},
    "meminfo": {"type": "path", "default": "/proc/meminfo"},
    "page_size": {"type": "int"},
    "sysfs_root": {"type": "path", "default": "/sys"},
    "lctl": {"type": "path"},
}


class ParamRun:
    """Read, compare, set and verify each parameter in one mode."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.mode: str = module.params["mode"]
        self.page_size: int = module.params["page_size"] or os.sysconf("SC_PAGE_SIZE")
        self.commands: list[list[str]] = []
        self._records: list[dict[str, str]] | None = None

    def fail(self, msg: str) -> None:
        self.module.fail_json(msg=msg, commands=self.commands)

    @property
    def lctl(self) -> str:
        path = self.module.params["lctl"]
        return str(path or self.module.get_bin_path("lctl", required=True, opt_dirs=["/sbin", "/usr/sbin"]))

    def lctl_run(self, args: list[str]) -> str:
        cmd = [self.lctl, *args]
        rc, out, err = self.module.run_command(cmd)
        if rc != 0:
            self.fail(f"{' '.join(cmd)} exited {rc}: {(err or out).strip()}")
        return str(out)

    # -- reading -----------------------------------------------------------

    def read(self, name: str) -> dict[str, str]:
        if self.mode == "set_param":
            entries = parse_get_param(self.lctl_run(["get_param", name]))
            if not entries:
                self.fail(f"lctl get_param {name} matched no device on this node")
            return dict(entries)
        if self.mode == "set_param_persistent":
            value = persistent_value(self.records(), name)
            return {} if value is None else {"params": value}
        if self.mode == "conf_param":
            try:
                return conf_param_values(self.records(), name)
            except ValueError as exc:
                self.fail(str(exc))
        return self.read_sysfs(name)

    def records(self) -> list[dict[str, str]]:
        if self._records is None:
            records: list[dict[str, str]] = []
            for log in self.llogs():
                records.extend(parse_llog_records(self.lctl_run(["--device", "MGS", "llog_print", log])))
            self._records = records
        return self._records

    def llogs(self) -> list[str]:
        if self.mode == "set_param_persistent":
            return ["params"]
        llogs = self.module.params["llogs"]
        if llogs:
            return list(llogs)
        fsname = self.module.params["fsname"]
        if not fsname:
            self.fail("mode conf_param needs fsname (or llogs) to know which configuration logs to read")
        return [f"{fsname}-client", f"{fsname}-MDT0000"]

    def sysfs_path(self, name: str) -> str:
        try:
            return module_param_path(self.module.params["sysfs_root"], name)
        except ValueError as exc:
            self.fail(str(exc))
        return ""

    def read_sysfs(self, name: str) -> dict[str, str]:
        path = self.sysfs_path(name)
        try:
            with open(path, encoding="ascii") as handle:
                return {path: handle.read().strip()}
        except OSError as exc:
            self.fail(f"cannot read {path} (is the module loaded?): {exc}")
        return {}

    # -- comparing and setting ----------------------------------------------

    def drift(self, name: str, value: Any, reading: dict[str, str]) -> list[dict[str, Any]]:
        if not reading:
            return [{"name": name, "device": None, "current": None, "wanted": str(value)}]
        return param_drift(name, value, sorted(reading.items()), self.page_size)

    def ram_refusal(self, name: str, value: Any) -> str | None:
        """The kernel's RAM limit on a runtime value (None: no limit, accepted, or MemTotal unreadable)."""
        try:
            with open(self.module.params["meminfo"], encoding="ascii") as handle:
                memtotal = memtotal_kib(handle.read())
        except OSError:
            return None
        return None if memtotal is None else ram_limit_refusal(name, value, memtotal, self.page_size)

    def set(self, name: str, value: Any) -> None:
        text = str(value)
        refusal = self.ram_refusal(name, value) if self.mode == "set_param" else None
        if refusal:
            self.fail(f"{refusal}; plan a smaller value (the stack's overrides) or give the node more RAM")
        if self.mode == "module_params":
            path = self.sysfs_path(name)
            self.commands.append(["write", path, text])
            if not self.module.check_mode:
                self.write_sysfs(path, text)
            return
        args = {
            "set_param": ["set_param", f"{name}={text}"],
            "set_param_persistent": ["set_param", "-P", f"{name}={text}"],
            "conf_param": ["conf_param", f"{name}={text}"],
        }[self.mode]
        self.commands.append([self.lctl, *args])
        if not self.module.check_mode:
            self.lctl_run(args)

    def write_sysfs(self, path: str, text: str) -> None:
        try:
            with open(path, "w", encoding="ascii") as handle:
                handle.write(text + "\n")
        except OSError as exc:
            self.fail(f"cannot write {text} to {path}: {exc}")

    def verify(self, name: str, value: Any) -> None:
        self._records = None
        left = self.drift(name, value, self.read(name))
        if left:
            shown = ", ".join(f"{item['device']}={item['current']}" for item in left)
            self.fail(f"set {name}={value} but it reads back as {shown}")

    def readback(self, name: str, value: Any, was_set: bool) -> dict[str, Any]:
        """Persistent mode: this host's running value of ``name``, waited for and compared (the MGS record alone
        proves nothing: a target may reject or clamp the value)."""
        if was_set and self.module.check_mode:
            return {"applied": "unknown", "reason": "check mode: the value was not stored, so not read back"}
        deadline = time.monotonic() + max(self.module.params["readback_timeout"], 0)
        while True:
            rc, out, err = self.module.run_command([self.lctl, "get_param", name])
            entries = parse_get_param(out) if rc == 0 else []
            if not entries:
                return {
                    "applied": "unknown",
                    "reason": f"no device on this host matches {name} ({(err or out).strip() or 'lctl get_param'}"
                    "); the record is on the MGS but is not read back here. Run lustre_param with readback_only"
                    " on a host that applies it (an OSS for obdfilter.* and the OSTs' osd-*, an MDS for mdt.* and"
                    " the MDTs' osd-*, a client for osc.*/llite.*/mdc.*), with its targets mounted",
                }
            left = param_drift(name, value, entries, self.page_size)
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(2)
        if left and not self.module.check_mode:
            shown = ", ".join(f"{item['device']}={item['current']}" for item in left)
            self.fail(
                f"the MGS stores {name}={value}, but this host runs {shown}: the value was rejected or clamped "
                "where it applies (see dmesg), or has not arrived yet (raise readback_timeout)"
            )
        return {"applied": "no" if left else "yes", "reason": "" if not left else "running value differs",
                "readback": dict(entries)}

    def readback_only(self) -> None:
        """Persistent parameters read back on a host that applies them; the MGS is not asked and nothing changes."""
        if self.mode != "set_param_persistent":
            self.fail("readback_only needs mode set_param_persistent")
        applied = {item["name"]: self.readback(item["name"], item["value"], False)
                   for item in self.module.params["params"]}
        self.module.exit_json(changed=False, drift=[], changed_params=[], current={}, applied=applied,
                              commands=self.commands)

    def main(self) -> None:
        if self.module.params["readback_only"]:
            self.readback_only()
            return
        drift: list[dict[str, Any]] = []
        current: dict[str, dict[str, str]] = {}
        changed_params: list[str] = []
        applied: dict[str, dict[str, Any]] = {}
        for item in self.module.params["params"]:
            name, value = item["name"], item["value"]
            reading = self.read(name)
            current[name] = reading
            found = self.drift(name, value, reading)
            if found:
                drift.extend(found)
                changed_params.append(name)
                self.set(name, value)
                if not self.module.check_mode:
                    self.verify(name, value)
            if self.mode == "set_param_persistent":
                applied[name] = self.readback(name, value, bool(found))
        self.module.exit_json(
            changed=bool(changed_params),
            drift=drift,
            changed_params=changed_params,
            current=current,
            applied=applied,
            commands=self.commands,
            diff=self.diff(drift),
        )

    def diff(self, drift: list[dict[str, Any]]) -> dict[str, str]:
        before = "".join(f"{d['device'] or d['name']}={_shown(d['current'])}\n" for d in drift)
        after = "".join(
            f"{d['device'] or d['name']}={normalize_param_value(d['name'], d['wanted'], self.page_size)}"
            f" ({d['wanted']})\n"
            for d in drift
        )
        return {"before": before, "after": after}


def _shown(value: str | None) -> str:
    return "(unset)" if value is None else value


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    ParamRun(module).main()


if __name__ == "__main__":
    main()
