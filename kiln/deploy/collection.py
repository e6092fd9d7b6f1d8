"""The kiln.cluster collection this kiln carries, and the programs that run it.

The wheel holds the collection's roles, modules and playbooks under `kiln/collection/ansible_collections/kiln/
cluster/` (in a checkout those entries are links to the repository root's galaxy.yml, meta/, plugins/, playbooks/
and roles/, as `kiln/lustre` is to plugins/module_utils), so an installed kiln deploys with the roles of its own
version: `kiln deploy` puts `kiln/collection` first on ANSIBLE_COLLECTIONS_PATH. The collection's dependencies
(ansible.posix, community.general, containers.podman) come with the `ansible` package (`pip install 'kiln[deploy]'`).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

KILN_PACKAGE = Path(__file__).parent.parent  # the installed kiln package (or a clone's kiln/)
# The collection's playbooks: kiln.cluster.<name> (docs/playbooks.md).
PLAYBOOKS = ("site", "storage", "compute", "rolling", "rolling_compute")


class DeployToolError(RuntimeError):
    """A program or file `kiln deploy` needs is missing; the message says how to get it."""


def collections_dir() -> Path:
    """The directory to put on ANSIBLE_COLLECTIONS_PATH: it holds ansible_collections/kiln/cluster."""
    root = KILN_PACKAGE / "collection"
    site = root / "ansible_collections" / "kiln" / "cluster" / "playbooks" / "site.yml"
    if not site.is_file():
        raise DeployToolError(f"this kiln has no kiln.cluster collection ({site} is missing); reinstall kiln from its "
                              "wheel, or run from a clone of kiln")
    return root


def ansible_config() -> Path | None:
    """The ansible.cfg `kiln deploy` uses: None when the user names one ($ANSIBLE_CONFIG, or ./ansible.cfg, which
    Ansible reads first), else kiln's own (kiln/deploy/ansible.cfg: forks, SSH pipelining, timing callbacks)."""
    if os.environ.get("ANSIBLE_CONFIG") or Path("ansible.cfg").is_file():
        return None
    return Path(__file__).with_name("ansible.cfg")


def package_dir() -> Path:
    """The kiln package the hosts' node programs come from (the monitoring role's monitoring_kiln_package_dir)."""
    return KILN_PACKAGE


def ansible_program(name: str) -> str:
    """An Ansible program (ansible, ansible-playbook) of the environment kiln runs in, else the one on PATH."""
    here = Path(sys.executable).parent / name
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise DeployToolError(f"{name} is not installed: install Ansible with kiln, `pip install 'kiln[deploy]'` "
                              "(the `ansible` package: ansible-core and the collections kiln.cluster depends on)")
    return found
