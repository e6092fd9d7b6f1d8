"""Which of the collection's roles a playbook runs on each host, read from the playbook and the inventory.

The pre-flight's OS check asks about the roles that will run on a host, so it reads them where they are decided:
each play's `hosts:` pattern and its roles (`roles:`, and tasks without a `when` that include or import a role),
over the groups of the inventory `kiln inventory` wrote. Patterns follow Ansible's host-pattern rules: `a:b` is a
union, `:&a` an intersection, `:!a` an exclusion. A term Ansible only knows at run time (a Jinja2 expression such
as `{{ kiln_scope }}`, or a group a play creates with group_by) restricts nothing here. A role included under a
`when` (the Lustre packages play's) is not counted: only the run knows where its condition holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kiln import yamlio

_ROLE_TASKS = ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role")
_IMPORT_PLAYBOOK = ("ansible.builtin.import_playbook", "import_playbook")


def inventory_groups(tree: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """{group: its hosts, its children's included} of a hosts.yml tree; `all` holds every host."""
    groups: dict[str, set[str]] = {}

    def walk(name: str, node: Any) -> set[str]:
        node = node if isinstance(node, Mapping) else {}
        hosts = set((node.get("hosts") or {}).keys())
        for child, sub in (node.get("children") or {}).items():
            hosts |= walk(str(child), sub)
        groups.setdefault(name, set()).update(hosts)
        return hosts

    everyone: set[str] = set()
    for name, node in tree.items():
        everyone |= walk(str(name), node)
    groups.setdefault("all", set()).update(everyone)
    return {name: frozenset(hosts) for name, hosts in groups.items()}


def roles_by_host(playbook: Path, groups: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """{host: the short names of the kiln.cluster roles the playbook runs there (common, lustre_server, ...)}."""
    out: dict[str, set[str]] = {host: set() for host in groups.get("all", frozenset())}
    for pattern, roles in _plays(playbook):
        for host in hosts_matching(pattern, groups):
            out.setdefault(host, set()).update(roles)
    return {host: frozenset(roles) for host, roles in out.items()}


def hosts_matching(pattern: str, groups: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """The hosts an Ansible host pattern selects: the plain terms' union, then each `&` term, then each `!` term
    (the order Ansible applies them in), a term unknown before the run restricting nothing."""
    everyone = groups.get("all", frozenset())
    terms = [t.strip() for t in pattern.replace(",", ":").split(":")]
    terms = [t for t in terms if t and "{{" not in t and "}}" not in t]
    selected: set[str] = set()
    for term in sorted(terms, key=lambda t: "&!".find(t[0]) + 1):  # plain, then &, then !
        name = term.lstrip("&!")
        members = groups.get(name) if name in groups else (frozenset({name}) if name in everyone else None)
        if term[0] == "&":
            selected &= set(members) if members is not None else selected
        elif term[0] == "!":
            selected -= members or frozenset()
        else:
            selected |= members or frozenset()
    return frozenset(selected)


def _plays(playbook: Path) -> Iterator[tuple[str, frozenset[str]]]:
    """(hosts pattern, roles) of each play, following import_playbook to files beside the playbook."""
    for play in yamlio.load(playbook.read_text(encoding="utf-8")) or []:
        if not isinstance(play, Mapping):
            continue
        imported = next((play[k] for k in _IMPORT_PLAYBOOK if k in play), None)
        if isinstance(imported, str):
            yield from _plays(playbook.parent / imported)
            continue
        roles = {_short(r.get("role") if isinstance(r, Mapping) else r) for r in play.get("roles") or []}
        roles |= {_short(name) for name in _included_roles(play)}
        yield str(play.get("hosts", "")), frozenset(r for r in roles if r)


def _included_roles(play: Mapping[str, Any]) -> Iterator[Any]:
    for section in ("pre_tasks", "tasks", "post_tasks"):
        yield from _task_roles(play.get(section) or [])


def _task_roles(tasks: Sequence[Any]) -> Iterator[Any]:
    for task in tasks:
        if not isinstance(task, Mapping) or task.get("when"):
            continue  # a conditional include runs on the hosts its condition picks, which only the run knows
        for key in _ROLE_TASKS:
            if isinstance(task.get(key), Mapping):
                yield task[key].get("name")
        for block in ("block", "rescue", "always"):
            yield from _task_roles(task.get(block) or [])


def _short(name: Any) -> str:
    """kiln.cluster.common → common; a role of another collection is not kiln's to check (empty)."""
    text = str(name or "")
    if text.startswith("kiln.cluster."):
        return text.removeprefix("kiln.cluster.")
    return "" if "." in text else text
