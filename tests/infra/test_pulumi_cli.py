"""`pulumi preview` with the real CLI against a local file backend (skipped where the CLI is absent).

The project is copied into a temporary directory (Pulumi.yaml, __main__.py, the stack file; kiln/,
policy/ and .venv linked) so `pulumi config set --secret` never touches stacks/ in the repository.
Install the CLI per docs/pulumi.md. The preview talks to the Kubernetes cluster of the current
kubeconfig context (Helm releases are resolved against the chart repositories).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kiln.plan import build_plan
from kiln.render.manifests import policy_config
from kiln.spec import load_stack

ROOT = Path(__file__).resolve().parents[2]
PULUMI = shutil.which("pulumi")

pytestmark = [
    pytest.mark.pulumi_cli,
    pytest.mark.skipif(PULUMI is None, reason="pulumi CLI not on PATH: install it per docs/pulumi.md "
                       "(curl -fsSL https://get.pulumi.com | sh)"),
]


def _project(tmp: Path, stack: str) -> Path:
    proj = tmp / "project"
    (proj / "stacks").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", proj / "Pulumi.yaml")
    shutil.copy(ROOT / "__main__.py", proj / "__main__.py")
    shutil.copy(ROOT / "stacks" / f"Pulumi.{stack}.yaml", proj / "stacks" / f"Pulumi.{stack}.yaml")
    for link in ("kiln", "policy", ".venv"):
        (proj / link).symlink_to(ROOT / link)
    return proj


def _pulumi(proj: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    assert PULUMI is not None
    return subprocess.run([PULUMI, *args, "--non-interactive"], cwd=proj, env=env, capture_output=True, text=True,
                          check=False, timeout=900)


@pytest.mark.parametrize("stack", ["dev"])
def test_pulumi_preview_with_the_policy_pack(tmp_path: Path, stack: str) -> None:
    proj = _project(tmp_path, stack)
    backend = tmp_path / "state"
    backend.mkdir()
    env = {**os.environ, "PULUMI_CONFIG_PASSPHRASE": "kiln-test-passphrase", "PULUMI_SKIP_UPDATE_CHECK": "true",
           "PULUMI_BACKEND_URL": f"file://{backend}"}
    r = _pulumi(proj, env, "stack", "init", stack, "--secrets-provider", "passphrase")
    assert r.returncode == 0, r.stderr
    r = _pulumi(proj, env, "config", "set", "--secret", "kiln:s3SecretKey", "kiln-cli-test-secret-0123456789")
    assert r.returncode == 0, r.stderr
    assert "kiln-cli-test-secret" not in (proj / "stacks" / f"Pulumi.{stack}.yaml").read_text()
    spec = load_stack(stack)
    cfg = tmp_path / "policy-config.json"
    cfg.write_text(json.dumps(policy_config(build_plan(spec, stack))))
    r = _pulumi(proj, env, "preview", "--stack", stack, "--policy-pack", str(proj / "policy"),
                "--policy-pack-config", str(cfg))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kiln:gpu:GpuNodeStack" in r.stdout
    assert "kiln-cli-test-secret" not in r.stdout + r.stderr
