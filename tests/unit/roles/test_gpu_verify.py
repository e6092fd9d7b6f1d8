"""roles/gpu/tasks/verify.yml reads nvidia-smi's CSV by its header: its comparison task, run by ansible-playbook on
real --query-gpu output (tests/fixtures/tools/gpu/*.source), finds the count, model and persistence differences."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
GPU_FIX = ROOT / "tests" / "fixtures" / "tools" / "gpu"
VERIFY = ROOT / "roles" / "gpu" / "tasks" / "verify.yml"


def _playbook_bin() -> str:
    venv_bin = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "ansible-playbook"
    found = shutil.which("ansible-playbook") or (str(venv_bin) if venv_bin.exists() else None)
    if found is None:
        pytest.skip("not applicable on this host: ansible-playbook is not installed")
    return found


def test_the_query_asks_for_the_header() -> None:
    tasks = yaml.safe_load(VERIFY.read_text())
    argv = next(t for t in tasks if t["name"] == "Query the GPUs with nvidia-smi")["ansible.builtin.command"]["argv"]
    assert argv == ["nvidia-smi", "--query-gpu=index,name,persistence_mode", "--format=csv"]


@pytest.mark.parametrize(("fixture", "model", "count", "problems"), [
    ("nvidia_smi_h100_590.csv", "h100-sxm", 1, []),
    ("nvidia_smi_h100_590.csv", "h100-sxm", 8, ["nvidia-smi lists 1 GPUs, the plan expects 8"]),
    ("nvidia_smi_l40s_595.csv", "h100-sxm", 1,
     ["GPU model is not h100-sxm: NVIDIA L40S", "persistence mode is off on 1 GPU(s)"]),
])
def test_comparison_on_real_output(tmp_path: Path, fixture: str, model: str, count: int, problems: list[str]) -> None:
    compare = [t for t in yaml.safe_load(VERIFY.read_text()) if t["name"] == "Compare the GPUs with the plan"]
    compare.append({"name": "Show the problems", "ansible.builtin.debug": {"var": "gpu_problems"}})
    (tmp_path / "compare.yml").write_text(yaml.safe_dump(compare, sort_keys=False))
    play = [{"hosts": "localhost", "gather_facts": False, "vars": {
        "gpu_smi": {"rc": 0, "stdout": (GPU_FIX / fixture).read_text()}, "gpu_service_state": {"results": []},
        "gpu_peermem": False, "gpu_model": model, "gpu_expected_count": count,
    }, "tasks": [{"ansible.builtin.include_tasks": "compare.yml"}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    env = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path)}
    r = subprocess.run([_playbook_bin(), "-c", "local", "-i", "localhost,", "play.yml"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=120, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    tasks = json.loads(r.stdout)["plays"][0]["tasks"]
    shown = next(t for t in tasks if t["task"]["name"] == "Show the problems")["hosts"]["localhost"]
    assert shown["gpu_problems"] == problems
