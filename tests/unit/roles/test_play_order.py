"""The collection's site playbook (playbooks/site.yml, kiln.cluster.site) on a failover-pair stack reaches
Pacemaker before anything needs a running MGS: the servers' plays format and write units, the lustre_ha play starts
the targets (MGS first), then the server tunables are stored where the MGS runs, and only then do clients mount.
Also the order inside lustre_server: the ZFS host id before any zpool create -o multihost=on or mkfs.lustre."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import yaml
from ansible.plugins.filter.core import FilterModule as CoreFilters  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[3]


def plays(playbook: Path) -> list[dict[str, Any]]:
    """Every play of a playbook, following import_playbook, in run order."""
    out: list[dict[str, Any]] = []
    for entry in yaml.safe_load(playbook.read_text()):
        imported = entry.get("ansible.builtin.import_playbook") or entry.get("import_playbook")
        if imported:
            out += plays(playbook.parent / imported)
        else:
            out.append(entry)
    return out


def steps(play: dict[str, Any]) -> list[str]:
    """The roles a play runs: `role` or `role:tasks_from` for include_role tasks."""
    names = [(r["role"] if isinstance(r, dict) else r).removeprefix("kiln.cluster.") for r in play.get("roles", [])]
    for task in play.get("tasks", []):
        inc = task.get("ansible.builtin.include_role") or task.get("include_role")
        if inc:
            names.append(f"{inc['name'].removeprefix('kiln.cluster.')}:{inc.get('tasks_from', 'main.yml')}")
    return names


def first(order: list[tuple[int, str]], step: str) -> int:
    return next(i for i, s in order if s == step)


def last(order: list[tuple[int, str]], step: str) -> int:
    return max(i for i, s in order if s == step)


def test_site_reaches_pacemaker_before_the_mgs_parameters_and_the_clients() -> None:
    order = [(i, s) for i, p in enumerate(plays(ROOT / "playbooks" / "site.yml")) for s in steps(p)]
    servers, ha = last(order, "lustre_server"), first(order, "lustre_ha")
    params = first(order, "lustre_server:params.yml")
    readback = first(order, "lustre_server:readback.yml")
    clients = first(order, "lustre_client")
    assert servers < ha < params < readback < clients


def test_storage_playbook_keeps_the_same_order() -> None:
    order = [(i, s) for i, p in enumerate(plays(ROOT / "playbooks" / "storage.yml")) for s in steps(p)]
    assert last(order, "lustre_server") < first(order, "lustre_ha") < first(order, "lustre_server:params.yml")


def test_parameter_play_runs_where_the_mgs_may_run() -> None:
    params = next(p for p in plays(ROOT / "playbooks" / "site.yml") if "lustre_server:params.yml" in steps(p))
    assert params["hosts"].startswith("kiln_mgs_pair")
    assert params.get("max_fail_percentage") == 0


def test_the_server_role_stores_no_parameters_itself() -> None:
    tasks = yaml.safe_load((ROOT / "roles" / "lustre_server" / "tasks" / "main.yml").read_text())
    included = [t.get("ansible.builtin.include_tasks") for t in tasks]
    assert "persistent_params.yml" not in included
    assert "readback_params.yml" not in included  # read back from a later play, once Pacemaker runs the targets
    assert included.index("zfs_hostid.yml") < included.index("format.yml") < included.index("zfs.yml")


def _packages_play() -> dict[str, Any]:
    return next(p for p in plays(ROOT / "playbooks" / "site.yml") if "lustre_server:install.yml" in steps(p))


def test_lustre_packages_come_before_lnet_from_the_operator_s_or_whamcloud_s_repository() -> None:
    """LNet's first start needs the lnet module the packages bring: the early play installs them whether the
    operator lists them or only turns Whamcloud's repository on, and installs nothing with neither."""
    order = [(i, s) for i, p in enumerate(plays(ROOT / "playbooks" / "site.yml")) for s in steps(p)]
    assert last(order, "lustre_server:install.yml") < first(order, "lnet")
    assert last(order, "lustre_client:install.yml") < first(order, "lnet")
    env = jinja2.Environment()
    env.filters.update(CoreFilters().filters())  # Ansible's own `bool` and `default`
    for task in _packages_play()["tasks"]:
        role = task["ansible.builtin.include_role"]["name"].removeprefix("kiln.cluster.")
        runs = env.compile_expression(next(c for c in task["when"] if "_packages" in c))
        assert runs(**{f"{role}_whamcloud_repo": True})
        assert runs(**{f"{role}_packages": ["lustre"]})
        assert not runs() and not runs(**{f"{role}_whamcloud_repo": False})


def test_the_early_install_checks_the_os_and_loads_its_variables_first() -> None:
    for role in ("lustre_server", "lustre_client"):
        tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "install.yml").read_text())
        files = [t.get("ansible.builtin.import_tasks") or t.get("ansible.builtin.include_tasks") for t in tasks]
        assert files[0] == "os.yml" and files[-1] == "packages.yml", (role, files)
