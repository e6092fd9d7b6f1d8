"""Every variable `kiln inventory` renders is documented in docs/inventory-contract.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import load_stack
from kiln.yamlio import load_inventory

DOC = (Path(__file__).resolve().parents[3] / "docs" / "inventory-contract.md").read_text()


@pytest.mark.parametrize("name", ["lab", "dev", "prod-h100"])
def test_rendered_variables_are_documented(name: str) -> None:
    spec = load_stack(name)
    files = render_inventory(build_plan(spec))
    for rel, text in files.items():
        if rel == "hosts.yml":
            continue
        for var in load_inventory(text):
            assert f"`{var}`" in DOC, f"{var} (from {rel}) is not in docs/inventory-contract.md"
