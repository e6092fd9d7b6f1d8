#!/usr/bin/python
"""Ansible module: ensure a Lustre filesystem's default user, group or project quota (lfs setquota -U/-G/-P)."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kiln.cluster.plugins.module_utils.lustre_quota import (
    QUOTA_TYPES,
    DefaultQuota,
    build_setquota_args,
    parse_default_quota,
    quota_drift,
    quota_from_spec,
    validate_quota,
)

DOCUMENTATION = r"""
---
module: lustre_quota
short_description: Ensure a Lustre filesystem's default quota of one type
description:
  - Reads the default quota of O(type) with C(lfs quota -U|-G|-P PATH), compares the four limits with the
    wanted ones and, when they differ, runs C(lfs setquota -U|-G|-P -b N -B N -i N -I N PATH), reads them back
    and fails if they still differ.
  - The default quota applies to every user, group or project that has no limits of its own; an ID with its
    own limits keeps them. Enforcement is separate (quota_slave.enabled, and quota_slave_dt.enabled on MDTs for
    Data-on-MDT blocks, set by the lustre_server role).
  - Limits lfs would warn about (non-zero at or below 1024, soft above hard) fail before lfs runs
    (lfs_setquota() in lustre/utils/lfs.c, 2.15 and 2.16).
version_added: "0.1.0"
author: kiln
options:
  path:
    description: Mount point of a Lustre client (the filesystem whose default quota is set).
    type: path
    required: true
  type:
    description: Quota type.
    type: str
    required: true
    choices: [user, group, project]
  block_soft_KiB:
    description: Block soft limit in KiB; 0 = none.
    type: int
    default: 0
  block_hard_KiB:
    description: Block hard limit in KiB; 0 = none.
    type: int
    default: 0
  inode_soft:
    description: Inode soft limit; 0 = none.
    type: int
    default: 0
  inode_hard:
    description: Inode hard limit; 0 = none.
    type: int
    default: 0
  lfs:
    description: Path of lfs (default found on PATH).
    type: path
notes:
  - Supports check mode and diff mode.
  - Grace times (C(lfs setquota -t)) are not managed.
"""

EXAMPLES = r"""
- name: Every user without limits of their own gets 2 TiB soft, 2200 GiB hard and 5 million files
  lustre_quota:
    path: /lustre
    type: user
    block_soft_KiB: 2147483648
    block_hard_KiB: 2306867200
    inode_soft: 5000000
    inode_hard: 5500000
"""

RETURN = r"""
drift:
  description: Limits that differed before the run, each C({field, current, wanted}).
  returned: always
  type: list
  elements: dict
current:
  description: The default limits read before the run (null when lfs printed no default quota table).
  returned: always
  type: dict
command:
  description: The lfs setquota argv that ran (or would run); empty when nothing differed.
  returned: always
  type: list
  elements: str
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "path": {"type": "path", "required": True},
    "type": {"type": "str", "required": True, "choices": sorted(QUOTA_TYPES)},
    "block_soft_KiB": {"type": "int", "default": 0},
    "block_hard_KiB": {"type": "int", "default": 0},
    "inode_soft": {"type": "int", "default": 0},
    "inode_hard": {"type": "int", "default": 0},
    "lfs": {"type": "path"},
}


def _render(value: DefaultQuota | None) -> str:
    if value is None:
        return "(no default quota table)\n"
    return "".join(f"{key}: {number}\n" for key, number in value.to_dict().items())


class QuotaRun:
    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.path: str = module.params["path"]
        self.type: str = module.params["type"]
        try:
            self.wanted = quota_from_spec(module.params)
        except ValueError as exc:
            module.fail_json(msg=f"invalid {self.type} default quota: {exc}")
        errors = validate_quota(self.wanted)
        if errors:
            module.fail_json(msg=f"invalid {self.type} default quota: " + "; ".join(errors))
        lfs = module.params["lfs"]
        self.lfs = str(lfs or module.get_bin_path("lfs", required=True, opt_dirs=["/usr/sbin", "/sbin"]))

    def read(self) -> DefaultQuota | None:
        flag = QUOTA_TYPES[self.type][0]
        rc, out, err = self.module.run_command([self.lfs, "quota", flag, self.path])
        if rc != 0:
            self.module.fail_json(msg=f"lfs quota {flag} {self.path} exited {rc}: {(err or out).strip()}")
        return parse_default_quota(out, self.type)

    def main(self) -> None:
        current = self.read()
        drift = quota_drift(current, self.wanted)
        command: list[str] = []
        if drift:
            command = [self.lfs, "setquota", *build_setquota_args(self.type, self.wanted), self.path]
            if not self.module.check_mode:
                self.apply(command)
        self.module.exit_json(
            changed=bool(drift),
            drift=drift,
            current=None if current is None else current.to_dict(),
            command=command,
            diff={"before": _render(current), "after": _render(self.wanted)},
        )

    def apply(self, command: list[str]) -> None:
        rc, out, err = self.module.run_command(command)
        if rc != 0:
            self.module.fail_json(msg=f"{' '.join(command)} exited {rc}: {(err or out).strip()}", command=command)
        left = quota_drift(self.read(), self.wanted)
        if left:
            self.module.fail_json(msg=f"lfs setquota ran but the {self.type} default quota still differs", drift=left)


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    QuotaRun(module).main()


if __name__ == "__main__":
    main()
