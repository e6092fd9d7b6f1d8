"""The kiln.cluster collection: builds offline, installs from its tarball, and runs from there.

Builds the repository root (galaxy.yml) with ``ansible-galaxy collection build``, installs the tarball
into a temporary collections path with ``--no-deps --offline`` (ansible.posix and community.general come
with the ``ansible`` package), and runs a playbook against localhost that uses only the installed copy:
kiln.cluster.kiln_sysctl in check mode, kiln.cluster.lustre_param failing cleanly on a host without
Lustre, kiln.cluster.lustre_layout rejecting a bad layout, kiln.cluster.host_probe read through one of the
collection's filters, and a role task file via import_role.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GALAXY = BIN / "ansible-galaxy"
PLAYBOOK = BIN / "ansible-playbook"

pytestmark = pytest.mark.skipif(not GALAXY.exists(), reason="needs ansible-galaxy (the `ops` extra)")

PLAY = """
- name: Use the installed kiln.cluster collection
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Plan a sysctl with kiln.cluster.kiln_sysctl in check mode
      kiln.cluster.kiln_sysctl:
        sysctls:
          - {name: net.core.somaxconn, value: 8192, namespaced: true}
        sysctl_file: "{{ work }}/90-kiln.conf"
        proc_sys: "{{ work }}/proc-sys"
      check_mode: true
      register: sysctl

    - name: Ask kiln.cluster.lustre_param for a value on a host without Lustre
      kiln.cluster.lustre_param:
        params:
          - {name: osc.*.max_dirty_mb, value: 2048}
      register: param
      ignore_errors: true

    - name: Give kiln.cluster.lustre_layout a layout lfs setstripe cannot take
      kiln.cluster.lustre_layout:
        path: "{{ work }}"
        layout:
          - {extent_end: 64M, stripe_count: 1}
      register: layout
      ignore_errors: true

    - name: Look at the work directory with kiln.cluster.host_probe
      kiln.cluster.host_probe:
        paths: ["{{ work }}", "{{ work }}/missing"]
      register: probe

    - name: Check the plan's NCCL values with the collection's nccl role
      ansible.builtin.import_role:
        name: kiln.cluster.nccl
        tasks_from: validate
      vars:
        nccl_env: {NCCL_IB_HCA: mlx5_0}
        nccl_topo_file: null
        nccl_topo_file_src: ""

    - name: Write the results for the test
      ansible.builtin.copy:
        dest: "{{ work }}/results.json"
        content: >-
          {{ {'sysctl': sysctl, 'param': param, 'layout': layout, 'probe': probe,
              'absent': probe.paths | kiln.cluster.absent} | to_json }}
        mode: "0644"
"""


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr}"
    return proc


def test_collection_builds_installs_and_runs(tmp_path: Path) -> None:
    home, dist, installed, work = (tmp_path / d for d in ("home", "dist", "collections", "work"))
    for d in (home, dist, installed, work / "proc-sys" / "net" / "core"):
        d.mkdir(parents=True)
    (work / "proc-sys" / "net" / "core" / "somaxconn").write_text("4096\n")
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\n")
    env = {**os.environ, "ANSIBLE_HOME": str(home), "ANSIBLE_CONFIG": str(config),
           "ANSIBLE_COLLECTIONS_PATH": str(installed), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCAL_TEMP": str(home / "tmp")}

    run([str(GALAXY), "collection", "build", str(REPO), "--output-path", str(dist)], tmp_path, env)
    tarball = next(dist.glob("kiln-cluster-*.tar.gz"))
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
        manifest = json.load(tar.extractfile("MANIFEST.json"))  # type: ignore[arg-type]
    for lib in ("lustre_common", "lustre_target", "lustre_param", "lustre_layout", "lustre_quota"):
        assert f"plugins/module_utils/{lib}.py" in names
    assert {"plugins/modules/lustre_target.py", "plugins/modules/host_probe.py", "plugins/filter/host_probe.py",
            "roles/lustre_server/tasks/main.yml", "meta/runtime.yml"} <= names
    assert not [n for n in names if n.startswith(("tests/", "kiln/", "ansible/", "docs/")) or "/molecule/" in n]
    info = manifest["collection_info"]
    assert (info["namespace"], info["name"], info["license"]) == ("kiln", "cluster", ["Apache-2.0"])
    assert set(info["dependencies"]) == {"ansible.posix", "community.general", "containers.podman"}

    run([str(GALAXY), "collection", "install", str(tarball), "-p", str(installed), "--no-deps", "--offline"],
        tmp_path, env)
    root = installed / "ansible_collections" / "kiln" / "cluster"
    assert (root / "plugins" / "module_utils" / "lustre_common.py").is_file()

    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    proc = run([str(PLAYBOOK), "-i", "localhost,", str(play), "-e", f"work={work}",
                "-e", f"ansible_python_interpreter={sys.executable}"], tmp_path, env)
    assert "failed=0" in proc.stdout
    results = json.loads((work / "results.json").read_text())
    assert results["sysctl"]["changed"] is True  # 4096 -> 8192 would be written
    assert (work / "proc-sys" / "net" / "core" / "somaxconn").read_text() == "4096\n"  # check mode wrote nothing
    assert results["param"]["failed"] is True
    assert 'required executable "lctl"' in results["param"]["msg"]
    assert results["layout"]["failed"] is True
    assert "the last component must end at EOF" in results["layout"]["msg"]
    assert results["probe"]["paths"][str(work)]["type"] == "directory"
    assert results["absent"] == [f"{work}/missing"]
    doc = run([str(BIN / "ansible-doc"), "-j", "kiln.cluster.lustre_param"], tmp_path, env)
    assert str(root) in json.loads(doc.stdout)["kiln.cluster.lustre_param"]["doc"]["filename"]
