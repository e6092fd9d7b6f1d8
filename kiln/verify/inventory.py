"""The kiln inventory as the acceptance suite reads it: groups and merged variables per host.

Reads the layout `kiln inventory <stack> --out DIR` writes (hosts.yml, group_vars/, host_vars/): the same
contract the roles consume. Precedence as Ansible's for this layout: group_vars/all < group_vars/<group>
(alphabetical) < host_vars/<host>. Without --inventory the suite renders it in memory from the plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kiln import yamlio


@dataclass(frozen=True, slots=True)
class Inventory:
    groups: dict[str, tuple[str, ...]]
    hostvars: dict[str, dict[str, Any]]
    source: str  # directory or "rendered from the plan"
    hosts_file: Path | None = None  # for testinfra's ansible:// backend
    files: dict[str, str] = field(default_factory=dict)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(self.hostvars)

    def vars(self, host: str) -> dict[str, Any]:
        return self.hostvars.get(host, {})

    def storage_addresses(self, host: str) -> list[str]:
        return [str(i["address"]) for i in self.vars(host).get("kiln_storage_interfaces") or [] if i.get("address")]


def _load(text: str, where: str) -> Any:
    try:
        return yamlio.load_inventory(text) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{where}: not YAML ({exc})") from None


def _collect_groups(node: Mapping[str, Any], name: str, groups: dict[str, set[str]]) -> set[str]:
    members: set[str] = set((node.get("hosts") or {}).keys())
    for child, sub in (node.get("children") or {}).items():
        members |= _collect_groups(sub or {}, child, groups)
    groups.setdefault(name, set()).update(members)
    return members


def inventory_from_files(files: Mapping[str, str], source: str, hosts_file: Path | None = None) -> Inventory:
    """Files as render_inventory returns them (relative path → text)."""
    hosts_yml = _load(files.get("hosts.yml", ""), "hosts.yml")
    groups: dict[str, set[str]] = {}
    _collect_groups(hosts_yml.get("all", {}), "all", groups)
    all_hosts = sorted(groups.get("all", set()))

    def group_vars(group: str) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for rel in (f"group_vars/{group}.yml", f"group_vars/{group}.yaml"):
            if rel in files:
                merged.update(_load(files[rel], rel))
        prefix = f"group_vars/{group}/"
        for rel in sorted(k for k in files if k.startswith(prefix)):
            merged.update(_load(files[rel], rel))
        return merged

    all_vars = group_vars("all")
    per_group = {g: group_vars(g) for g in sorted(groups) if g != "all"}
    hostvars: dict[str, dict[str, Any]] = {}
    for h in all_hosts:
        merged = dict(all_vars)
        for g, gv in per_group.items():
            if h in groups[g]:
                merged.update(gv)
        for rel in (f"host_vars/{h}.yml", f"host_vars/{h}.yaml"):
            if rel in files:
                merged.update(_load(files[rel], rel))
        merged["group_names"] = sorted(g for g in groups if h in groups[g] and g != "all")
        hostvars[h] = merged
    return Inventory({g: tuple(sorted(m)) for g, m in groups.items()}, hostvars, source, hosts_file, dict(files))


def load_inventory(directory: Path) -> Inventory:
    """A kiln inventory directory (hosts.yml + group_vars/ + host_vars/)."""
    if directory.is_file():
        directory = directory.parent
    hosts = directory / "hosts.yml"
    if not hosts.exists():
        raise FileNotFoundError(f"{hosts} not found; write one with `kiln inventory <stack> --out {directory}`")
    files = {str(p.relative_to(directory)): p.read_text(encoding="utf-8")
             for p in sorted(directory.rglob("*.y*ml")) if p.is_file()}
    return inventory_from_files(files, str(directory), hosts)
