"""Spec loading and validation: every stack is valid; every kind of bad input names path, value and fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kiln.spec import SpecError, load_stack, parse_stack_text, validate
from tests.unit.refusals import DROP, Refusal, issues_of, refusal, refused

ROOT = Path(__file__).resolve().parents[3]
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("name", STACKS)
def test_every_stack_loads(name: str) -> None:
    spec = load_stack(name)
    assert spec.name == name


def test_required_stacks_exist() -> None:
    assert {"lab", "dev", "prod-h100"} <= set(STACKS)


REFUSALS = [
    refusal("unknown field, with a suggestion", "lab", {"lustre.oss.nodez": 3}, "lustre.oss.nodez",
            value=3, problem_is="unknown field", fix="nodes"),
    refusal("wrong type", "lab", {"compute.pools.0.nodes": "two"}, "compute.pools[0].nodes",
            value="two", fix="number"),
    refusal("missing field names what to add", "lab", {"lustre.fsname": DROP}, "lustre.fsname",
            problem_is="required field is missing", fix="fsname"),
    refusal("MDT count zero", "lab", {"lustre.mds.mdts.per_node": 0}, "lustre.mds.mdts.per_node",
            value=0, fix="greater than or equal to 1"),
    refusal("failover pairs need even OSS", "prod-h100", {"lustre.oss.nodes": 5}, "lustre.oss.nodes",
            value=5, problem="even", fix="6"),
    refusal("NCCL HCA not on the node", "dev", {"compute.pools.0.nccl_hcas": ["mlx5_0", "mlx5_7"]},
            "compute.pools[0].nccl_hcas[1]", value="mlx5_7", fix="mlx5_0"),  # mlx5_7: a storage port of dev's DGX
    refusal("stripe count larger than the OSTs", "lab", {"lustre.directories.0.stripe_count": 9},
            "lustre.directories[0].stripe_count", value=9, fix="4"),
    refusal("unknown catalog name, with a suggestion", "dev", {"compute.pools.0.gpu.model": "h100-smx"},
            "compute.pools[0].gpu.model", fix="h100-sxm"),
    refusal("NIC must support the fabric", "dev", {"compute.pools.0.storage_nics.nic": "cx6dx-100gbe"},
            "compute.pools[0].storage_nics.nic", problem="infiniband"),
    refusal("host bits in a CIDR", "lab", {"networks.storage": "10.89.20.1/24"}, "networks.storage",
            problem="CIDR"),
    refusal("subnet too small", "prod-h100", {"networks.management": "10.100.0.0/26"}, "networks.management",
            problem="addresses needed", fix="/"),
    refusal("external object store needs an endpoint", "dev", {"objectstore.endpoint": DROP},
            "objectstore.endpoint", problem_is="an external object store needs its endpoint"),
    refusal("read demand needs exactly one form", "dev",
            {"workload.read_demand": {"profile": "llm-text", "GBps_per_gpu": 1.0}}, "workload.read_demand"),
    refusal("models namespace must be a namespace of its own", "lab",
            lambda d: d.setdefault("kubernetes", {}).update(models_namespace="training"), "kubernetes",
            problem="models_namespace 'training' is also training_namespace", fix="another name"),
    refusal("a waiver needs a reason", "lab",
            {"acceptance.waivers": [{"check": "dataflow.stage_in", "reason": "because"}]},
            "acceptance.waivers[0].reason", value="because"),
]


@pytest.mark.parametrize("row", REFUSALS)
def test_refused_with_path_value_and_fix(row: Refusal) -> None:
    refused(row)


def test_all_problems_reported_at_once(stack: Any) -> None:
    data = stack("lab")
    data["lustre"]["oss"]["nodez"] = 1
    data["fabric"]["kind"] = "ethernet"
    paths = {i.path for i in issues_of(data)}
    assert {"lustre.oss.nodez", "fabric.kind"} <= paths


def test_error_text_names_path_value_and_fix(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["oss"]["nodes"] = 3
    with pytest.raises(SpecError) as exc:
        validate(data, "stacks/x.yaml")
    text = exc.value.render()
    assert "stacks/x.yaml" in text and "lustre.oss.nodes = 3" in text and "fix:" in text


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("config: [", "(yaml)"),
        ("- a\n- b\n", "(file)"),
        ("config:\n  other:key: 1\n", "config"),
        ("config:\n  kiln:cluster: 5\n", "kiln:cluster"),
    ],
)
def test_malformed_files(text: str, path: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_stack_text(text)
    assert exc.value.issues[0].path == path


def test_missing_stack_lists_known() -> None:
    with pytest.raises(SpecError) as exc:
        load_stack("nope")
    assert "prod-h100" in exc.value.issues[0].fix


def test_spec_is_read_from_pulumi_stack_file(tmp_path: Path, stack: Any) -> None:
    doc = {"config": {"kiln:cluster": stack("lab"), "kiln:s3SecretKey": {"secure": "v1:abc"}}}
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert load_stack(str(path)).name == "lab"


def test_stack_names_resolve_against_stacks_dir_env_then_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kiln.spec import StackNotFound, stack_path

    for d in ("cwd/stacks", "env", "flag"):
        (tmp_path / d).mkdir(parents=True)
    for d in ("cwd/stacks", "env", "flag"):
        (tmp_path / d / "Pulumi.a.yaml").write_text("config: {}\n")
    (tmp_path / "cwd" / "stacks" / "Pulumi.b.yaml").write_text("config: {}\n")
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.delenv("KILN_STACKS_DIR", raising=False)
    assert stack_path("a") == Path("stacks/Pulumi.a.yaml")
    monkeypatch.setenv("KILN_STACKS_DIR", str(tmp_path / "env"))
    assert stack_path("a") == tmp_path / "env" / "Pulumi.a.yaml"
    assert stack_path("b") == Path("stacks/Pulumi.b.yaml")  # the environment first, then ./stacks
    assert stack_path("a", tmp_path / "flag") == tmp_path / "flag" / "Pulumi.a.yaml"
    with pytest.raises(StackNotFound) as exc:
        stack_path("b", tmp_path / "flag")  # --stacks-dir alone: no fallback
    assert [why for _, why in exc.value.tried] == ["--stacks-dir"]
    assert stack_path("x/y") == Path("x/y") and stack_path("Pulumi.z.yaml") == Path("Pulumi.z.yaml")


def test_unknown_stack_names_every_place_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KILN_STACKS_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(SpecError) as exc:
        load_stack("dev")
    text = exc.value.render()
    assert f"{tmp_path / 'nowhere' / 'Pulumi.dev.yaml'} ($KILN_STACKS_DIR)" in text
    assert f"{tmp_path / 'stacks' / 'Pulumi.dev.yaml'} (./stacks of the working directory)" in text
    assert "--stacks-dir DIR" in text and "./Pulumi.dev.yaml" in text


def test_a_models_namespace_of_its_own_is_accepted(stack: Any) -> None:
    data = stack("lab")
    data.setdefault("kubernetes", {})["models_namespace"] = "kiln-models"
    validate(data, "test")


def test_a_waiver_naming_no_check_of_the_plan_is_a_warning(stack: Any) -> None:
    from kiln.plan import build_plan

    data = stack("lab")
    data["acceptance"]["waivers"] = [{"check": "dataflow.stage_inn", "reason": "a misspelt check waives nothing"}]
    plan = build_plan(validate(data, "test"), "test")
    (issue,) = [w for w in plan.warnings if w.path.startswith("acceptance.waivers")]
    assert issue.path == "acceptance.waivers[0].check" and issue.value == "dataflow.stage_inn"
    assert "waives nothing" in issue.problem and "did you mean 'dataflow.stage_in'" in issue.fix


def test_a_waiver_is_one_per_check(stack: Any) -> None:
    data = stack("lab")
    w = {"check": "dataflow.stage_in", "reason": "accepted by the storage lead, ticket 42"}
    data["acceptance"]["waivers"] = [w, w]
    assert any("more than once" in i.problem for i in issues_of(data))
