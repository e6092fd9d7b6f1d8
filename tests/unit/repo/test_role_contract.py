"""The rendered inventory of every shipped stack validates against the argument specs of the roles that read it.

A role reads a group_vars or host_vars file when the playbooks (playbooks/site.yml and the plays it imports) run it
on a host that gets the file. Values are checked with Ansible's own ArgumentSpecValidator, the validator of role
argument specs, after loading the files with Ansible's own YAML loader (so `!unsafe` strings arrive as Ansible
sees them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.utils.yaml import from_yaml
from ansible.template import Templar, trust_as_template

from kiln import docgen
from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import load_stack
from kiln.yamlio import load_inventory

ROOT = Path(__file__).resolve().parents[3]
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))

# Rendered variables that no role reading their file declares, and why.
UNDECLARED = {
    "ansible_host": "Ansible's own connection variable",
    "ansible_connection": "Ansible's own connection variable (podman in the lab)",
    "ansible_user": "Ansible's own connection variable",
    "kiln_fabric": "read by the preflight play, which runs no role",
    "kiln_lustre_mgs_nids": "for operators; the roles take the MGS NIDs from lustre_client_mounts and the targets",
    "kiln_management_address": "read by kiln verify, not by a role",
    "kiln_local_nvme_mount": "read by kiln verify, not by a role",
    "kiln_storage_interfaces": "read by kiln verify on every host, by a role (objectstore) on object-store hosts only",
    "lnet_interfaces": "written for every host with a storage NID, object-store hosts too, where LNet does not run",
}


def render(stack: str) -> dict[str, str]:
    """Relative path → text of the stack's rendered inventory (the one call of the renderer in this module)."""
    spec = load_stack(stack)
    return render_inventory(build_plan(spec))


@dataclass(frozen=True)
class Play:
    hosts: str  # the play's host pattern
    roles: tuple[tuple[str, str | None], ...]  # (role, its `when`) from `roles:`: the main entry point, validated
    included: tuple[str, ...]  # roles of include_role tasks (another entry point: they read, are not validated)
    grouped: tuple[str, ...]  # the literal start of the names of the groups its group_by tasks make


def _plays(path: Path) -> list[Play]:
    out: list[Play] = []
    for play in yaml.safe_load(path.read_text(encoding="utf-8")):
        if "ansible.builtin.import_playbook" in play:
            out += _plays(path.parent / play["ansible.builtin.import_playbook"])
            continue
        tasks = play.get("tasks") or []
        out.append(Play(
            hosts=play["hosts"],
            roles=tuple((_role(r["role"]), r.get("when")) for r in play.get("roles") or []),
            included=tuple(_role(t["ansible.builtin.include_role"]["name"]) for t in tasks
                           if "ansible.builtin.include_role" in t),
            grouped=tuple(t["ansible.builtin.group_by"]["key"].split("{{")[0].strip() for t in tasks
                          if "ansible.builtin.group_by" in t),
        ))
    return out


def _role(fqcn: str) -> str:
    """The directory under roles/ of a role the collection's playbooks name by FQCN (kiln.cluster.<role>)."""
    namespace, collection, role = fqcn.split(".")
    assert (namespace, collection) == ("kiln", "cluster"), f"{fqcn}: the playbooks run only kiln.cluster roles"
    return role


PLAYS = _plays(ROOT / "playbooks" / "site.yml")
_DEFAULT = re.compile(r"\{\{\s*\w+\s*\|\s*default\('([^']*)'\)\s*\}\}")  # {{ kiln_scope | default('all') }}


def _hosts(pattern: str, groups: dict[str, set[str]]) -> set[str]:
    """The hosts an Ansible host pattern selects: `a:b:&c:!d` is (a ∪ b) ∩ c − d. A group made at run time by a
    group_by task stands for every host of the play that makes it (the halves together cover those hosts)."""

    def members(name: str) -> set[str]:
        if name in groups:
            return groups[name]
        maker = next((p for p in PLAYS for start in p.grouped if name.startswith(start)), None)
        return _hosts(maker.hosts, groups) if maker else {name} & groups["all"]

    chosen: set[str] = set()
    narrow: list[set[str]] = []
    dropped: set[str] = set()
    for term in _DEFAULT.sub(lambda m: m[1], pattern).split(":"):
        if term.startswith("&"):
            narrow.append(members(term[1:]))
        elif term.startswith("!"):
            dropped |= members(term[1:])
        else:
            chosen |= members(term)
    for keep in narrow:
        chosen &= keep
    return chosen - dropped


@dataclass(frozen=True)
class Inventory:
    files: dict[str, dict[str, Any]]  # relative path → variables, as Ansible loads them
    groups: dict[str, set[str]]  # group → hosts; "all" too

    def hosts_of(self, rel: str) -> set[str]:
        """The hosts that get a group_vars or host_vars file."""
        kind, name = rel.split("/")[0], rel.split("/")[1].removesuffix(".yml")
        return {name} if kind == "host_vars" else self.groups.get(name, set())

    def roles_on(self, host: str) -> set[str]:
        return {role for p in PLAYS if host in _hosts(p.hosts, self.groups)
                for role in [*(r for r, _ in p.roles), *p.included]}

    def readers(self, rel: str) -> set[str]:
        """The roles that read a file. group_vars/all: every role of the playbooks, as its variables are the same in
        every stack while a role may run on no host of one (objectstore with an external lake)."""
        if rel.startswith("group_vars/all/"):
            return {role for p in PLAYS for role in [*(r for r, _ in p.roles), *p.included]}
        return set().union(*(self.roles_on(h) for h in self.hosts_of(rel)))

    def host_vars(self, host: str) -> dict[str, Any]:
        """The host's variables: group_vars/all, then its groups' files, then its host_vars."""
        merged: dict[str, Any] = {}
        for rel in sorted(self.files, key=lambda r: (r.startswith("host_vars/"), r != "group_vars/all/kiln.yml", r)):
            if host in self.hosts_of(rel):
                merged.update(self.files[rel])
        return merged


def _native(value: Any) -> Any:
    """A value Ansible's loader read, as the plain type it resolved to (the validator copies tagged values slowly)."""
    if isinstance(value, dict):
        return {str(k): _native(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_native(v) for v in value]
    kind = next((k for k in (bool, int, float, str) if isinstance(value, k)), None)
    return value if kind is None else kind(value)


@cache
def inventory(stack: str) -> Inventory:
    files = render(stack)
    children = load_inventory(files.pop("hosts.yml"))["all"]["children"]
    groups = {g: set((body or {}).get("hosts") or {}) for g, body in children.items()}
    groups["all"] = set().union(*groups.values())
    return Inventory({rel: _native(from_yaml(text) or {}) for rel, text in files.items()}, groups)


@cache
def options(role: str) -> dict[str, Any]:
    return dict(docgen.argument_spec(role).get("options") or {})


def file_problems(inv: Inventory, rel: str) -> list[str]:
    """Why a rendered file does not fit the argument specs of the roles that read it (empty: it fits)."""
    readers = inv.readers(rel)
    problems = []
    for var, value in inv.files[rel].items():
        declared_by = sorted(r for r in readers if var in options(r))
        if not declared_by and var not in UNDECLARED:
            problems.append(f"{rel}: {var} is declared by no role that reads it ({', '.join(sorted(readers))})")
        for role in declared_by:
            # This file alone need not hold every required option; test_required_options_are_rendered checks those.
            option = {k: v for k, v in options(role)[var].items() if k != "required"}
            result = ArgumentSpecValidator({var: option}).validate({var: value})
            problems += [f"{rel}: {var} (role {role}): {e}" for e in result.error_messages]
    return problems


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_variables_are_declared_by_a_reading_role_and_validate(stack: str) -> None:
    inv = inventory(stack)
    problems = [p for rel in inv.files for p in file_problems(inv, rel)]
    assert not problems, f"stack {stack}:\n" + "\n".join(problems)


@pytest.mark.parametrize("stack", STACKS)
def test_required_options_are_rendered_for_every_host_a_role_runs_on(stack: str) -> None:
    inv = inventory(stack)
    problems = []
    for host in sorted(inv.groups["all"]):
        hostvars = inv.host_vars(host)
        templar = Templar(loader=DataLoader(), variables=hostvars)
        for play in PLAYS:
            if host not in _hosts(play.hosts, inv.groups):
                continue
            for role, when in play.roles:
                if when and not templar.evaluate_conditional(trust_as_template(when)):
                    continue
                missing = sorted(o for o, spec in options(role).items() if spec.get("required") and o not in hostvars)
                if missing:
                    problems.append(f"{host}: role {role} requires {', '.join(missing)}")
    assert not problems, f"stack {stack}:\n" + "\n".join(problems)


def _section(rel: str, sections: set[str]) -> str | None:
    """The docs/inventory-contract.md section of a rendered file (`host_vars/<host>.yml` for host_vars/gpu001.yml)."""
    return next((s for s in sections if re.fullmatch(re.sub(r"<[^>]+>", "[^/]+", re.escape(s)), rel)), None)


@pytest.mark.parametrize("stack", STACKS)
def test_argument_specs_name_the_file_each_variable_is_rendered_into(stack: str) -> None:
    contract = docgen.contract_variables()
    documented = {var: file for file, variables in contract.items() for var in variables}
    problems = []
    for rel, variables in inventory(stack).files.items():
        section = _section(rel, set(contract))
        for var in variables:
            if var in UNDECLARED:
                continue
            if var not in documented:
                problems.append(f"{rel}: {var}: no argument spec says 'Set by C(kiln inventory) in C(<file>).'")
            elif documented[var] != section:
                problems.append(f"{rel}: {var}: its argument spec says it is set in {documented[var]}")
    assert not problems, f"stack {stack}:\n" + "\n".join(problems)


def test_the_playbooks_run_each_role_where_its_variables_are() -> None:
    inv = inventory("lab")
    assert {"gpu", "nccl", "lustre_client", "lustre_layout", "datamover"} <= inv.roles_on("gpu001")
    assert {"lustre_server", "lnet"} <= inv.roles_on("mds01")
    assert "lnet" not in inv.roles_on("s3-01") and "objectstore" in inv.roles_on("s3-01")
    oss_halves = [p for p in PLAYS if p.hosts.startswith("kiln_lustre_oss:&kiln_failover_half_")]
    assert len(oss_halves) == 2 and all(_hosts(p.hosts, inv.groups) == {"oss01", "oss02"} for p in oss_halves)


def test_a_value_of_the_wrong_shape_is_reported() -> None:
    inv = inventory("lab")
    rel = "host_vars/gpu001.yml"
    devices = [{"device": "mlx5_0", "role": "storage-and-more", "rate_gbps": 200.0}]
    broken = Inventory({**inv.files, rel: {**inv.files[rel], "rdma_expected_devices": devices, "gpu_modle": "x"}},
                       inv.groups)
    problems = "\n".join(file_problems(broken, rel))
    assert "rdma_expected_devices (role rdma)" in problems and "storage-and-more" in problems
    assert "gpu_modle is declared by no role" in problems


def test_no_managed_file_changes_with_the_plan_digest_alone() -> None:
    """A managed file whose header named the plan digest changed on every spec change, even one that did not concern
    it, and its handler fired: adding a compute node rewrote each pair's corosync.conf and restarted Corosync and
    Pacemaker on both servers. Only the MGS host's parameter record (data, no handler) may carry the digest."""
    carriers = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "roles").glob("*/templates/**/*.j2")
                      if "kiln_plan_digest" in p.read_text())
    assert carriers == ["roles/lustre_server/templates/lustre-server-params.yml.j2"], carriers
