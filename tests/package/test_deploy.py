"""`kiln deploy` from an installed wheel: `pip install 'kiln[deploy]'` into a fresh virtualenv carries the kiln.cluster
collection (the same files the galaxy tarball holds) and runs its playbooks from a directory that holds only a stack.

The lab end to end (tests/lab) converges the lab's hosts with this installed kiln; here it runs, changing nothing,
against this machine as one lab host (check mode, the local connection, a tag no task has: the preflight play and the
roles' read-only detection run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import user_env

pytestmark = pytest.mark.package

ROOT = Path(__file__).resolve().parents[2]
GALAXY = Path(sys.executable).parent / "ansible-galaxy"
PARTS = ("meta/", "plugins/", "playbooks/", "roles/")


@pytest.fixture(scope="module")
def venv(wheel_venv: Callable[[str], Path]) -> Path:
    return wheel_venv("deploy")


def test_the_wheel_carries_the_collection_the_tarball_holds(venv: Path, tmp_path: Path) -> None:
    if not GALAXY.exists():
        pytest.skip("needs ansible-galaxy (the `ops` extra) to build the tarball")
    env = {**os.environ, "ANSIBLE_HOME": str(tmp_path / "home")}
    subprocess.run([str(GALAXY), "collection", "build", str(ROOT), "--output-path", str(tmp_path)], env=env,
                   check=True, capture_output=True)
    with tarfile.open(next(tmp_path.glob("kiln-cluster-*.tar.gz"))) as tar:
        tarball = {m.name for m in tar.getmembers() if m.isfile() and m.name.startswith(PARTS)}
    python = venv / "python"
    where = subprocess.run([str(python), "-c", "import kiln.deploy.collection as c; print(c.collections_dir())"],
                           capture_output=True, text=True, check=True, env=user_env(), cwd=tmp_path).stdout.strip()
    cluster = Path(where) / "ansible_collections" / "kiln" / "cluster"
    wheel = {str(p.relative_to(cluster)) for p in cluster.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert wheel == tarball | {"galaxy.yml"}  # the tarball's MANIFEST.json is the wheel's galaxy.yml
    assert str(venv.parent) in where  # the installed copy, not this checkout


def test_deploy_runs_from_any_directory_with_the_installed_collection(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "stacks").mkdir()
    shutil.copy2(ROOT / "stacks" / "Pulumi.lab.yaml", tmp_path / "stacks" / "Pulumi.lab.yaml")
    python = venv / "python"
    r = subprocess.run([str(venv / "kiln"), "deploy", "lab", "--limit", "gpu001", "--tags", "kiln_no_such_tag",
                        "--check", "--", "-c", "local", "-e", f"ansible_python_interpreter={python}",
                        "-e", "kiln_allow_not_applicable=true", "-vv"],
                       capture_output=True, text=True, cwd=tmp_path, check=False, timeout=600,
                       env=user_env(ANSIBLE_LOCAL_TEMP=str(tmp_path / ".ansible-tmp")))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "preflight: 1 hosts reachable, 0 not" in r.stdout
    assert r.stdout.splitlines()[-3:] == ["changed: none", "failed: none", "unreachable: none"]
    (log,) = (tmp_path / ".kiln" / "lab" / "logs").glob("deploy-*.log")
    # the playbooks ran from the wheel's copy of the collection (ansible -vv prints each task's path)
    site_packages = next((venv.parent / "lib").glob("python3.*")) / "site-packages"
    plays = site_packages / "kiln" / "collection" / "ansible_collections" / "kiln" / "cluster" / "playbooks" / "plays"
    assert f"task path: {plays / 'preflight.yml'}" in log.read_text()
    assert "PLAY RECAP" in log.read_text()
