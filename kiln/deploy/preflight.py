"""What `kiln deploy` checks before it runs a playbook: the inventory is the current plan's, Ansible reaches every
host it is about to configure, and each host runs an operating system the roles support there.

Every check returns `Problem`s (what, where, the fix), all collected and reported together; the playbook runs only
when there are none. Nothing here changes a host: reachability is one `ansible -m setup` call that gathers only the
distribution facts, through the same inventory and connection options as the playbook.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kiln import yamlio
from kiln.plan.model import Plan

ALL_VARS = Path("group_vars") / "all" / "kiln.yml"  # where `kiln inventory` writes kiln_plan_digest


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One reason not to run the playbook: which check, which host (None: the whole run), what is wrong, the fix."""

    check: str  # inventory, reachability, os
    host: str | None
    problem: str
    fix: str

    def line(self) -> str:
        """`check: host: problem` (the fix is said once for the problems that share it: `fixes`)."""
        where = f"{self.host}: " if self.host else ""
        return f"{self.check}: {where}{self.problem.rstrip('. ')}"


def fixes(problems: Sequence[Problem]) -> list[str]:
    """The distinct fixes of `problems`, in order, each once."""
    return list(dict.fromkeys(p.fix for p in problems))


@dataclass(frozen=True, slots=True, kw_only=True)
class HostOS:
    """The operating system of a host, as Ansible's distribution facts name it."""

    family: str  # ansible_os_family: Debian, RedHat
    distribution: str  # ansible_distribution: Debian, Ubuntu, RedHat, Rocky, AlmaLinux
    version: str  # ansible_distribution_version: 12.11, 22.04, 9.4
    major: str  # ansible_distribution_major_version: 12, 22, 9

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any]) -> HostOS:
        return cls(family=str(facts.get("ansible_os_family", "")),
                   distribution=str(facts.get("ansible_distribution", "")),
                   version=str(facts.get("ansible_distribution_version", "")),
                   major=str(facts.get("ansible_distribution_major_version", "")))

    def label(self) -> str:
        return f"{self.distribution} {self.version}".strip() or "an unknown operating system"

    def facts(self) -> dict[str, str]:
        """The facts again, as `ansible_facts` names them (without the ansible_ prefix)."""
        return {"os_family": self.family, "distribution": self.distribution,
                "distribution_version": self.version, "distribution_major_version": self.major}


# -- the inventory ------------------------------------------------------------------------------------------------

def check_inventory(plan: Plan, inventory: Path, stack: str) -> list[Problem]:
    """The inventory directory holds what `kiln inventory` writes for this plan: its digest and its hosts."""
    fix = f"write it again from the current spec, `kiln inventory {stack} --out {inventory}`, or leave out --inventory"
    hosts_file, all_vars = inventory / "hosts.yml", inventory / ALL_VARS
    if not hosts_file.is_file() or not all_vars.is_file():
        return [Problem(check="inventory", host=None, fix=fix,
                        problem=f"{inventory} is not an inventory `kiln inventory` wrote (no hosts.yml or {ALL_VARS})")]
    digest = (yamlio.load_inventory(all_vars.read_text()) or {}).get("kiln_plan_digest")
    if digest != plan.spec_digest:
        return [Problem(check="inventory", host=None, fix=fix,
                        problem=f"{inventory} was written for plan {digest} and the spec of stack {plan.stack} is now "
                                f"plan {plan.spec_digest}: a stale inventory would apply old values")]
    listed = set(_inventory_hosts(yamlio.load_inventory(hosts_file.read_text()) or {}))
    planned = {h.name for h in plan.hosts}
    if listed != planned:
        extra, missing = ", ".join(sorted(listed - planned)) or "none", ", ".join(sorted(planned - listed)) or "none"
        problem = f"{hosts_file} does not list the plan's hosts (not planned: {extra}; missing: {missing})"
        return [Problem(check="inventory", host=None, problem=problem, fix=fix)]
    return []


def _inventory_hosts(node: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for group in node.values():
        if isinstance(group, Mapping):
            out += list((group.get("hosts") or {}).keys())
            out += _inventory_hosts(group.get("children") or {})
    return out


# -- reachability and the hosts' operating systems ----------------------------------------------------------------

_CONNECTION_OPTIONS = (("--extra-vars", "-e"), ("--user", "-u"), ("--private-key", "--key-file"),
                       ("--connection", "-c"), ("--timeout", "-T"), ("--ssh-common-args",), ("--ssh-extra-args",),
                       ("--vault-id",), ("--vault-password-file", "--vault-pass-file"))


def connection_args(ansible_args: Sequence[str]) -> list[str]:
    """Of the arguments passed through to ansible-playbook, those that change how hosts are reached (and the vault
    options that let Ansible read encrypted vars), so the reachability check reaches hosts as the playbook will."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for flags in _CONNECTION_OPTIONS:
        p.add_argument(*flags, action="append", default=[], dest=flags[0])
    known = vars(p.parse_known_args(list(ansible_args))[0])
    return [arg for flags in _CONNECTION_OPTIONS for value in known[flags[0]] for arg in (flags[0], value)]


def gather_os(ansible: str, inventory: Path, *, limit: str | None, args: Sequence[str], env: Mapping[str, str],
              timeout_s: float = 600) -> tuple[dict[str, HostOS], list[Problem]]:
    """Reach every host of the run (the inventory, narrowed by `limit`) with Ansible's setup module, gathering only
    the distribution facts. Returns each reached host's OS, and a problem for each host Ansible could not use."""
    cmd = [ansible, "all", "-i", str(inventory / "hosts.yml"), "-m", "ansible.builtin.setup",
           "-a", "gather_subset=!all,!min,distribution", "--one-line", *connection_args(args)]
    if limit:
        cmd += ["--limit", limit]
    # One line per host (the oneline callback), and no other callback (timers, profilers) printing beside it.
    run_env = {**env, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "0", "ANSIBLE_NOCOLOR": "1"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=run_env, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {}, [Problem(check="reachability", host=None, problem=f"ansible did not answer within {timeout_s:.0f} s",
                            fix="check the hosts and the network, or narrow the run with --limit")]
    results = [m.groups() for m in map(_ONE_LINE.match, proc.stdout.splitlines()) if m]
    if not results:
        detail = " ".join((proc.stderr or proc.stdout).split())[-400:] or f"exit status {proc.returncode}"
        return {}, [Problem(check="reachability", host=None, problem=f"ansible reached no host: {detail}",
                            fix="check the inventory, --limit and the arguments passed to ansible after --")]
    return _read_results(results)


# `host | SUCCESS => {...}`, `host | FAILED! => {...}`, `host | UNREACHABLE!: message` (the oneline callback)
_ONE_LINE = re.compile(r"^(\S+) \| ([A-Z]+!?)(?: => |: )(.*)$")


def _read_results(results: Sequence[tuple[str, ...]]) -> tuple[dict[str, HostOS], list[Problem]]:
    systems: dict[str, HostOS] = {}
    problems: list[Problem] = []
    for host, status, rest in sorted(results):
        result = _json_object(rest)
        message = " ".join(str(result.get("msg", "")).split())
        if status == "UNREACHABLE!":
            problems.append(Problem(check="reachability", host=host, problem=f"unreachable: {message}",
                                    fix="check that the host is up and that SSH accepts the inventory's user and key "
                                        "(or pass the connection options after --), or leave it out with --limit"))
        elif status in ("SUCCESS", "CHANGED"):
            facts = result.get("ansible_facts")
            systems[host] = HostOS.from_facts(facts if isinstance(facts, dict) else {})
        else:
            problems.append(Problem(check="reachability", host=host, problem=f"reached, but Ansible cannot run modules "
                                    f"there: {message}", fix="install Python 3 on the host, or set "
                                    "ansible_python_interpreter (-- -e ansible_python_interpreter=/usr/bin/python3)"))
    return systems, problems


def _json_object(text: str) -> dict[str, Any]:
    """A result's JSON object, or {"msg": text} when the line holds a message instead."""
    try:
        data = json.loads(text)
    except ValueError:
        return {"msg": text}
    return data if isinstance(data, dict) else {"msg": text}


# -- the operating-system support hook -----------------------------------------------------------------------------

OsRefusal = Callable[..., Mapping[str, str]]  # (roles, facts, *, lab) -> {role: why it refuses this host}

# Until this kiln carries the supported-OS data (kiln.knowledge.os_support, the data the roles' own pre-flight
# reads), the check is the minimal one: every role installs with apt and names Debian's packages, and Debian 12 is
# the release molecule and the lab test.
FALLBACK_OS = (("Debian", "12"),)


def os_refusal() -> OsRefusal | None:
    """The roles' own OS refusal, `kiln.knowledge.os_support.os_problems`, where this kiln has it; else None."""
    try:
        module = importlib.import_module("kiln.knowledge.os_support")
    except ModuleNotFoundError:
        return None
    found = getattr(module, "os_problems", None)
    return found if callable(found) else None


def check_os_support(plan: Plan, systems: Mapping[str, HostOS], roles: Mapping[str, frozenset[str]], *,
                     lab: bool = False, refusal: OsRefusal | None = None) -> list[Problem]:
    """The hosts whose operating system a role that runs there does not support: one Problem per host.

    `systems` maps each reached host to its HostOS (Ansible's distribution facts); `roles` maps each host to the
    kiln.cluster roles the playbook runs there (kiln.deploy.playbook_roles); `lab` is the lab's allowance
    (kiln_allow_not_applicable). `refusal` answers for the roles (default: `os_refusal()`; without it the minimal
    Debian 12 check). Hosts not in `systems` (not reached, or outside --limit) are not judged here."""
    refusal = refusal or os_refusal()
    problems = []
    for host in plan.hosts:
        found = systems.get(host.name)
        if found is None:
            continue
        host_roles = sorted(roles.get(host.name, ()))
        why = refusal(host_roles, found.facts(), lab=lab) if refusal else _fallback_refusal(found)
        if why:
            problems.append(Problem(
                check="os", host=host.name, problem="; ".join(f"{role}: {text}" for role, text in sorted(why.items())),
                fix="install a supported release on it, or leave it out with --limit '!" + host.name + "' "
                    "(--no-os-check runs the playbook anyway, unsupported)",
            ))
    return problems


def _fallback_refusal(found: HostOS) -> dict[str, str]:
    if (found.distribution, found.major) in FALLBACK_OS:
        return {}
    listed = ", ".join(f"{d} {v}" for d, v in FALLBACK_OS)
    return {"every role": f"runs {found.label()}; kiln's roles support {listed}"}


def lab_allowance(ansible_args: Sequence[str]) -> bool:
    """Whether the extra variables passed through (`-e k=v`, `-e '{...}'`, `-e @file`) set the lab's switch,
    kiln_allow_not_applicable, true (the last one given wins, as in Ansible)."""
    value: Any = False
    args = connection_args(ansible_args)
    for given in (v for flag, v in zip(args[::2], args[1::2], strict=True) if flag == "--extra-vars"):
        found = _extra_vars(given)
        if "kiln_allow_not_applicable" in found:
            value = found["kiln_allow_not_applicable"]
    return str(value).strip().lower() in ("true", "yes", "on", "1")


def _extra_vars(given: str) -> Mapping[str, Any]:
    if given.startswith("@"):
        try:
            data = yamlio.load(Path(given[1:]).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            return {}  # ansible-playbook names an unreadable file itself
    elif given.lstrip().startswith(("{", "[")):
        try:
            data = yamlio.load(given)
        except yaml.YAMLError:
            return {}
    else:
        data = dict(part.split("=", 1) for part in shlex.split(given) if "=" in part)
    return data if isinstance(data, Mapping) else {}
