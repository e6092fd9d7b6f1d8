"""Docs grow with the code: generated references are fresh and every spec field is described."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kiln import docgen
from kiln.spec.models import ClusterSpec


def test_generated_docs_are_fresh() -> None:
    assert docgen.main(["--check"]) == 0, "run: python -m kiln.docgen"


def _fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for name, field in model.model_fields.items():
        out.append((prefix + name, field))
        sub = docgen._submodel(field.annotation)
        if sub is not None:
            is_list = "list[" in docgen._type_name(field.annotation)
            out += _fields(sub, f"{prefix}{name}{'[]' if is_list else ''}.")
    return out


def test_every_spec_field_is_described_and_documented() -> None:
    text = (docgen.DOCS / "stack-reference.md").read_text()
    for path, field in _fields(ClusterSpec):
        assert field.description, f"{path} has no description"
        assert f"| `{path}` |" in text, f"{path} missing from docs/stack-reference.md"
