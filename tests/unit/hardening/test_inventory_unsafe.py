"""Inventory values are written `!unsafe`: Ansible shows a template in them as text and never evaluates it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kiln.plan import build_plan
from kiln.render.inventory import _dump, render_inventory
from kiln.spec import load_stack
from kiln.yamlio import load_inventory

ROOT = Path(__file__).resolve().parents[3]
ANSIBLE_BIN = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin"
PROBE = "/x{{ lookup('pipe', 'touch PWNED; echo evaluated') }}"


def _tool(name: str) -> str:
    found = shutil.which(name) or (str(ANSIBLE_BIN / name) if (ANSIBLE_BIN / name).exists() else None)
    if found is None:
        pytest.skip(f"not applicable on this host: {name} is not installed")
    return found


def _plain_scalar_is_not_a_string(line: str) -> bool:
    if line.count("'") < 2:
        return False
    quoted = line.rsplit("'", 2)[-2]
    return quoted == "" or ("{" not in quoted and not isinstance(yaml.safe_load(quoted), str))


def test_every_string_value_is_tagged_unsafe() -> None:
    spec = load_stack("prod-h100")
    files = render_inventory(build_plan(spec))
    for rel, text in files.items():
        if rel == "hosts.yml":
            continue
        body = [line for line in text.splitlines()[1:] if ": '" in line or line.lstrip().startswith("- '")]
        # A plain quoted string would be templated by Ansible; only number-, bool- or null-looking strings are
        # written plain (ansible-core 2.19 would turn `!unsafe '3.39'` into a float), and they hold no template.
        templatable = [line for line in body if not _plain_scalar_is_not_a_string(line)]
        assert not templatable, (rel, templatable[:3])
        assert load_inventory(text) is not None


def test_ansible_prints_a_template_in_a_value_literally(tmp_path: Path) -> None:
    """The rendered lab inventory plus one more file written the same way, holding a template: Ansible reads the
    inventory and shows the template as text (the pipe lookup would create PWNED)."""
    playbook_bin = _tool("ansible-playbook")
    spec = load_stack("lab")
    plan = build_plan(spec)
    files = render_inventory(plan)
    files["group_vars/all/probe.yml"] = _dump({"kiln_probe": PROBE, "kiln_list": [PROBE]}, plan)
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "play.yml").write_text(
        "- hosts: gpu001\n  gather_facts: false\n  tasks:\n"
        "    - name: Show the values\n      ansible.builtin.debug:\n"
        "        msg: \"{{ kiln_probe }}|{{ kiln_list[0] }}|{{ kiln_management_address }}\"\n"
    )
    env = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path)}
    r = subprocess.run([playbook_bin, "-c", "local", "-i", "hosts.yml", "play.yml"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["gpu001"]
    address = next(h.management_address for h in plan.hosts if h.name == "gpu001")
    assert result["msg"] == f"{PROBE}|{PROBE}|{address}"
    assert not (tmp_path / "PWNED").exists()
