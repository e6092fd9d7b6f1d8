"""Deploy a plan's hosts with the kiln.cluster collection's playbooks (`kiln deploy`; docs/playbooks.md).

`Deployment` is one run: the plan, the inventory `kiln inventory` wrote for it, the playbook and what is passed
through to ansible-playbook. `preflight()` says what stops the run (kiln.deploy.preflight); `run()` runs
`ansible-playbook kiln.cluster.<playbook>` with the collection this kiln carries (kiln.deploy.collection) and follows
it (kiln.deploy.runner). The command line (kiln/cli/deploy.py) writes the inventory and prints.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kiln import yamlio
from kiln.deploy.collection import PLAYBOOKS, ansible_config, ansible_program, collections_dir, package_dir
from kiln.deploy.playbook_roles import inventory_groups, roles_by_host
from kiln.deploy.preflight import HostOS, Problem, check_inventory, check_os_support, gather_os, lab_allowance
from kiln.deploy.runner import PlaybookResult, Report, ansible_env, run_playbook
from kiln.plan.model import Plan

__all__ = ["PLAYBOOKS", "Deployment", "PlaybookResult", "Problem"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    plan: Plan
    stack: str  # as the user named it (for the fixes the messages suggest)
    inventory: Path  # the directory `kiln inventory` wrote: hosts.yml, group_vars/, host_vars/
    playbook: str = "site"
    limit: str | None = None
    tags: str | None = None
    skip_tags: str | None = None
    check: bool = False
    diff: bool = False
    ansible_args: tuple[str, ...] = ()  # passed to ansible-playbook as given (after kiln's own)
    os_check: bool = True

    def env(self) -> dict[str, str]:
        config = ansible_config()
        base = {**os.environ, **({"ANSIBLE_CONFIG": str(config)} if config else {})}
        return ansible_env(base, collections=[collections_dir()])

    def command(self) -> list[str]:
        """The ansible-playbook command line. The hosts run the node programs of this kiln (the monitoring role's
        monitoring_kiln_package_dir); a later -e in ansible_args overrides it."""
        cmd = [ansible_program("ansible-playbook"), "-i", str(self.inventory / "hosts.yml"),
               f"kiln.cluster.{self.playbook}", "-e", f"monitoring_kiln_package_dir={package_dir()}"]
        for flag, value in (("--limit", self.limit), ("--tags", self.tags), ("--skip-tags", self.skip_tags)):
            if value:
                cmd += [flag, value]
        cmd += ["--check"] if self.check else []
        cmd += ["--diff"] if self.diff else []
        return [*cmd, *self.ansible_args]

    def preflight(self, report: Report) -> list[Problem]:
        """Every reason not to run, all at once: the inventory first (nothing else is asked of a stale one), then
        one reachability pass over the run's hosts, then their operating systems."""
        problems = check_inventory(self.plan, self.inventory, self.stack)
        if problems:
            return problems
        report(f"preflight: inventory {self.inventory} is plan {self.plan.spec_digest} (stack {self.plan.stack})")
        systems, problems = gather_os(ansible_program("ansible"), self.inventory, limit=self.limit,
                                      args=self.ansible_args, env=self.env())
        report(f"preflight: {len(systems)} hosts reachable, {len(problems)} not")
        if self.os_check:
            problems += check_os_support(self.plan, systems, self.roles(), lab=lab_allowance(self.ansible_args))
            report("preflight: " + _os_summary(systems))
        else:
            report("preflight: operating systems not checked (--no-os-check)")
        return problems

    def roles(self) -> dict[str, frozenset[str]]:
        """The kiln.cluster roles this run's playbook runs on each host of the inventory."""
        groups = inventory_groups(yamlio.load_inventory((self.inventory / "hosts.yml").read_text(encoding="utf-8")))
        playbook = collections_dir() / "ansible_collections" / "kiln" / "cluster" / "playbooks" / f"{self.playbook}.yml"
        return roles_by_host(playbook, groups)

    def run(self, log: Path, report: Report) -> PlaybookResult:
        return run_playbook(self.command(), env=self.env(), cwd=Path.cwd(), log=log, report=report)


def _os_summary(systems: Mapping[str, HostOS]) -> str:
    counts = Counter(found.label() for found in systems.values())
    return "operating systems " + (", ".join(f"{k} ({n})" for k, n in sorted(counts.items())) or "none reached")
