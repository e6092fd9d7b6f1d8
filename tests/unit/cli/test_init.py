"""`kiln init` (kiln/cli/init.py, kiln/render/starter.py): a starter stack that validates and plans, every answer in
its place, a bad answer named by its flag with the value and the fix, and no file replaced without --force."""

from __future__ import annotations

import builtins
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kiln.cli import main
from kiln.render.starter import QUESTIONS, question_for
from kiln.spec import load_stack

ROOT = Path(__file__).resolve().parents[3]


def init(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kiln.cli", "init", *args], capture_output=True, text=True,
                          cwd=cwd, check=False, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          stdin=subprocess.DEVNULL)


def cluster(path: Path) -> dict:  # type: ignore[type-arg]
    return yaml.safe_load(path.read_text())["config"]["kiln:cluster"]  # type: ignore[no-any-return]


def test_the_answers_land_in_a_stack_that_validates(tmp_path: Path) -> None:
    r = init(tmp_path, "gpu-east", "--gpu-model", "h200-sxm", "--gpus-per-node", "8", "--gpu-nodes", "16",
             "--rails", "8", "--nic", "cx7-ndr400", "--oss-nodes", "4", "--mds-nodes", "2", "--objectstore-nodes", "4",
             "--dataset-tb", "120", "--model-params-b", "70", "--checkpoint-interval-min", "20")
    assert r.returncode == 0, r.stderr
    path = tmp_path / "stacks" / "Pulumi.gpu-east.yaml"
    assert r.stdout.startswith(f"wrote {path.relative_to(tmp_path)}: 26 hosts, 128 GPUs")
    spec = load_stack(str(path))
    pool = spec.compute.pools[0]
    assert (spec.name, pool.nodes, pool.gpu.model, pool.gpu.count) == ("gpu-east", 16, "h200-sxm", 8)
    assert (pool.compute_rails.count, spec.lustre.oss.nodes, spec.lustre.mds.nodes) == (8, 4, 2)
    assert (spec.objectstore.nodes, spec.workload.dataset_TB, spec.workload.model_params_B) == (4, 120, 70)
    assert spec.workload.checkpoint.interval_min == 20 and spec.lustre.fsname == "gpueast"
    assert "# Every field is described in docs/stack-reference.md" in path.read_text()  # a commented starter


@pytest.mark.parametrize("fabric", ["infiniband", "roce", "tcp"])
def test_every_fabric_gives_a_stack_that_plans(tmp_path: Path, fabric: str) -> None:
    r = init(tmp_path, "one", "--fabric", fabric)
    assert r.returncode == 0, r.stderr
    data = cluster(tmp_path / "stacks" / "Pulumi.one.yaml")
    assert data["fabric"]["kind"] == fabric and ("roce_rails" in data["networks"]) == (fabric == "roce")
    assert data["lustre"]["lnet"] == [{"name": "tcp0" if fabric == "tcp" else "o2ib0"}]


def test_a_bad_answer_is_named_by_its_flag_and_nothing_is_written(tmp_path: Path) -> None:
    r = init(tmp_path, "small", "--gpu-nodes", "0")
    assert r.returncode == 2
    assert "--gpu-nodes = 0 (compute.pools[0].nodes): out of range; fix: use a value that is greater than or " \
           "equal to 1" in r.stderr
    assert "nothing written" in r.stderr and not (tmp_path / "stacks").exists()
    r = init(tmp_path, "small", "--gpu-nodes", "64", "--management-network", "10.0.0.0/28")
    assert r.returncode == 2 and "--management-network = '10.0.0.0/28' (networks.management" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "stacks").exists()


def test_an_answer_cannot_become_yaml(tmp_path: Path) -> None:
    r = init(tmp_path, "evil", "--nic", 'x", evil: "y')
    assert r.returncode == 2 and "--nic = 'x\", evil: \"y'" in r.stderr
    assert not (tmp_path / "stacks").exists()


def test_an_existing_file_is_kept_without_force(tmp_path: Path) -> None:
    path = tmp_path / "stacks" / "Pulumi.mine.yaml"
    path.parent.mkdir()
    path.write_text("# my own stack\n")
    r = init(tmp_path, "mine")
    assert r.returncode == 2 and "exists; nothing written" in r.stderr and "--force" in r.stderr
    assert path.read_text() == "# my own stack\n"
    assert init(tmp_path, "mine", "--force").returncode == 0
    assert cluster(path)["name"] == "mine"


def test_a_bad_name_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    r = init(tmp_path, "../Prod H100")
    assert r.returncode == 2 and "not a stack name" in r.stderr and "(e.g. prod-h100)" in r.stderr
    assert not any(tmp_path.iterdir())


def test_on_a_terminal_it_asks_for_what_was_not_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    replies = iter(["", "4", "twelve", "12"])  # model: default; GPUs per node 4; nodes: a bad reply, then 12

    def fake_input(prompt: str) -> str:
        asked.append(prompt)
        return next(replies, "")

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(builtins, "input", fake_input)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "asked", "--fabric", "roce"]) == 0
    data = cluster(tmp_path / "stacks" / "Pulumi.asked.yaml")
    pool = data["compute"]["pools"][0]
    assert (pool["gpu"]["model"], pool["gpu"]["count"], pool["nodes"]) == ("h100-sxm", 4, 12)
    assert asked[0] == "GPU model (the hardware catalog's name) [h100-sxm]: "
    assert not any(q.startswith("fabric") for q in asked)  # given as a flag: not asked
    assert len(asked) == len(QUESTIONS) - 1 + 1  # every other question once, the bad reply asked again


def test_every_question_fills_the_fields_it_names() -> None:
    for q in QUESTIONS:
        for path in q.paths:
            assert question_for(path) is q, (q.key, path)  # no two questions claim the same field
    assert question_for("compute.pools[0].compute_rails.nic").key == "nic"  # type: ignore[union-attr]
    assert question_for("compute.pools[0].nodes").key == "gpu_nodes"  # type: ignore[union-attr]
    assert question_for("acceptance.repetitions") is None
