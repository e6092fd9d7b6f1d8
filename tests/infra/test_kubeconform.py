"""kubeconform, strict, on every shipped stack's rendered manifests: every object is checked against its schema, the
built-in kinds against the stack's Kubernetes version (kubernetes-validate's schemas, references inlined for
kubeconform: k8s_schemas.write_standalone) and every custom resource against its CRD (tests/infra/schemas/crds,
converted by tests/infra/crd_schemas.py; sources in tests/infra/schemas/SOURCES.md). A kind without a schema is an
error, never skipped. `make test` builds kubeconform (scripts/build-tools.sh kubeconform)."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kiln.plan import build_plan
from kiln.render.manifests import render_manifests
from kiln.spec import load_stack
from tests.conftest import STACKS
from tests.infra import k8s_schemas

ROOT = Path(__file__).resolve().parents[2]
CRDS = Path(__file__).resolve().parent / "schemas" / "crds"
_BUILT = ROOT / ".tools" / "bin" / "kubeconform"
KUBECONFORM = str(_BUILT) if _BUILT.exists() else shutil.which("kubeconform")

pytestmark = pytest.mark.skipif(KUBECONFORM is None, reason="kubeconform is not installed: run "
                                "scripts/build-tools.sh kubeconform (make test builds it)")


def schema_name(doc: dict[str, Any]) -> str:
    """kubeconform's file name for a kind: `deployment-apps-v1`, `configmap-v1`, `clusterrole-rbac-v1`."""
    group, _, version = doc["apiVersion"].rpartition("/")
    return "-".join([doc["kind"].lower(), *([group.split(".")[0]] if group else []), version])


def kubeconform(files: list[Path], version: str, builtin: Path) -> dict[str, Any]:
    template = "{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}"
    cmd = [str(KUBECONFORM), "-strict", "-summary", "-output", "json", "-kubernetes-version", f"{version}.0",
           "-schema-location", f"{builtin}/{template}.json",
           "-schema-location", f"{CRDS}/{{{{ .Group }}}}/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json",
           *map(str, files)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    out: dict[str, Any] = json.loads(proc.stdout)
    out["returncode"] = proc.returncode
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, list[Path], list[dict[str, Any]]]]:
    """stack → (schema version, rendered files, documents)."""
    out = {}
    for stack in STACKS:
        plan = build_plan(load_stack(stack, ROOT / "stacks"), source=stack)
        where = tmp_path_factory.mktemp(f"rendered-{stack}")
        files = []
        for name, text in render_manifests(plan).items():
            (where / name).write_text(text)
            files.append(where / name)
        docs = [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]
        out[stack] = (k8s_schemas.schema_version(plan.kubernetes_version), files, docs)
    return out


@pytest.fixture(scope="module")
def builtin(rendered: dict[str, tuple[str, list[Path], list[dict[str, Any]]]],
            tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("k8s-schemas")
    for version, _, docs in rendered.values():
        names = {schema_name(d) for d in docs}
        k8s_schemas.write_standalone(version, sorted(n for n in names
                                                     if (k8s_schemas.schema_dir(version) / f"{n}.json").exists()), root)
    return root


@pytest.mark.parametrize("stack", STACKS)
def test_every_object_of_every_stack_is_valid_strictly(stack: str, rendered: Any, builtin: Path) -> None:
    version, files, docs = rendered[stack]
    result = kubeconform(files, version, builtin)
    bad = [f"{r['kind']} {r['name']}: {r['status']}: {r['msg']}" for r in result["resources"]
           if r["status"] != "statusValid"]
    assert not bad, "\n".join(bad)
    assert result["returncode"] == 0
    assert result["summary"] == {"valid": len(docs), "invalid": 0, "errors": 0, "skipped": 0}


def test_an_unknown_field_fails_in_a_custom_and_a_built_in_resource(rendered: Any, builtin: Path,
                                                                    tmp_path: Path) -> None:
    """Strict means strict: a field the CRD or the API does not define, and a kind with no schema, fail."""
    version, _, docs = rendered["prod-h100"]
    policy = copy.deepcopy(next(d for d in docs if d["kind"] == "NicClusterPolicy"))
    policy["spec"]["rdmaSharedDevicePlugin"]["imageTag"] = "v1"  # the CRD names it `version`
    job = copy.deepcopy(next(d for d in docs if d["kind"] == "Job"))
    job["spec"]["template"]["spec"]["containers"][0]["cpuLimit"] = "1"
    unknown = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    files = []
    for i, doc in enumerate((policy, job, unknown)):
        files.append(tmp_path / f"{i}.yaml")
        files[-1].write_text(yaml.safe_dump(doc))
    result = kubeconform(files, version, builtin)
    status = {r["kind"]: r["status"] for r in result["resources"]}
    assert status == {"NicClusterPolicy": "statusInvalid", "Job": "statusInvalid", "Widget": "statusError"}
    assert result["returncode"] != 0


def test_every_schema_records_its_source() -> None:
    sources = (CRDS.parent / "SOURCES.md").read_text()
    for path in sorted(CRDS.rglob("*.json")):
        comment = json.loads(path.read_text())["$comment"]
        repository, tag, file = comment.split(" (sha256 ")[0].split(" ")
        assert repository.startswith("github.com/") and f"{repository} {tag} " in sources, (path, comment)
        assert file.rpartition("/")[2] in sources, (path, comment)
