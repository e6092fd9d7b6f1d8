#!/usr/bin/python
"""Ansible module: set the running value of many sysctls in one pass, and say which this host cannot take."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kiln_sysctl
short_description: Set the running value of a list of sysctls in one pass; report those this host cannot set
description:
  - For each sysctl, decides whether this host can set it. On a host every key must exist; a missing key
    fails the task. In a container a key that is not namespaced belongs to the host kernel, and a key
    whose C(/proc/sys) entry is missing or read-only cannot be set; those are reported as not applicable
    with the reason, never as applied.
  - Reads the running value of every key this host can set and writes only those that differ, comparing
    whitespace-separated fields (C(4096 87380 16777216) equals the kernel's tab-separated form). After
    writing it reads again and fails if the kernel kept another value.
  - Does not write any file; the role's template owns the sysctl.d file that makes the values persistent.
    One module run replaces a stat and an C(ansible.posix.sysctl) call per key.
author: Kiln maintainers (@kiln-hpc)
options:
  sysctls:
    description: The sysctls; each a dict with C(name), C(value) and C(namespaced). Other keys (C(reason)) are ignored.
    type: list
    elements: dict
    required: true
  in_container:
    description: Whether this host is a container (non-namespaced keys belong to the host kernel).
    type: bool
    default: false
  container_kind:
    description: The container technology, for messages.
    type: str
    default: container
  sysctl_file:
    description: The file the values are persisted in, for messages.
    type: str
    default: /etc/sysctl.d/90-kiln.conf
  proc_sys:
    description: Root of the sysctl tree; a test may point it elsewhere.
    type: path
    default: /proc/sys
"""

EXAMPLES = r"""
- name: Apply the plan's sysctls that this host can set
  kiln_sysctl:
    sysctls:
      - {name: net.ipv4.tcp_rmem, value: "4096 87380 16777216", namespaced: true}
      - {name: vm.zone_reclaim_mode, value: 0, namespaced: false}
    in_container: "{{ common_in_container }}"
  register: applied
"""

RETURN = r"""
results:
  description: One entry per sysctl, in the order given.
  returned: always
  type: list
  elements: dict
  sample:
    - {name: net.ipv4.tcp_rmem, value: "4096 87380 16777216", namespaced: true, applied: true, not_applicable: ""}
previous:
  description: The running value of each key this host can set, as read before any change.
  returned: always
  type: dict
  sample: {net.ipv4.tcp_rmem: "4096 131072 6291456"}
changed_names:
  description: The keys whose running value was (or, in check mode, would be) changed.
  returned: always
  type: list
  elements: str
"""

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def proc_path(proc_sys: Path, name: str) -> Path:
    return proc_sys / name.replace(".", "/")


def fields(value: object) -> list[str]:
    return str(value).split()


def not_applicable(
    item: dict[str, Any],
    path: Path,
    in_container: bool,
    kind: str,
    sysctl_file: str,
    writable: Callable[[Path], bool],
) -> str:
    """Why this host cannot set the key ('' when it can). On a host nothing is skipped."""
    name = item["name"]
    if not in_container:
        return ""
    if not item.get("namespaced", False):
        return (
            f"{name} is not namespaced: only the host kernel has it, and this host is a container ({kind}); "
            f"it is in {sysctl_file} for the host"
        )
    if not path.exists():
        return f"{name} does not exist in this container's network namespace"
    if not writable(path):
        return f"{name}: /proc/sys is read-only in this container ({kind})"
    return ""


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def run(module: AnsibleModule, writable: Callable[[Path], bool] = _writable) -> dict[str, Any]:
    p = module.params
    root = Path(p["proc_sys"])
    results: list[dict[str, Any]] = []
    previous: dict[str, str] = {}
    changed: list[str] = []
    before: list[str] = []
    after: list[str] = []
    for item in p["sysctls"]:
        if not isinstance(item, dict) or not item.get("name") or item.get("value") in (None, ""):
            module.fail_json(msg=f"each sysctl needs a name and a value; got {item!r}")
        name, wanted = str(item["name"]), str(item["value"])
        path = proc_path(root, name)
        na = not_applicable(item, path, p["in_container"], p["container_kind"], p["sysctl_file"], writable)
        row: dict[str, Any] = {
            "name": name,
            "value": wanted,
            "namespaced": bool(item.get("namespaced", False)),
            "applied": not na,
            "not_applicable": na,
        }
        results.append(row)
        if na:
            continue
        if not path.exists():
            module.fail_json(msg=f"sysctl {name} does not exist on this kernel ({path}); fix the plan or the kernel",
                             results=results)
        current = " ".join(fields(path.read_text()))
        previous[name] = current
        if fields(current) == fields(wanted):
            continue
        changed.append(name)
        before.append(f"{name} = {current}\n")
        after.append(f"{name} = {wanted}\n")
        if module.check_mode:
            continue
        try:
            path.write_text(" ".join(fields(wanted)) + "\n")
        except OSError as exc:
            module.fail_json(msg=f"could not set {name} = {wanted}: {exc}", results=results)
        now = path.read_text()
        if fields(now) != fields(wanted):
            module.fail_json(msg=f"{name}: wrote {wanted!r} but the kernel keeps {now.strip()!r}", results=results)
    return {
        "changed": bool(changed),
        "results": results,
        "previous": previous,
        "changed_names": changed,
        "diff": {"before": "".join(before), "after": "".join(after)},
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "sysctls": {"type": "list", "elements": "dict", "required": True},
            "in_container": {"type": "bool", "default": False},
            "container_kind": {"type": "str", "default": "container"},
            "sysctl_file": {"type": "str", "default": "/etc/sysctl.d/90-kiln.conf"},
            "proc_sys": {"type": "path", "default": "/proc/sys"},
        },
        supports_check_mode=True,
    )
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
