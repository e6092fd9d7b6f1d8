"""Docs grow with the code: generated references are fresh and every spec field is described."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from kiln import docgen
from kiln.plan.model import PLAN_SCHEMA
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


def _options(options: dict[str, Any], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name, opt in options.items():
        out.append((prefix + name, opt))
        out += _options(opt.get("options") or {}, f"{prefix}{name}.")
    return out


@pytest.mark.parametrize("role", docgen.roles())
def test_every_role_variable_is_described_once_in_its_argument_spec(role: str) -> None:
    spec = docgen.argument_spec(role)
    options = _options(spec.get("options") or {})
    assert options, f"roles/{role}/meta/argument_specs.yml has no options"
    for path, opt in options:
        assert docgen._describe(opt).strip(), f"roles/{role}: option {path} has no description"
    defaults = yaml.safe_load((docgen.ROLES / role / "defaults" / "main.yml").read_text()) or {}
    undocumented = sorted(set(defaults) - set(spec["options"]))
    assert not undocumented, f"roles/{role}/defaults/main.yml sets variables its argument spec lacks: {undocumented}"
    readme = (docgen.ROLES / role / "README.md").read_text()
    assert docgen.role_variables(role) in readme


# The keys of an option in a role argument spec (ansible-lint's role-arg-spec schema). A YAML flow mapping with an
# unquoted comma in a description makes a stray key, which Ansible ignores and the docs lose.
OPTION_KEYS = {
    "type", "elements", "default", "required", "description", "choices", "options", "no_log", "aliases",
    "version_added", "apply_defaults", "fallback", "example", "mutually_exclusive", "required_together",
    "required_one_of", "required_if", "required_by",
}


@pytest.mark.parametrize("role", docgen.roles())
def test_argument_spec_options_have_only_ansible_keys(role: str) -> None:
    for path, opt in _options(docgen.argument_spec(role).get("options") or {}):
        assert set(opt) <= OPTION_KEYS, f"roles/{role}: option {path} has keys {sorted(set(opt) - OPTION_KEYS)}"


@pytest.mark.parametrize("role", docgen.roles())
def test_argument_spec_defaults_are_the_role_defaults(role: str) -> None:
    """A required option has no role default (Ansible would never enforce it), and the default an argument spec shows
    is the one defaults/main.yml sets (a templated role default is documented in words, not compared)."""
    options = docgen.argument_spec(role).get("options") or {}
    defaults = yaml.safe_load((docgen.ROLES / role / "defaults" / "main.yml").read_text()) or {}
    for name, opt in options.items():
        if name not in defaults:
            continue
        assert not opt.get("required"), f"roles/{role}: {name} is required but defaults/main.yml sets it"
        if "{{" not in str(defaults[name]):
            assert opt.get("default") == defaults[name], (
                f"roles/{role}: {name} defaults to {defaults[name]!r} in defaults/main.yml, "
                f"{opt.get('default')!r} in meta/argument_specs.yml"
            )


def test_the_plan_schema_has_a_changelog_entry() -> None:
    changelog = (docgen.ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"`{PLAN_SCHEMA}`" in changelog, f"CHANGELOG.md does not mention the plan schema {PLAN_SCHEMA}; add an entry"


def test_an_option_without_a_description_stops_the_generator() -> None:
    with pytest.raises(docgen.RoleDocError, match="x_flag has no description"):
        docgen._option_rows({"x_flag": {"type": "bool", "default": False}}, "", "roles/x/meta/argument_specs.yml")
