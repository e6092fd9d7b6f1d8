"""Spec loading and validation: every stack is valid; every kind of bad input names path, value and fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kiln.spec import SpecError, load_stack, parse_stack_text, validate

ROOT = Path(__file__).resolve().parents[2]
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("name", STACKS)
def test_every_stack_loads(name: str) -> None:
    spec = load_stack(name)
    assert spec.name == name


def test_required_stacks_exist() -> None:
    assert {"lab", "dev", "prod-h100"} <= set(STACKS)


def _issues(data: dict[str, Any]) -> list[Any]:
    with pytest.raises(SpecError) as exc:
        validate(data, "test")
    return exc.value.issues


def _one(data: dict[str, Any], path: str) -> Any:
    issues = _issues(data)
    match = [i for i in issues if i.path == path]
    assert match, f"no issue at {path}: {[i.path for i in issues]}"
    assert match[0].fix, "every issue carries a fix"
    return match[0]


def test_unknown_field_is_named_with_suggestion(stack: Any) -> None:
    data = stack("lab")
    data["lustre"]["oss"]["nodez"] = 3
    issue = _one(data, "lustre.oss.nodez")
    assert issue.problem == "unknown field"
    assert "nodes" in issue.fix and issue.value == 3


def test_wrong_type(stack: Any) -> None:
    data = stack("lab")
    data["compute"]["pools"][0]["nodes"] = "two"
    issue = _one(data, "compute.pools[0].nodes")
    assert issue.value == "two" and "number" in issue.fix


def test_missing_field_names_what_to_add(stack: Any) -> None:
    data = stack("lab")
    del data["lustre"]["fsname"]
    issue = _one(data, "lustre.fsname")
    assert issue.problem == "required field is missing" and "fsname" in issue.fix


def test_mdt_count_zero(stack: Any) -> None:
    data = stack("lab")
    data["lustre"]["mds"]["mdts"]["per_node"] = 0
    issue = _one(data, "lustre.mds.mdts.per_node")
    assert issue.value == 0 and "greater than or equal to 1" in issue.fix


def test_failover_pairs_need_even_oss(stack: Any) -> None:
    data = stack("prod-h100")
    data["lustre"]["oss"]["nodes"] = 5
    issue = _one(data, "lustre.oss.nodes")
    assert issue.value == 5 and "even" in issue.problem and "6" in issue.fix


def test_nccl_hca_not_on_node(stack: Any) -> None:
    data = stack("dev")
    data["compute"]["pools"][0]["nccl_hcas"] = ["mlx5_0", "mlx5_7"]  # mlx5_7: a storage port of dev's DGX nodes
    issue = _one(data, "compute.pools[0].nccl_hcas[1]")
    assert issue.value == "mlx5_7" and "mlx5_0" in issue.fix


def test_stripe_count_larger_than_osts(stack: Any) -> None:
    data = stack("lab")
    data["lustre"]["directories"][0]["stripe_count"] = 9
    issue = _one(data, "lustre.directories[0].stripe_count")
    assert issue.value == 9 and "4" in issue.fix


def test_unknown_catalog_name_suggests(stack: Any) -> None:
    data = stack("dev")
    data["compute"]["pools"][0]["gpu"]["model"] = "h100-smx"
    issue = _one(data, "compute.pools[0].gpu.model")
    assert "h100-sxm" in issue.fix


def test_nic_must_support_fabric(stack: Any) -> None:
    data = stack("dev")
    data["compute"]["pools"][0]["storage_nics"]["nic"] = "cx6dx-100gbe"
    issue = _one(data, "compute.pools[0].storage_nics.nic")
    assert "infiniband" in issue.problem


def test_bad_cidr(stack: Any) -> None:
    data = stack("lab")
    data["networks"]["storage"] = "10.89.20.1/24"
    issue = _one(data, "networks.storage")
    assert "CIDR" in issue.problem


def test_subnet_too_small(stack: Any) -> None:
    data = stack("prod-h100")
    data["networks"]["management"] = "10.100.0.0/26"
    issue = _one(data, "networks.management")
    assert "addresses needed" in issue.problem and "/" in issue.fix


def test_external_objectstore_needs_endpoint(stack: Any) -> None:
    data = stack("dev")
    del data["objectstore"]["endpoint"]
    assert _one(data, "objectstore.endpoint").problem.startswith("an external object store")


def test_read_demand_needs_one_form(stack: Any) -> None:
    data = stack("dev")
    data["workload"]["read_demand"] = {"profile": "llm-text", "GBps_per_gpu": 1.0}
    _one(data, "workload.read_demand")


def test_all_problems_reported_at_once(stack: Any) -> None:
    data = stack("lab")
    data["lustre"]["oss"]["nodez"] = 1
    data["fabric"]["kind"] = "ethernet"
    paths = {i.path for i in _issues(data)}
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


def test_models_namespace_must_be_a_namespace_of_its_own(stack: Any) -> None:
    data = stack("lab")
    data.setdefault("kubernetes", {})["models_namespace"] = "training"
    issue = _one(data, "kubernetes")
    assert "models_namespace 'training' is also training_namespace" in issue.problem
    assert "another name" in issue.fix
    data["kubernetes"]["models_namespace"] = "kiln-models"
    validate(data, "test")


def test_a_waiver_naming_no_check_of_the_plan_is_a_warning(stack: Any) -> None:
    from kiln.plan import build_plan

    data = stack("lab")
    data["acceptance"]["waivers"] = [{"check": "dataflow.stage_inn", "reason": "a misspelt check waives nothing"}]
    plan = build_plan(validate(data, "test"), "test")
    (issue,) = [w for w in plan.warnings if w.path.startswith("acceptance.waivers")]
    assert issue.path == "acceptance.waivers[0].check" and issue.value == "dataflow.stage_inn"
    assert "waives nothing" in issue.problem and "did you mean 'dataflow.stage_in'" in issue.fix


def test_a_waiver_needs_a_reason_and_one_per_check(stack: Any) -> None:
    data = stack("lab")
    data["acceptance"]["waivers"] = [{"check": "dataflow.stage_in", "reason": "because"}]
    assert _one(data, "acceptance.waivers[0].reason").value == "because"
    w = {"check": "dataflow.stage_in", "reason": "accepted by the storage lead, ticket 42"}
    data["acceptance"]["waivers"] = [w, w]
    assert any("more than once" in i.problem for i in _issues(data))
