"""Run testinfra checks with `podman exec` straight into molecule's containers.

Molecule starts testinfra with `--connection=ansible`; for podman instances
testinfra then runs every check as an Ansible module call (seconds each).
Naming the scenario's platforms as podman:// hosts keeps the same `host`
fixture but makes each check a plain `podman exec`.
"""

import os

import yaml


def pytest_configure(config):
    path = os.environ.get("MOLECULE_FILE")  # molecule's interpolated copy of molecule.yml
    if not path or not os.path.exists(path) or getattr(config.option, "hosts", None) is not None:
        return  # not under molecule, or hosts given explicitly
    with open(path) as f:
        platforms = (yaml.safe_load(f) or {}).get("platforms") or []
    names = [p["name"] for p in platforms if p.get("name")]
    if names:
        config.option.hosts = ",".join(f"podman://{n}" for n in names)
