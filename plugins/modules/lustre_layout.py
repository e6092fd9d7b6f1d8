#!/usr/bin/python
"""Ansible module: ensure a Lustre directory's default layout (plain, PFL, DoM, overstriping, pools)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: lustre_layout
short_description: Ensure a directory's default Lustre layout
description:
  - Reads the directory's default layout with C(lfs getstripe -d --yaml DIR) (falling back to
    C(lfs getstripe -d DIR) when lfs has no C(--yaml)), turns it into a list of components and compares
    it with O(layout). When they differ it runs C(lfs setstripe) with options built from O(layout),
    reads the layout back and fails if it still differs.
  - A single component ending at EOF is a plain layout (C(lfs setstripe -c N -S SIZE));
    more components make a composite (PFL) layout (C(-E 64M -c 1 -S 1M -E -1 -c -1 -S 4M)).
  - Returns C(drift), the field-by-field differences, so a drift report needs no second tool.
  - With O(dir_default), also the default directory layout (DNE) that new subdirectories get, read with
    C(lfs getdirstripe -D --yaml DIR) (or without C(--yaml)), set with C(lfs setdirstripe -D -c N -i I [-X M] DIR)
    when it differs, and read back.
version_added: "0.1.0"
author: Kiln maintainers (@kiln-hpc)
options:
  path:
    description: Directory on a mounted Lustre client.
    type: path
    required: true
  layout:
    description: Components, first to last.
    type: list
    elements: dict
    required: true
    suboptions:
      extent_end:
        description:
          - Where the component ends, a size (C(64M)) or C(EOF) (also C(-1)).
          - The last component must end at EOF.
        type: raw
        default: EOF
      stripe_count:
        description: Number of OSTs (-1 = all). Unset means not compared and not passed.
        type: int
      stripe_size:
        description: Stripe size, a multiple of 64K (C(1M), C(4M)). Unset means not compared and not passed.
        type: raw
      overstripe_count:
        description: Overstriping count (C(lfs setstripe -C), Lustre 2.13+); replaces stripe_count.
        type: int
      pool:
        description: OST pool name. Unset means no pool.
        type: str
      dom:
        description: Data-on-MDT component (C(-L mdt)); only the first component, no stripe options.
        type: bool
        default: false
  dir_default:
    description:
      - Default directory layout for new subdirectories (C(lfs setdirstripe -D)); unset leaves it alone.
      - Ranges are those lfs_setdirstripe() in lustre/utils/lfs.c accepts (2.15, 2.16).
    type: dict
    suboptions:
      mdt_count:
        description: MDTs each new subdirectory is striped over (C(-c)); -1 all, 1 one MDT per subdirectory.
        type: int
        required: true
      mdt_index:
        description: Starting MDT (C(-i)); -1 lets the MDS pick (round-robin while MDTs are balanced).
        type: int
        default: -1
      max_inherit:
        description: Subdirectory levels that inherit the default (C(-X)); -1 all, 0 none, at most 250. Unset is not
          passed and not compared.
        type: int
  mdt_count:
    description: The filesystem's MDT count; a O(dir_default.mdt_count) above it fails before lfs runs.
    type: int
  create:
    description: Create the directory (and parents) when it does not exist; otherwise a missing path fails.
    type: bool
    default: false
  lfs:
    description: Path of lfs (default found on PATH).
    type: path
notes:
  - Supports check mode and diff mode.
  - Self-extending (SEL) and mirrored (FLR) layouts are not modelled.
"""

EXAMPLES = r"""
- name: Checkpoint directory - DoM for small files, then wide 4M stripes on the flash pool
  lustre_layout:
    path: /lustre/lab/checkpoints
    create: true
    layout:
      - {extent_end: 1M, dom: true}
      - {extent_end: 64M, stripe_count: 1, stripe_size: 1M, pool: flash}
      - {extent_end: EOF, stripe_count: -1, stripe_size: 4M, pool: flash}

- name: Checkpoint steps - each new step directory striped over all 4 MDTs
  lustre_layout:
    path: /lustre/prod/checkpoints
    layout:
      - {extent_end: 256M, stripe_count: 1, stripe_size: 1M}
      - {extent_end: EOF, stripe_count: 4, stripe_size: 4M}
    dir_default: {mdt_count: 4, mdt_index: -1, max_inherit: 3}
    mdt_count: 4

- name: Shared-file directory with 4 stripes per OST
  lustre_layout:
    path: /lustre/lab/shared
    layout:
      - {extent_end: EOF, overstripe_count: 32, stripe_size: 4M}
"""

RETURN = r"""
drift:
  description:
    - Differences before the run, each C({component, field, current, wanted}).
    - component is null for whole-layout differences, C(dir_default) for the default directory layout.
  returned: always
  type: list
  elements: dict
current:
  description: Components read before the run (null when the directory had no default layout).
  returned: always
  type: list
  elements: dict
wanted:
  description: The wanted components, normalised.
  returned: always
  type: list
  elements: dict
command:
  description: The lfs setstripe argv that ran (or would run); empty when nothing differed.
  returned: always
  type: list
  elements: str
dir_command:
  description: The lfs setdirstripe argv that ran (or would run); empty when the default directory layout matched.
  returned: always
  type: list
  elements: str
current_dir_default:
  description: The default directory layout read before the run (null when none or O(dir_default) unset).
  returned: always
  type: dict
created:
  description: Whether the directory was (or would be) created.
  returned: always
  type: bool
"""

import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kiln.cluster.plugins.module_utils.lustre_layout import (
    DirDefault,
    LayoutComponent,
    build_setdirstripe_args,
    build_setstripe_args,
    dir_default_drift,
    dir_default_from_spec,
    layout_drift,
    layout_from_spec,
    parse_getdirstripe,
    parse_getstripe,
    render_dir_default,
    render_layout,
    validate_dir_default,
    validate_layout,
)


ARGUMENT_SPEC: dict[str, Any] = {
    "path": {"type": "path", "required": True},
    "layout": {
        "type": "list",
        "elements": "dict",
        "required": True,
        "options": {
            "extent_end": {"type": "raw", "default": "EOF"},
            "stripe_count": {"type": "int"},
            "stripe_size": {"type": "raw"},
            "overstripe_count": {"type": "int"},
            "pool": {"type": "str"},
            "dom": {"type": "bool", "default": False},
        },
    },
    "dir_default": {
        "type": "dict",
        "options": {
            "mdt_count": {"type": "int", "required": True},
            "mdt_index": {"type": "int", "default": -1},
            "max_inherit": {"type": "int"},
        },
    },
    "mdt_count": {"type": "int"},
    "create": {"type": "bool", "default": False},
    "lfs": {"type": "path"},
}


class LayoutRun:
    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.path: str = module.params["path"]
        self.wanted = self._wanted()
        self.wanted_dir = self._wanted_dir()
        lfs = module.params["lfs"]
        self.lfs = str(lfs or module.get_bin_path("lfs", required=True, opt_dirs=["/usr/sbin", "/sbin"]))

    def _wanted(self) -> list[LayoutComponent]:
        try:
            wanted = layout_from_spec(self.module.params["layout"])
        except ValueError as exc:
            self.module.fail_json(msg=f"invalid layout: {exc}")
        errors = validate_layout(wanted)
        if errors:
            self.module.fail_json(msg="invalid layout: " + "; ".join(errors))
        return wanted

    def _wanted_dir(self) -> DirDefault | None:
        raw = self.module.params["dir_default"]
        if raw is None:
            return None
        try:
            wanted = dir_default_from_spec(raw)
        except ValueError as exc:
            self.module.fail_json(msg=f"invalid dir_default: {exc}")
        errors = validate_dir_default(wanted, self.module.params["mdt_count"])
        if errors:
            self.module.fail_json(msg="invalid dir_default: " + "; ".join(errors))
        return wanted

    def ensure_directory(self) -> bool:
        """True when the directory is (or, in check mode, would be) created."""
        if os.path.isdir(self.path):
            return False
        if os.path.exists(self.path):
            self.module.fail_json(msg=f"{self.path} exists and is not a directory")
        if not self.module.params["create"]:
            self.module.fail_json(msg=f"{self.path} does not exist (set create: true to create it)")
        if not self.module.check_mode:
            os.makedirs(self.path)
        return True

    def read(self) -> list[LayoutComponent] | None:
        rc, out, err = self.module.run_command([self.lfs, "getstripe", "-d", "--yaml", self.path])
        if rc != 0 and ("yaml" in err or "unrecognized" in err):
            rc, out, err = self.module.run_command([self.lfs, "getstripe", "-d", self.path])
        if rc != 0:
            self.module.fail_json(msg=f"lfs getstripe -d {self.path} exited {rc}: {(err or out).strip()}")
        return parse_getstripe(out)

    def read_dir(self) -> DirDefault | None:
        rc, out, err = self.module.run_command([self.lfs, "getdirstripe", "-D", "--yaml", self.path])
        if rc != 0 and ("yaml" in err or "unrecognized" in err):
            rc, out, err = self.module.run_command([self.lfs, "getdirstripe", "-D", self.path])
        if rc != 0:
            self.module.fail_json(msg=f"lfs getdirstripe -D {self.path} exited {rc}: {(err or out).strip()}")
        return parse_getdirstripe(out)

    def main(self) -> None:
        created = self.ensure_directory()
        fresh = created and self.module.check_mode
        current = None if fresh else self.read()
        drift = layout_drift(current, self.wanted)
        command: list[str] = []
        if drift:
            command = [self.lfs, "setstripe", *build_setstripe_args(self.wanted), self.path]
            if not self.module.check_mode:
                self.apply(command)
        current_dir: DirDefault | None = None
        dir_command: list[str] = []
        before, after = render_layout(current), render_layout(self.wanted)
        if self.wanted_dir is not None:
            current_dir = None if fresh else self.read_dir()
            dir_drift = dir_default_drift(current_dir, self.wanted_dir)
            drift += dir_drift
            if dir_drift:
                dir_command = [self.lfs, "setdirstripe", *build_setdirstripe_args(self.wanted_dir), self.path]
                if not self.module.check_mode:
                    self.apply_dir(dir_command, self.wanted_dir)
            before += render_dir_default(current_dir)
            after += render_dir_default(self.wanted_dir)
        self.module.exit_json(
            changed=bool(drift) or created,
            created=created,
            drift=drift,
            current=None if current is None else [comp.to_dict() for comp in current],
            wanted=[comp.to_dict() for comp in self.wanted],
            command=command,
            dir_command=dir_command,
            current_dir_default=None if current_dir is None else current_dir.to_dict(),
            diff={"before": before, "after": after},
        )

    def apply_dir(self, command: list[str], wanted: DirDefault) -> None:
        rc, out, err = self.module.run_command(command)
        if rc != 0:
            self.module.fail_json(msg=f"{' '.join(command)} exited {rc}: {(err or out).strip()}", command=command)
        left = dir_default_drift(self.read_dir(), wanted)
        if left:
            self.module.fail_json(
                msg=f"lfs setdirstripe ran but {self.path}'s default directory layout still differs", drift=left
            )

    def apply(self, command: list[str]) -> None:
        rc, out, err = self.module.run_command(command)
        if rc != 0:
            self.module.fail_json(msg=f"{' '.join(command)} exited {rc}: {(err or out).strip()}", command=command)
        left = layout_drift(self.read(), self.wanted)
        if left:
            self.module.fail_json(
                msg=f"lfs setstripe ran but {self.path} still differs from the wanted layout", drift=left
            )


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    LayoutRun(module).main()


if __name__ == "__main__":
    main()
