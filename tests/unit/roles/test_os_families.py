"""Static checks of every role on every OS family CI cannot boot (docs/support-matrix.md, "statically checked").

For each role and each recorded host whose platform the role supports (meta/os_support.yml; the hosts are
tests/fixtures/os_facts/*.json, real release files and the facts Ansible derives from them), the role's effective
variables are built as Ansible builds them: the role's defaults, a shipped stack's rendered inventory for a host the
playbooks run the role on, the host's facts, vars/main.yml and the vars file that the role's own first_found task
(tasks/os.yml) picks for those facts. Then every string of every task and handler (module arguments, loops, task
vars, `when`) and every template a template task renders is templated with Ansible's own Templar and the
collection's filters and lookups. A variable that no file defines, a missing vars file, a missing template or an
unknown filter fails the test; an expression that needs a value only a run can give (a registered result, a
set_fact, a loop item of a run-time list) is skipped and counted, never passed as resolved.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleError, AnsibleUndefinedVariable
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from kiln.knowledge.os_support import os_problems, os_support, platform_of
from tests.conftest import init_ansible_plugins
from tests.unit.roles import os_facts

ROOT = Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"
STACK_ORDER = ("prod-h100", "dev", "lab")  # the first stack whose playbooks run the role on a host gives its inventory

LOADER = DataLoader()


@cache
def _templar() -> Templar:
    # Done at the first check, not at import, so that tests collected before do not find the loader configured.
    init_ansible_plugins()
    return Templar(loader=LOADER)


def templar_for(variables: dict[str, Any]) -> Templar:
    """The one Templar, with these variables (its environment keeps the compiled expressions between cases)."""
    templar = _templar()
    templar.available_variables = variables
    return templar

#: Task keywords (everything else on a task is its module and the module's arguments).
KEYWORDS = {
    "name", "when", "register", "loop", "loop_control", "vars", "tags", "notify", "listen", "changed_when",
    "failed_when", "check_mode", "no_log", "diff", "become", "become_user", "delegate_to", "run_once", "until",
    "retries", "delay", "environment", "ignore_errors", "block", "rescue", "always", "args", "module_defaults",
    "throttle", "any_errors_fatal",
}
#: Lookups that act on the controller (write key files, run commands): never templated here.
ACTING_LOOKUPS = re.compile(r"lookup\(\s*'(ansible\.builtin\.)?(password|pipe)'")
UNDEFINED = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)' is undefined")


def _role_contract() -> ModuleType:
    """tests/unit/**/test_role_contract.py (the stacks' rendered inventories and where the playbooks run roles)."""
    path = next(ROOT.glob("tests/unit/**/test_role_contract.py")).relative_to(ROOT).with_suffix("")
    return importlib.import_module(".".join(path.parts))


CONTRACT = _role_contract()


def trusted(value: Any) -> Any:
    """Role files are trusted templates in Ansible: mark every string of a loaded file so."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, Mapping):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value


@cache
def load(path: Path) -> Any:
    """A role file, parsed once per session (callers do not change it)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader) if path.is_file() else None


@cache
def inventory_host(role: str) -> tuple[str, str]:
    """(stack, host): the first shipped stack and host the playbooks run the role on."""
    for stack in STACK_ORDER:
        inv = CONTRACT.inventory(stack)
        for host in sorted(inv.groups["all"]):
            if role in inv.roles_on(host):
                return stack, host
    raise AssertionError(f"no shipped stack runs role {role} on any host")


def tasks_in(items: Any, inherited_when: list[Any],
             inherited_vars: dict[str, Any]) -> Iterator[tuple[dict[str, Any], list[Any], dict[str, Any]]]:
    """Every task of a task list with the `when` and `vars` of the blocks around it."""
    for task in items or []:
        when = inherited_when + _as_list(task.get("when"))
        task_vars = {**inherited_vars, **(task.get("vars") or {})}
        if "block" in task:
            for key in ("block", "rescue", "always"):
                yield from tasks_in(task.get(key), when, task_vars)
        else:
            yield task, when, task_vars


def _as_list(value: Any) -> list[Any]:
    return [] if value is None else value if isinstance(value, list) else [value]


def run_time_names(role: str) -> set[str]:
    """Variables that only a run defines: registered results, set_fact keys, loop variables."""
    names = {"item", "ansible_loop", "ansible_failed_result", "ansible_failed_task", "omit"}
    for path in sorted((ROLES / role).glob("tasks/*.yml")) + sorted((ROLES / role).glob("handlers/*.yml")):
        for task, _, _ in tasks_in(load(path), [], {}):
            if "register" in task:
                names.add(task["register"])
            for key in ("ansible.builtin.set_fact", "set_fact"):
                if isinstance(task.get(key), dict):
                    names |= set(task[key])
            control = task.get("loop_control") or {}
            names |= {control[k] for k in ("loop_var", "index_var") if k in control}
    return names


@dataclass
class Report:
    resolved: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)


@cache
def all_host_vars(stack: str) -> dict[str, dict[str, Any]]:
    inv = CONTRACT.inventory(stack)
    return {h: inv.host_vars(h) for h in sorted(inv.groups["all"])}


#: Facts of the machine rather than of its release files (which are all a fixture records): a placeholder shows
#: that a name built from them resolves (a package named after the running kernel, uname -r).
MACHINE_FACTS = {"kernel": "KERNEL-RELEASE"}


def role_vars(role: str, host: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The role's variables on a host with these facts, as Ansible layers them (defaults < inventory < role vars),
    with ``extra`` in the inventory's place (an operator's choice)."""
    fixture = os_facts.load(host)
    facts = {**MACHINE_FACTS, **fixture["facts"]}
    stack, inv_host = inventory_host(role)
    inv = CONTRACT.inventory(stack)
    variables: dict[str, Any] = dict(trusted(load(ROLES / role / "defaults" / "main.yml") or {}))
    variables.update(all_host_vars(stack)[inv_host])
    variables.update(extra or {})
    variables.update({
        "ansible_facts": facts, **{f"ansible_{k}": v for k, v in facts.items()},
        "inventory_hostname": inv_host, "role_path": str(ROLES / role), "ansible_check_mode": False,
        "ansible_play_hosts": [inv_host], "ansible_play_batch": [inv_host], "inventory_dir": "/srv/inventory",
        "groups": {g: sorted(h) for g, h in inv.groups.items()},
        "hostvars": all_host_vars(stack), "ansible_managed": "Ansible managed",
        f"{role}_config_only": False, "kiln_allow_not_applicable": False,
    })
    variables.update(trusted(load(ROLES / role / "vars" / "main.yml") or {}))
    return variables


def os_vars_file(role: str, variables: dict[str, Any]) -> Path | None:
    """The vars file the role's own `include_vars` of tasks/os.yml picks (first_found), templated as Ansible does."""
    for task, _, task_vars in tasks_in(load(ROLES / role / "tasks" / "os.yml"), [], {}):
        if "ansible.builtin.include_vars" in task:
            templar = templar_for({**variables, **trusted(task_vars)})
            return Path(str(templar.template(trusted(task["ansible.builtin.include_vars"]))))
    return None


def check(text: Any, templar: Templar, runtime: set[str], where: str, report: Report) -> Any:
    """Template one value; count it resolved or skipped (it needs a run), or record the problem."""
    if not isinstance(text, str) or ("{{" not in text and "{%" not in text):
        return text
    if ACTING_LOOKUPS.search(text):
        report.skipped += 1
        return None
    try:
        value = templar.template(trust_as_template(text))
    except AnsibleUndefinedVariable as e:
        missing = UNDEFINED.search(str(e))
        needs_run = (missing and missing[1] in runtime) or (
            not missing and any(re.search(rf"\b{re.escape(n)}\b", text) for n in runtime))
        if needs_run:
            report.skipped += 1
        else:
            report.problems.append(f"{where}: {text!r}: {e}")
        return None
    except AnsibleError as e:
        if "Omit" in str(e):  # default(omit): the argument is left out, as Ansible does
            report.resolved += 1
            return None
        report.problems.append(f"{where}: {text!r}: {e}")
        return None
    report.resolved += 1
    return value


def condition(expr: Any, templar: Templar, runtime: set[str], where: str, report: Report) -> bool | None:
    """A `when` condition's value, None when only a run can tell."""
    if isinstance(expr, bool):
        return expr
    try:
        return bool(templar.evaluate_conditional(trust_as_template(str(expr))))
    except AnsibleUndefinedVariable as e:
        missing = UNDEFINED.search(str(e))
        if (missing and missing[1] in runtime) or (
                not missing and any(re.search(rf"\b{re.escape(n)}\b", str(expr)) for n in runtime)):
            return None
        report.problems.append(f"{where}: when {expr!r}: {e}")
        return None
    except AnsibleError as e:
        report.problems.append(f"{where}: when {expr!r}: {e}")
        return None


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


_COMPILED: dict[tuple[int, str], Any] = {}
_FROM_STRING = jinja2.Environment.from_string


def _from_string_once(env: jinja2.Environment, source: Any, globals: Any = None, template_class: Any = None) -> Any:
    """jinja2's from_string, compiling each source once per environment (the roles' expressions repeat on every
    host checked; a compiled template renders with any variables)."""
    if globals is not None or template_class is not None:
        return _FROM_STRING(env, source, globals, template_class)
    key = (id(env), str(source))
    if key not in _COMPILED:
        _COMPILED[key] = (env, _FROM_STRING(env, source))
    return _COMPILED[key][1]


def check_role(role: str, host: str, extra: Mapping[str, Any] | None = None) -> Report:
    with mock.patch.object(jinja2.Environment, "from_string", _from_string_once):
        return _check_role(role, host, extra)


def _check_role(role: str, host: str, extra: Mapping[str, Any] | None = None) -> Report:
    report = Report()
    variables = role_vars(role, host, extra)
    runtime = run_time_names(role)
    os_vars = os_vars_file(role, variables)
    if os_vars is not None:
        if not os_vars.is_file():
            report.problems.append(f"tasks/os.yml: first_found picked {os_vars}, which does not exist")
            return report
        variables.update(trusted(load(os_vars) or {}))
    seen: set[Path] = set()
    walk(role, ROLES / role / "tasks" / "main.yml", [], {}, variables, runtime, report, seen)
    walk(role, ROLES / role / "handlers" / "main.yml", [], {}, variables, runtime, report, seen)
    for entry in entry_points(role):  # tasks files the plays run directly (include_role ... tasks_from)
        if ROLES / role / "tasks" / entry not in seen:
            walk(role, ROLES / role / "tasks" / entry, [], {}, variables, runtime, report, seen)
    unreached = sorted(p.name for p in (ROLES / role / "tasks").glob("*.yml") if p not in seen)
    if unreached:
        report.problems.append(f"tasks not reached from tasks/main.yml or a play's tasks_from: {unreached}")
    return report


@cache
def entry_points(role: str) -> tuple[str, ...]:
    """The tasks files of `role` the playbooks run with include_role/import_role `tasks_from`."""
    found: set[str] = set()
    for play in sorted((ROLES.parent / "playbooks").rglob("*.yml")):
        for m in re.finditer(r"name:\s*(?:kiln\.cluster\.)?(\w+)\s*\n\s*tasks_from:\s*(\S+)", play.read_text()):
            if m.group(1) == role:
                found.add(m.group(2))
    return tuple(sorted(found))


INCLUDES = ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks")
#: Modules of one package manager: a task using one must be skipped, by a `when` this check can evaluate, on
#: every host of the other family.
FAMILY_MODULES = {
    "Debian": {"ansible.builtin.apt", "ansible.builtin.apt_key", "ansible.builtin.apt_repository",
               "ansible.builtin.deb822_repository", "ansible.builtin.dpkg_selections"},
    "RedHat": {"ansible.builtin.dnf", "ansible.builtin.yum_repository", "ansible.builtin.rpm_key",
               "ansible.builtin.dnf5", "ansible.posix.selinux"},
}


def walk(role: str, path: Path, when: list[Any], inherited: dict[str, Any], variables: dict[str, Any],
         runtime: set[str], report: Report, seen: set[Path]) -> None:
    """Check every task of a task file and, with their `vars` and `when`, the files it imports or includes."""
    if not path.is_file():
        return
    seen.add(path)
    for task, task_when, task_vars in tasks_in(load(path), when, inherited):
        where = f"{path.relative_to(ROLES)}: {task.get('name', '?')}"
        include = next((task[k] for k in INCLUDES if k in task), None)
        if include is not None:
            # Every included file is checked, whatever its `when` says for this inventory host (an operator's
            # choice or another host turns it on); the conditions of its tasks still apply.
            name = include["file"] if isinstance(include, dict) else include
            walk(role, path.parent / str(name), when, task_vars, variables, runtime, report, seen)
            continue
        templar = templar_for({**variables, **trusted(task_vars)})
        if any(condition(c, templar, runtime, where, report) is False for c in task_when):
            continue  # this OS or this inventory never runs the task
        family = variables["ansible_facts"]["os_family"]
        foreign = {m for f, modules in FAMILY_MODULES.items() if f != family for m in modules} & set(task)
        if foreign:
            report.problems.append(f"{where}: {sorted(foreign)} would run on an {family} host (no `when` rules it out)")
        check_task(role, task, task_vars, where, variables, runtime, report)


def check_task(role: str, task: dict[str, Any], task_vars: dict[str, Any], where: str, variables: dict[str, Any],
               runtime: set[str], report: Report) -> None:
    templar = templar_for({**variables, **trusted(task_vars)})
    items: list[Any] = [None]
    if "loop" in task:
        looped = check(task["loop"], templar, runtime, where + " (loop)", report)
        if isinstance(looped, list) and not looped:
            return
        items = list(looped)[:2] if isinstance(looped, list) else [None]
    module = {k: v for k, v in task.items() if k not in KEYWORDS}
    for item in items:
        item_vars = {**variables, **trusted(task_vars), **({"item": item} if item is not None else {})}
        templar = templar_for(item_vars)
        for text in [task.get("name", ""), *strings(module), *strings(task.get("environment"))]:
            check(text, templar, runtime, where, report)
        template = module.get("ansible.builtin.template")
        if not isinstance(template, dict):
            continue
        src = check(template.get("src"), templar, runtime, where, report) or template.get("src")
        if "{{" in str(src):
            continue
        source = ROLES / role / "templates" / str(src)
        if not source.is_file():
            report.problems.append(f"{where}: template {src} does not exist")
            continue
        searching = templar.copy_with_new_env(searchpath=[str(source.parent)])
        check(source.read_text(encoding="utf-8"), searching, runtime, f"{where} ({src})", report)


def cases() -> list[tuple[str, str]]:
    data = os_support()
    out = []
    for role, support in sorted(data.roles.items()):
        for host in os_facts.hosts():
            if platform_of(os_facts.load(host)["facts"]) in support.platforms:
                out.append((role, host))
    return out


@pytest.mark.parametrize("host", os_facts.hosts())
def test_recorded_facts_are_what_ansible_derives_from_the_release_files(host: str) -> None:
    fixture = os_facts.load(host)
    derived = os_facts.derive(fixture["release_files"])
    assert {k: fixture["facts"][k] for k in os_facts.DISTRIBUTION_KEYS} == derived
    assert (os_facts.FIXTURES / f"{host}.source").read_text(encoding="utf-8").strip()


def test_every_platform_has_recorded_hosts_and_every_host_a_platform() -> None:
    found = {host: platform_of(os_facts.load(host)["facts"]) for host in os_facts.hosts()}
    assert None not in found.values(), found
    assert set(found.values()) == set(os_support().platforms)


@pytest.mark.parametrize(("role", "host"), cases())
def test_role_resolves_every_package_service_path_and_template_on(role: str, host: str) -> None:
    report = check_role(role, host)
    assert not report.problems, f"role {role} on {host}:\n" + "\n".join(report.problems)
    assert report.resolved > 0


#: The vendor repositories a role adds only when the operator turns them on: checked with the switch on, on one
#: recorded host of each platform the role supports (a default run skips those tasks).
OPT_IN = {
    "gpu": {"gpu_nvidia_cuda_repo": True},
    "lustre_client": {"lustre_client_whamcloud_repo": True},
    "lustre_server": {"lustre_server_whamcloud_repo": True},
    "rdma": {"rdma_doca_repo": True},
}


def _whamcloud_has_no_ubuntu_client(role: str, host: str) -> bool:
    """Whamcloud built no client of the shipped stack's release for this Ubuntu (the role stops there, tested
    below)."""
    facts = os_facts.load(host)["facts"]
    published = role_vars(role, host).get("lustre_client_whamcloud_ubuntu", {})
    return (role == "lustre_client" and facts["distribution"] == "Ubuntu"
            and facts["distribution_version"] not in published)


def opt_in_cases() -> list[tuple[str, str]]:
    first = {}
    for role, host in cases():
        first.setdefault((role, platform_of(os_facts.load(host)["facts"])), host)
    return sorted((role, host) for (role, _), host in first.items()
                  if role in OPT_IN and not _whamcloud_has_no_ubuntu_client(role, host))


@pytest.mark.parametrize(("role", "host"), opt_in_cases())
def test_role_resolves_its_opt_in_vendor_repository_on(role: str, host: str) -> None:
    report = check_role(role, host, OPT_IN[role])
    assert not report.problems, f"role {role} on {host} with {OPT_IN[role]}:\n" + "\n".join(report.problems)


@pytest.mark.parametrize("role", ["lustre_client", "lustre_server"])
def test_whamcloud_is_refused_where_it_publishes_nothing(role: str) -> None:
    # Debian runs the Lustre roles only as the lab's stand-in: the first check after the OS pre-flight refuses
    # Whamcloud's repository there, before any change.
    variables = role_vars(role, "debian12", {f"{role}_whamcloud_repo": True})
    os_vars = os_vars_file(role, variables)
    assert os_vars is not None and os_vars.name == "Debian.yml"
    variables.update(trusted(load(os_vars) or {}))
    refusal = next(t for t, _, _ in tasks_in(load(ROLES / role / "tasks" / "os.yml"), [], {})
                   if str(t.get("name", "")).startswith("Stop when Whamcloud's repository"))
    templar = templar_for(variables)
    assert templar.evaluate_conditional(trust_as_template(refusal["when"]))
    assert not templar.evaluate_conditional(trust_as_template(refusal["ansible.builtin.assert"]["that"][0]))


def _client_preflight(host: str, extra: Mapping[str, Any], kernel: str | None = None) -> tuple[bool, bool]:
    """Whether lustre_client's two Whamcloud pre-flight checks pass on a recorded host: a client of the release for
    this distribution, and (Ubuntu) the kernel its modules are built for."""
    variables = role_vars("lustre_client", host, {"lustre_client_whamcloud_repo": True, **extra})
    if kernel:
        variables["ansible_facts"] = {**variables["ansible_facts"], "kernel": kernel}
    os_vars = os_vars_file("lustre_client", variables)
    assert os_vars is not None
    variables.update(trusted(load(os_vars) or {}))
    templar = templar_for(variables)
    checks = [t for t, _, _ in tasks_in(load(ROLES / "lustre_client" / "tasks" / "os.yml"), [], {})
              if str(t.get("name", "")).startswith("Stop when")]
    published, kernel_ok = (
        not all(templar.evaluate_conditional(trust_as_template(w)) for w in _as_list(t["when"]))
        or all(templar.evaluate_conditional(trust_as_template(c)) for c in t["ansible.builtin.assert"]["that"])
        for t in checks[:2])
    return published, kernel_ok


def test_whamcloud_ubuntu_clients_only_where_the_release_built_them_and_for_its_kernel() -> None:
    """2.15.7 built Ubuntu 22.04 client modules for kernel 5.15.0-88 and none for 24.04; 2.16.1 none for either
    (lustre-release lustre/ChangeLog, "Client primary kernels"): the role stops before any change elsewhere."""
    l215 = {"lustre_client_whamcloud_release": "2.15.7", "lustre_client_whamcloud_ubuntu": {"22.04": "5.15.0-88"}}
    l216 = {"lustre_client_whamcloud_release": "2.16.1", "lustre_client_whamcloud_ubuntu": {}}
    assert _client_preflight("ubuntu2204", l215, kernel="5.15.0-88-generic") == (True, True)
    assert _client_preflight("ubuntu2204", l215, kernel="5.15.0-91-generic") == (True, False)
    assert _client_preflight("ubuntu2404", l215)[0] is False
    assert _client_preflight("ubuntu2204", l216)[0] is False
    assert _client_preflight("rhel9", l216)[0] is True


def test_doca_is_refused_where_nvidia_publishes_nothing_and_resolves_where_it_does() -> None:
    """The rdma role's pre-flight stops a DOCA-OFED deployment on Debian (no DOCA-Host repository kiln has
    verified) before any change, and names NVIDIA's directory of the release on Ubuntu and EL."""
    refusal = next(t for t, _, _ in tasks_in(load(ROLES / "rdma" / "tasks" / "os.yml"), [], {})
                   if str(t.get("name", "")).startswith("Stop when NVIDIA's DOCA-Host repository"))
    urls = {}
    for host in ("debian12", "ubuntu2204", "ubuntu2404", "rocky8", "rhel9"):
        variables = role_vars("rdma", host, {"rdma_doca_repo": True})
        os_vars = os_vars_file("rdma", variables)
        assert os_vars is not None
        variables.update(trusted(load(os_vars) or {}))
        templar = templar_for(variables)
        assert templar.evaluate_conditional(trust_as_template(refusal["when"]))
        allowed = all(templar.evaluate_conditional(trust_as_template(c))
                      for c in refusal["ansible.builtin.assert"]["that"])
        assert allowed == (host != "debian12"), host
        if allowed:
            urls[host] = templar.template(trust_as_template("{{ __rdma_doca_url }}"))
    arm = role_vars("rdma", "ubuntu2404", {"rdma_doca_repo": True})
    arm["ansible_facts"] = {**arm["ansible_facts"], "architecture": "aarch64"}
    arm.update(trusted(load(ROLES / "rdma" / "vars" / "Debian.yml") or {}))
    assert not all(templar_for(arm).evaluate_conditional(trust_as_template(c))
                   for c in refusal["ansible.builtin.assert"]["that"])  # no arm64 directory kiln has verified
    base = "https://linux.mellanox.com/public/repo/doca/2.9.1/"
    assert urls == {"ubuntu2204": base + "ubuntu22.04/x86_64/", "ubuntu2404": base + "ubuntu24.04/x86_64/",
                    "rocky8": base + "rhel8.3/x86_64/", "rhel9": base + "rhel9.6/x86_64/"}


def test_every_role_is_checked_on_every_platform_it_supports() -> None:
    checked = {(role, platform_of(os_facts.load(host)["facts"])) for role, host in cases()}
    wanted = {(role, p) for role, s in os_support().roles.items() for p in s.platforms}
    assert checked == wanted
    assert {p.name for p in ROLES.iterdir() if (p / "tasks" / "main.yml").is_file()} == set(os_support().roles)


GALAXY = {"debian12": ("Debian", "bookworm"), "ubuntu2204": ("Ubuntu", "jammy"), "ubuntu2404": ("Ubuntu", "noble"),
          "el8": ("EL", "8"), "el9": ("EL", "9")}


@pytest.mark.parametrize("role", sorted(os_support().roles))
def test_galaxy_platforms_are_the_supported_ones(role: str) -> None:
    meta = load(ROLES / role / "meta" / "main.yml")["galaxy_info"]["platforms"]
    listed = {(p["name"], str(v)) for p in meta for v in p["versions"]}
    assert listed == {GALAXY[p] for p in os_support().roles[role].platforms}


def test_unsupported_combinations_are_refused_with_the_reason_and_the_supported_list() -> None:
    ubuntu = os_facts.load("ubuntu2204")["facts"]
    debian = os_facts.load("debian12")["facts"]
    refused = os_problems(["lustre_server", "common"], ubuntu)
    assert list(refused) == ["lustre_server"]
    assert "EL 9" in refused["lustre_server"] and "Whamcloud" in refused["lustre_server"]
    assert os_problems(["lustre_server"], debian) and not os_problems(["lustre_server"], debian, lab=True)
    suse = {"os_family": "Suse", "distribution": "SLES", "distribution_major_version": "15",
            "distribution_version": "15.6"}
    assert set(os_problems(sorted(os_support().roles), suse)) == set(os_support().roles)


#: SELinux as an EL host reports it (ansible_facts.selinux with the min subset).
SELINUX_FACTS = {
    "enforcing": {"status": "enabled", "mode": "enforcing", "config_mode": "enforcing", "type": "targeted"},
    "disabled": {"status": "disabled"},
}


def _selinux_task(role: str, host: str, selinux: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The ansible.posix.selinux task of lustre_server as it would run on a host whose SELinux is ``selinux``
    (templated module arguments), or None when its `when` skips it."""
    variables = role_vars(role, host, extra)
    facts = {**variables["ansible_facts"], "selinux": SELINUX_FACTS[selinux]}
    variables.update({"ansible_facts": facts, "ansible_selinux": facts["selinux"]})
    os_vars = os_vars_file(role, variables)
    assert os_vars is not None and os_vars.is_file(), os_vars
    variables.update(trusted(load(os_vars) or {}))
    report = Report()
    for task, when, task_vars in tasks_in(load(ROLES / role / "tasks" / "selinux.yml"), [], {}):
        if "ansible.posix.selinux" not in task:
            continue
        templar = templar_for({**variables, **trusted(task_vars)})
        if any(condition(c, templar, set(), "selinux.yml", report) is False for c in when):
            return None
        args = {k: check(v, templar, set(), "selinux.yml", report) for k, v in task["ansible.posix.selinux"].items()}
        assert not report.problems, report.problems
        return args
    raise AssertionError("roles/lustre_server/tasks/selinux.yml has no ansible.posix.selinux task")


@pytest.mark.parametrize("host", [h for r, h in cases() if r == "lustre_server"])
def test_lustre_server_sets_selinux_only_on_el_and_only_where_the_state_asks(host: str) -> None:
    el = os_facts.load(host)["facts"]["os_family"] == "RedHat"
    enforcing = _selinux_task("lustre_server", host, "enforcing")
    assert enforcing == ({"state": "permissive", "policy": "targeted"} if el else None)
    # A host with SELinux off already meets the default; asked for disabled, an enforcing host is switched.
    assert _selinux_task("lustre_server", host, "disabled") is None
    disabled = _selinux_task("lustre_server", host, "enforcing", {"lustre_server_selinux_state": "disabled"})
    assert disabled == ({"state": "disabled", "policy": "targeted"} if el else None)
    assert _selinux_task("lustre_server", host, "enforcing", {"lustre_server_selinux_state": ""}) is None


def _gpu_driver(host: str, branch: int, flavor: str) -> tuple[bool, list[str], str]:
    """Whether the gpu role's driver pre-flight passes on a recorded host for a branch and module flavor, and the
    driver and Fabric Manager packages it would install there."""
    variables = role_vars("gpu", host, {"gpu_nvidia_cuda_repo": True, "gpu_driver_branch": branch,
                                        "gpu_kernel_modules": flavor})
    os_vars = os_vars_file("gpu", variables)
    assert os_vars is not None
    variables.update(trusted(load(os_vars) or {}))
    refusal = next(t for t, _, _ in tasks_in(load(ROLES / "gpu" / "tasks" / "os.yml"), [], {})
                   if str(t.get("name", "")).startswith("Stop when kiln knows no packages of the driver branch"))
    templar = templar_for(variables)
    assert templar.evaluate_conditional(trust_as_template(refusal["when"]))
    allowed = all(templar.evaluate_conditional(trust_as_template(c)) for c in refusal["ansible.builtin.assert"]["that"])
    packages = templar.template(trust_as_template("{{ __gpu_driver_install }}"))
    return allowed, list(packages), str(templar.template(trust_as_template("{{ __gpu_fabricmanager_install }}")))


def test_gpu_installs_the_plans_driver_branch_in_its_module_flavor_or_stops() -> None:
    """NVIDIA's CUDA repositories name a branch's driver per family and flavor (roles/gpu/vars/*.yml cite where):
    the role installs those, and stops before any change on a branch whose layout kiln has not verified."""
    assert _gpu_driver("ubuntu2204", 550, "open") == (
        True, ["nvidia-driver-550-open", "cuda-drivers-550"], "nvidia-fabricmanager-550")
    assert _gpu_driver("ubuntu2404", 570, "open") == (True, ["nvidia-open-570"], "nvidia-fabricmanager-570")
    assert _gpu_driver("debian12", 580, "proprietary") == (True, ["cuda-drivers-580"], "nvidia-fabricmanager-580")
    assert _gpu_driver("rocky8", 550, "open") == (True, ["@nvidia-driver:550-open"], "nvidia-fabric-manager")
    assert _gpu_driver("rhel9", 565, "proprietary") == (True, ["@nvidia-driver:565-dkms"], "nvidia-fabric-manager")
    for host, branch in (("ubuntu2404", 590), ("rhel9", 580), ("debian12", 525)):
        allowed, packages, _ = _gpu_driver(host, branch, "open")
        assert (allowed, packages) == (False, []), (host, branch)


def test_gpu_installs_the_operators_driver_packages_on_any_branch() -> None:
    variables = role_vars("gpu", "rhel9", {"gpu_nvidia_cuda_repo": True, "gpu_driver_branch": 580,
                                           "gpu_driver_packages": ["nvidia-open"],
                                           "gpu_fabricmanager_package": "nvidia-fabricmanager"})
    variables.update(trusted(load(ROLES / "gpu" / "vars" / "RedHat.yml") or {}))
    templar = templar_for(variables)
    assert templar.template(trust_as_template("{{ __gpu_driver_install }}")) == ["nvidia-open"]
    assert templar.template(trust_as_template("{{ __gpu_fabricmanager_install }}")) == "nvidia-fabricmanager"
