"""kiln.deploy.runner against a real ansible-playbook: what it reports per play and host, the failures it keeps (and
the ignored ones it drops), the recap and the summary, and the log that holds everything."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kiln.deploy.runner import PlaybookResult, ansible_env, run_playbook

PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
pytestmark = pytest.mark.skipif(not PLAYBOOK.exists(), reason="needs ansible-playbook (the `deploy` extra)")

PLAY = """
- name: First play
  hosts: all
  gather_facts: false
  tasks:
    - name: Change something
      ansible.builtin.command: "true"
      changed_when: true
    - name: Say a step is not applicable
      ansible.builtin.debug:
        msg: "not applicable on this host: no such device"
    - name: Fail and be ignored
      ansible.builtin.fail:
        msg: ignored failure
      ignore_errors: true
- name: Second play
  hosts: all
  gather_facts: false
  tasks:
    - name: Fail on one host
      ansible.builtin.assert:
        that: inventory_hostname != 'beta'
        fail_msg: beta is not wanted here
"""

INVENTORY = """
all:
  hosts:
    alpha: {ansible_connection: local}
    beta: {ansible_connection: local}
    gamma: {ansible_host: 127.0.0.1, ansible_port: 1, ansible_connection: ssh}
"""


def run(tmp_path: Path) -> tuple[PlaybookResult, list[str]]:
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    lines: list[str] = []
    env = ansible_env({**os.environ, "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
                       "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"), "ANSIBLE_SSH_ARGS": "-o ConnectTimeout=3"})
    result = run_playbook([str(PLAYBOOK), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
                          env=env, cwd=tmp_path, log=tmp_path / "logs" / "run.log", report=lines.append)
    return result, lines


def test_progress_failures_recap_and_log(tmp_path: Path) -> None:
    result, lines = run(tmp_path)
    assert result.returncode != 0
    assert lines[0] == "play 1: First play"
    assert "  alpha: not applicable on this host: no such device" in lines
    assert "  3 hosts; changed: alpha (1), beta (1); failed: gamma" in lines  # the ignored failure is not counted
    assert "play 2: Second play" in lines
    assert any(line.startswith("  2 hosts; failed: beta") for line in lines), lines
    failures = {(f.host, f.task, f.unreachable) for f in result.failures}
    assert failures == {("gamma", "Change something", True), ("beta", "Fail on one host", False)}
    beta = next(f for f in result.failures if f.host == "beta")
    assert beta.message == "beta is not wanted here" and beta.play == "Second play"
    assert result.recap["alpha"]["changed"] == 1 and result.recap["beta"]["failed"] == 1
    assert result.recap["beta"]["ignored"] == 1 and result.recap["gamma"]["unreachable"] == 1
    summary = result.summary()
    assert summary[:4] == ["3 hosts, changed=2", "changed: alpha (1), beta (1)", "failed: beta (1)",
                           "unreachable: gamma (1)"]
    assert "  beta failed in Fail on one host: beta is not wanted here" in summary
    log = result.log.read_text()
    assert "PLAY RECAP" in log and "ignored failure" in log  # the log keeps what the progress leaves out


def test_ansible_env_puts_the_collection_first_and_forces_the_output_read() -> None:
    env = ansible_env({"ANSIBLE_COLLECTIONS_PATH": "/mine:/theirs", "ANSIBLE_STDOUT_CALLBACK": "yaml"},
                      collections=[Path("/kiln/collection")])
    assert env["ANSIBLE_COLLECTIONS_PATH"] == "/kiln/collection:/mine:/theirs"
    assert env["ANSIBLE_STDOUT_CALLBACK"] == "ansible.builtin.default"
    assert env["ANSIBLE_CALLBACK_RESULT_FORMAT"] == "json"
