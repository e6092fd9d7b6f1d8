"""kiln deploy's pre-flight: a stale or foreign inventory is refused with the fix, reachability is Ansible's own (a
real `ansible -m setup`), and the OS-support hook names the host, its OS, its role and what is supported."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from kiln.deploy.preflight import HostOS, check_inventory, check_os_support, connection_args, fixes, gather_os
from kiln.plan import build_plan
from kiln.plan.model import Plan
from kiln.render.inventory import render_inventory
from kiln.spec import load_stack

ROOT = Path(__file__).resolve().parents[3]
ANSIBLE = Path(sys.executable).parent / "ansible"


@pytest.fixture(scope="module")
def plan() -> Plan:
    return build_plan(load_stack("lab", ROOT / "stacks"), source="lab")


@pytest.fixture
def inventory(plan: Plan, tmp_path: Path) -> Path:
    out = tmp_path / "inventory"
    for rel, text in render_inventory(plan).items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return out


def test_the_current_plans_inventory_passes(plan: Plan, inventory: Path) -> None:
    assert check_inventory(plan, inventory, "lab") == []


def test_a_stale_inventory_is_refused_with_the_fix(plan: Plan, inventory: Path) -> None:
    all_vars = inventory / "group_vars" / "all" / "kiln.yml"
    all_vars.write_text(all_vars.read_text().replace(plan.spec_digest, "0123456789abcdef"))
    (problem,) = check_inventory(plan, inventory, "lab")
    assert problem.check == "inventory" and problem.host is None
    assert "plan 0123456789abcdef" in problem.problem and f"now plan {plan.spec_digest}" in problem.problem
    assert f"kiln inventory lab --out {inventory}" in problem.fix


def test_a_directory_kiln_did_not_write_is_refused(plan: Plan, tmp_path: Path) -> None:
    (problem,) = check_inventory(plan, tmp_path, "lab")
    assert "not an inventory `kiln inventory` wrote" in problem.problem


def test_an_inventory_with_other_hosts_is_refused(plan: Plan, inventory: Path) -> None:
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    hosts["all"]["children"]["kiln_compute"]["hosts"]["gpu099"] = None
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    (problem,) = check_inventory(plan, inventory, "lab")
    assert "not planned: gpu099; missing: none" in problem.problem


def test_connection_args_keep_what_changes_how_hosts_are_reached() -> None:
    given = ["-e", "@lab.yml", "--ssh-common-args", "-F cfg", "--tags", "x", "-v", "--extra-vars=a=b", "-uroot",
             "--step", "--private-key", "key", "--vault-password-file", "pw"]
    assert connection_args(given) == ["--extra-vars", "@lab.yml", "--extra-vars", "a=b", "--user", "root",
                                      "--private-key", "key", "--ssh-common-args", "-F cfg",
                                      "--vault-password-file", "pw"]


def test_the_os_hook_names_host_os_role_and_the_supported_releases(plan: Plan) -> None:
    debian = HostOS(family="Debian", distribution="Debian", version="12.11", major="12")
    ubuntu = HostOS(family="Debian", distribution="Ubuntu", version="22.04", major="22")
    rocky = HostOS(family="RedHat", distribution="Rocky", version="9.4", major="9")
    problems = check_os_support(plan, {"gpu001": debian, "gpu002": ubuntu, "oss01": rocky})
    assert [(p.check, p.host) for p in problems] == [("os", "gpu002"), ("os", "oss01")]
    assert problems[0].problem == "runs Ubuntu 22.04; kiln's roles support Debian 12 on compute hosts"
    assert problems[1].problem == "runs Rocky 9.4; kiln's roles support Debian 12 on oss hosts"
    assert "--limit '!oss01'" in problems[1].fix
    assert len(fixes(problems)) == 2 and problems[0].line().startswith("os: gpu002: runs Ubuntu 22.04")


@pytest.mark.skipif(not ANSIBLE.exists(), reason="needs ansible (the `deploy` extra)")
def test_gather_os_reaches_hosts_as_the_playbook_will(inventory: Path, tmp_path: Path) -> None:
    env = {**os.environ, "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp")}
    # gpu001 over the local connection: this machine's distribution facts
    systems, problems = gather_os(str(ANSIBLE), inventory, limit="gpu001", env=env,
                                  args=["-c", "local", "-e", f"ansible_python_interpreter={sys.executable}", "-v"])
    assert problems == [] and list(systems) == ["gpu001"]
    assert systems["gpu001"].distribution and systems["gpu001"].major
    # mds01 at a port nothing listens on: unreachable, with Ansible's reason and the fix
    systems, problems = gather_os(str(ANSIBLE), inventory, limit="mds01", env=env,
                                  args=["-e", "ansible_host=127.0.0.1", "-e", "ansible_port=1", "-T", "3"])
    (problem,) = problems
    assert systems == {} and (problem.check, problem.host) == ("reachability", "mds01")
    assert "unreachable" in problem.problem and "port 1" in problem.problem and "--limit" in problem.fix
