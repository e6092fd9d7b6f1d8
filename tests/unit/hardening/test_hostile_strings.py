"""Hostile strings in every string field of the spec: refused with the field path, never accepted, no traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln.cli import main
from kiln.spec import SpecError, validate
from tests.unit.hardening.helpers import (
    ALWAYS_REFUSED,
    SHELL_HOSTILE,
    SHELL_META,
    base_spec,
    dotted,
    external_spec,
    model_string_fields,
    replaced,
    string_leaves,
)

#: Free-text fields: shell characters are fine there (they are never executed), control characters are not.
FREE_TEXT = {
    "description", "hardware.nics.description", "hardware.nics.source", "hardware.gpus.description",
    "hardware.gpus.source", "lustre.oss.server.source", "lustre.oss.uplink.source", "acceptance.waivers.reason",
}


#: Fields whose syntax needs characters a shell treats specially; they are passed as single argv items or written
#: into files, never into a shell command line: S3 key globs and cron schedules.
PATTERN_TEXT = {
    "dataflow.links.include": set("*?[]!{},"),
    "dataflow.links.exclude": set("*?[]!{},"),
    "dataflow.links.schedule": set(" *,/"),
}


def _fields() -> list[tuple[str, tuple[Any, ...], str]]:
    out = []
    for variant, data in (("base", base_spec()), ("external", external_spec())):
        for path, value in string_leaves(data):
            if variant == "external" and path[:2] != ("objectstore", "endpoint"):
                continue
            out.append((variant, path, value))
    return out


FIELDS = _fields()
SPECS = {"base": base_spec, "external": external_spec}


def _field_name(path: tuple[Any, ...]) -> str:
    if path[:1] == ("hardware",) and len(path) >= 3:
        path = (*path[:2], *path[3:])  # hardware.nics.<model name>.field: the model name is a mapping key
    name = ".".join(str(p) for p in path if not isinstance(p, int) and p != "<key>")
    for mapping in ("overrides", "lustre.ha.fencing.options", "networks.reserve"):  # their keys are data
        if name.startswith(mapping):
            return mapping
    return name


def test_every_string_field_of_the_models_is_covered() -> None:
    covered = {_field_name(path) for _, path, _ in FIELDS}
    # Closed vocabularies (Literal) are not string fields for this purpose; every other one must be exercised.
    assert model_string_fields() <= covered, model_string_fields() - covered


def _refused(data: dict[str, Any], path: tuple[Any, ...]) -> SpecError:
    with pytest.raises(SpecError) as err:
        validate(data)
    want = dotted(path)
    paths = [i.path for i in err.value.issues]
    # A hostile mapping key is shown escaped, so only its parent path can be matched.
    prefix = want if path[-1] != "<key>" else dotted(path[:-2])
    assert any(p.startswith(prefix) for p in paths), (want, paths)
    text = err.value.render()
    assert "\x00" not in text and "\x1b" not in text and "\u202e" not in text
    return err.value


@pytest.mark.parametrize(("variant", "path", "value"), FIELDS, ids=[dotted(p) for _, p, _ in FIELDS])
def test_control_characters_and_templates_are_refused_everywhere(
    variant: str, path: tuple[Any, ...], value: str
) -> None:
    for hostile in ALWAYS_REFUSED:
        _refused(replaced(SPECS[variant](), path, value + hostile), path)


@pytest.mark.parametrize(("variant", "path", "value"), FIELDS, ids=[dotted(p) for _, p, _ in FIELDS])
def test_shell_characters_are_refused_outside_free_text(variant: str, path: tuple[Any, ...], value: str) -> None:
    if _field_name(path) in FREE_TEXT:
        pytest.skip("free text may hold shell characters; it is never inserted into a command")
    if _field_name(path) in PATTERN_TEXT:
        pytest.skip("glob and cron syntax needs shell characters; the value is never inserted into a command line")
    for hostile in SHELL_HOSTILE:
        data = replaced(SPECS[variant](), path, hostile)
        if _field_name(path) == "overrides" and path[-1] != "<key>" and hostile == "a b":
            continue  # sysctl triples ("4096 87380 16777216") are space-separated override values
        _refused(data, path)


ALPHABET = st.sampled_from(sorted(SHELL_META | set("aZ09_-./:@=,+%\u2028\u202e\x1b{}#")))


@settings(max_examples=60, deadline=6000, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(min_value=0, max_value=len(FIELDS) - 1), text=st.text(ALPHABET, min_size=0, max_size=24))
def test_random_strings_are_refused_or_harmless(index: int, text: str) -> None:
    """Property: whatever string lands in whatever field, the spec is refused with that field's path, or it is
    accepted and then holds no character that could end a value in a script, unit, sysctl file or YAML."""
    variant, path, _ = FIELDS[index]
    data = replaced(SPECS[variant](), path, text)
    try:
        spec = validate(data)
    except SpecError as exc:
        assert exc.issues and all(i.path for i in exc.issues)
        return
    for leaf, value in string_leaves(spec.model_dump(mode="python")):
        name = _field_name(leaf)
        allowed = {" "} if name in FREE_TEXT or (name == "overrides" and leaf[-1] != "<key>") else set()
        if name == "overrides" and leaf[-1] == "<key>":
            allowed = {"*"}  # a tuning-id glob (docs/tuning.md); keys are never inserted into a command
        if name in FREE_TEXT:
            allowed = SHELL_META - {"\n", "\r", "\t", "\x00"}
        allowed = allowed | PATTERN_TEXT.get(name, set())
        if name == "lustre.ha.fencing.address":
            value = value.replace("{host}", "")  # the planner's placeholder for the server name
        assert not (set(value) & (SHELL_META - allowed)), (leaf, value)


@pytest.mark.parametrize("index", range(0, len(FIELDS), 7))
def test_the_cli_exits_2_naming_the_field(
    index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    variant, path, value = FIELDS[index]
    data = replaced(SPECS[variant](), path, value + "\n{{ lookup('pipe', 'id') }}")
    stack = tmp_path / "Pulumi.hostile.yaml"
    stack.write_text(yaml.safe_dump({"config": {"kiln:cluster": data}}))
    assert main(["validate", str(stack)]) == 2
    err = capsys.readouterr().err
    prefix = dotted(path) if path[-1] != "<key>" else dotted(path[:-2])
    assert prefix in err and "fix:" in err and "Traceback" not in err
