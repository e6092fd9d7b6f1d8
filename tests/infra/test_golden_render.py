"""The golden files of the dev stack's Kubernetes manifests (what `kiln render dev` writes).

Refresh the golden files after an intended change, then review the diff:

    KILN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/infra -k golden
"""

from __future__ import annotations

import os
from pathlib import Path

from kiln.plan import build_plan
from kiln.render.manifests import render_manifests
from kiln.spec import load_stack

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "dev"
REFRESH = "KILN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/infra -k golden"


def test_golden_dev_render() -> None:
    spec = load_stack("dev")
    files = render_manifests(build_plan(spec, "dev"))
    if os.environ.get("KILN_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for stale in GOLDEN.glob("*.yaml"):
            if stale.name not in files:
                stale.unlink()
        for name, text in files.items():
            (GOLDEN / name).write_text(text, encoding="utf-8")
    assert sorted(p.name for p in GOLDEN.glob("*.yaml")) == sorted(files), \
        f"golden files missing: {REFRESH}"
    for name, text in files.items():
        assert (GOLDEN / name).read_text(encoding="utf-8") == text, \
            f"{name} differs from tests/golden/dev/{name}; if intended: {REFRESH}"
