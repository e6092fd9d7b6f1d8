"""Raw stack-file text: size, duplicate keys, alias bombs, nesting and huge numbers give a clean exit 2, quickly."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln.cli import main
from kiln.spec import SpecError, load_stack, parse_stack_text
from kiln.spec.errors import SpecIssue
from kiln.spec.loader import MAX_STACK_BYTES

ROOT = Path(__file__).resolve().parents[3]
LAB = (ROOT / "stacks" / "Pulumi.lab.yaml").read_text()

BILLION_LAUGHS = "config:\n  kiln:cluster:\n    a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)
)

HOSTILE = {
    "duplicate key": LAB.replace("  kiln:cluster:\n", "  kiln:cluster:\n    name: other\n", 1),
    "billion laughs": BILLION_LAUGHS,
    "deep nesting": "config:\n  kiln:cluster: " + "[" * 5000 + "]" * 5000 + "\n",
    "deep mappings": "config:\n  kiln:cluster: " + "{a: " * 200 + "1" + "}" * 200 + "\n",
    "5000-digit integer": LAB.replace("nodes: 2", "nodes: " + "9" * 5000, 1),
    "too large": LAB + "#" * (MAX_STACK_BYTES + 1),
    "recursive alias": "config:\n  kiln:cluster: &a\n    x: *a\n",
    "not a mapping": "- just\n- a list\n",
    "tab indentation": "config:\n\tkiln:cluster: {}\n",
    "binary junk": "\x00\x01\x02",
}


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_yaml_is_a_spec_error_within_a_second(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(SpecError) as err:
        parse_stack_text(text)
    assert time.perf_counter() - start < 2.0
    rendered = err.value.render()
    assert len(rendered) < 4000
    assert all(i.path for i in err.value.issues)


def test_duplicate_keys_name_the_key() -> None:
    with pytest.raises(SpecError) as err:
        parse_stack_text(HOSTILE["duplicate key"])
    assert "duplicate key 'name'" in err.value.render()


def test_the_error_printer_bounds_deep_and_huge_values() -> None:
    deep: list[object] = []
    node = deep
    for _ in range(10_000):
        child: list[object] = []
        node.append(child)
        node = child
    huge = {f"k{i}": "v" * 10_000 for i in range(10_000)}
    for value in (deep, huge, 10**5000, "x" * 10**6):
        start = time.perf_counter()
        issue = SpecIssue("p", value, "problem", "fix")
        assert len(issue.render()) < 300
        assert len(issue.line()) < 300
        assert time.perf_counter() - start < 1.0


def test_cli_exits_2_on_a_huge_file_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.big.yaml"
    path.write_text(LAB + "#" * (50 * MAX_STACK_BYTES))
    r = subprocess.run([sys.executable, "-m", "kiln.cli", "validate", str(path)], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "(file)" in r.stderr


def test_cli_exits_2_on_a_bad_port_before_rendering(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load(LAB)
    cluster = doc["config"]["kiln:cluster"]
    cluster["objectstore"] = {**cluster["objectstore"], "backend": "external", "endpoint": "http://s3:99999",
                              "throughput_GBps": 1.0}
    path = tmp_path / "Pulumi.port.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["render", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "objectstore.endpoint" in capsys.readouterr().err


_LINES = LAB.splitlines(keepends=True)
_JUNK = st.sampled_from(["&a ", "*a", "<<: *a\n", "{", "}", "[", "]", ": ", "- ", "!!python/object:os.system ", "\n",
                         "  ", "\t", "'", '"', "#", "1e999", ".nan", "-.inf", "0x7fffffffffffffffff", "~", "? ",
                         "{{ x }}", "\u2028", "\x1b", "é"])


@settings(max_examples=80, deadline=9000, suppress_health_check=[HealthCheck.too_slow])
@given(line=st.integers(0, len(_LINES) - 1), col=st.integers(0, 40), junk=st.lists(_JUNK, min_size=1, max_size=4))
def test_mutated_stack_text_is_accepted_or_refused_cleanly(line: int, col: int, junk: list[str]) -> None:
    """Property: junk spliced anywhere into a valid stack file gives a spec or a SpecError, never another
    exception, and quickly."""
    lines = list(_LINES)
    lines[line] = lines[line][:col] + "".join(junk) + lines[line][col:]
    start = time.perf_counter()
    try:
        parse_stack_text("".join(lines))
    except SpecError as exc:
        assert exc.issues and exc.render()
    assert time.perf_counter() - start < 2.0


def test_an_endless_file_is_refused_after_reading_one_byte_past_the_limit() -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("not applicable on this host: no /dev/zero")
    start = time.perf_counter()
    with pytest.raises(SpecError, match="larger than"):
        load_stack("/dev/zero")
    assert time.perf_counter() - start < 2.0
