"""The collection kiln carries: its tree in the package, the repository's wrappers around its playbooks, and the
Ansible settings `kiln deploy` uses."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest
import yaml

from kiln.deploy.collection import PLAYBOOKS, ansible_config, collections_dir

ROOT = Path(__file__).resolve().parents[3]


def test_the_package_tree_is_the_collection_at_the_repository_root() -> None:
    cluster = collections_dir() / "ansible_collections" / "kiln" / "cluster"
    for entry in ("galaxy.yml", "meta", "plugins", "playbooks", "roles"):
        assert (cluster / entry).resolve() == (ROOT / entry).resolve(), entry
    assert sorted(p.stem for p in (cluster / "playbooks").glob("*.yml")) == sorted(PLAYBOOKS)


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_the_checkouts_playbooks_run_the_collections(name: str) -> None:
    """ansible/<name>.yml (for a clone and the lab) is one import of kiln.cluster.<name>: one source of truth."""
    (play,) = yaml.safe_load((ROOT / "ansible" / f"{name}.yml").read_text())
    assert play["ansible.builtin.import_playbook"] == f"kiln.cluster.{name}"


def test_kiln_deploys_settings_are_the_checkouts() -> None:
    mine, checkout = configparser.ConfigParser(), configparser.ConfigParser()
    mine.read(ROOT / "kiln" / "deploy" / "ansible.cfg")
    checkout.read(ROOT / "ansible" / "ansible.cfg")
    for section in mine.sections():
        assert dict(mine[section]) == {k: v for k, v in checkout[section].items() if k in mine[section]}, section
    assert "collections_path" not in mine["defaults"]  # kiln deploy puts its own collection first


def test_a_users_ansible_cfg_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    assert ansible_config() == ROOT / "kiln" / "deploy" / "ansible.cfg"
    monkeypatch.setenv("ANSIBLE_CONFIG", "/etc/site/ansible.cfg")
    assert ansible_config() is None
    monkeypatch.delenv("ANSIBLE_CONFIG")
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    assert ansible_config() is None
