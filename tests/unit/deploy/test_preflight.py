"""kiln deploy's pre-flight: a stale or foreign inventory is refused with the fix, reachability is Ansible's own (a
real `ansible -m setup`), and the OS-support hook names the host, its OS, its role and what is supported."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest
import yaml

from kiln.deploy import preflight
from kiln.deploy.preflight import (
    HostOS,
    check_inventory,
    check_os_support,
    connection_args,
    fixes,
    gather_os,
    lab_allowance,
    os_refusal,
)
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


DEBIAN = HostOS(family="Debian", distribution="Debian", version="12.11", major="12")
UBUNTU = HostOS(family="Debian", distribution="Ubuntu", version="22.04", major="22")
ROCKY = HostOS(family="RedHat", distribution="Rocky", version="9.4", major="9")


def test_without_the_supported_os_data_only_debian_12_passes(plan: Plan, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "os_refusal", lambda: None)
    problems = check_os_support(plan, {"gpu001": DEBIAN, "gpu002": UBUNTU, "oss01": ROCKY}, {})
    assert [(p.check, p.host) for p in problems] == [("os", "gpu002"), ("os", "oss01")]
    assert problems[0].problem == "every role: runs Ubuntu 22.04; kiln's roles support Debian 12"
    assert "--limit '!oss01'" in problems[1].fix
    assert len(fixes(problems)) == 2 and problems[0].line().startswith("os: gpu002: every role: runs Ubuntu 22.04")


def test_the_supported_os_data_answers_where_this_kiln_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def os_problems(roles: list[str], facts: dict[str, str], *, lab: bool = False) -> dict[str, str]:
        return {}

    monkeypatch.setitem(sys.modules, "kiln.knowledge.os_support", types.SimpleNamespace(os_problems=os_problems))
    assert os_refusal() is os_problems


def test_the_roles_refusal_is_asked_about_each_hosts_roles_and_facts(plan: Plan) -> None:
    asked: list[tuple[list[str], dict[str, str], bool]] = []

    def refusal(roles: list[str], facts: dict[str, str], *, lab: bool) -> dict[str, str]:
        asked.append((roles, facts, lab))
        return {"lustre_server": "no Lustre server packages for Ubuntu"} if facts["distribution"] == "Ubuntu" else {}

    roles = {"oss01": frozenset({"common", "lustre_server"}), "gpu001": frozenset({"common", "gpu"})}
    problems = check_os_support(plan, {"oss01": UBUNTU, "gpu001": ROCKY}, roles, lab=True, refusal=refusal)
    assert [p.line() for p in problems] == ["os: oss01: lustre_server: no Lustre server packages for Ubuntu"]
    assert sorted(asked) == [
        (["common", "gpu"], {"os_family": "RedHat", "distribution": "Rocky", "distribution_version": "9.4",
                             "distribution_major_version": "9"}, True),
        (["common", "lustre_server"], {"os_family": "Debian", "distribution": "Ubuntu",
                                       "distribution_version": "22.04", "distribution_major_version": "22"}, True),
    ]


def test_a_host_outside_the_run_is_not_judged(plan: Plan) -> None:
    assert check_os_support(plan, {}, {}, refusal=lambda *a, **k: {"common": "no"}) == []


@pytest.mark.parametrize(("given", "lab"), [
    ([], False),
    (["-e", "kiln_allow_not_applicable=true"], True),
    (["--extra-vars", '{"kiln_allow_not_applicable": true}'], True),
    (["-e", "kiln_allow_not_applicable=true", "-e", "kiln_allow_not_applicable=false"], False),
    (["-e", "@VARS"], True),
    (["-e", "@missing.yml"], False),
    (["--tags", "kiln_allow_not_applicable=true"], False),
], ids=["none", "key=value", "json", "last-wins", "vars-file", "unreadable-file", "not-an-extra-var"])
def test_the_labs_allowance_is_read_from_the_extra_vars(given: list[str], lab: bool, tmp_path: Path) -> None:
    (tmp_path / "lab-vars.yml").write_text("kiln_allow_not_applicable: true\nother: 1\n")
    args = [a.replace("@VARS", f"@{tmp_path / 'lab-vars.yml'}") for a in given]
    assert lab_allowance(args) is lab


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
