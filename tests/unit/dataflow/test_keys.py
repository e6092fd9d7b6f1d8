"""Keys kiln refuses itself (kiln/dataflow/keys.py), whatever the store lets through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln.dataflow.keys import escape, inside, refusal


@pytest.mark.parametrize(("key", "words"), [
    ("../escape.bin", "'..' segment"),
    ("a/../../etc/passwd", "'..' segment"),
    ("/etc/passwd", "starts with '/'"),
    ("new\nline.bin", "control character"),
    ("tab\t.bin", "control character"),
    ("nul\x00.bin", "control character"),
    ("a//b.bin", "empty segment"),
    ("./a.bin", "'.' or '..' segment"),
    ("x.kiln-partial", "keeps for itself"),
    (".kiln-staging/a.bin", "keeps for itself"),
    ("d/" + "n" * 256, "longer than 255 bytes"),
])
def test_hostile_keys_are_refused_with_the_reason(key: str, words: str) -> None:
    why = refusal(key)
    assert why is not None and words in why


@pytest.mark.parametrize("key", ["a.bin", "dir/sub/file.tar", "a b+c%25d ü.bin", "x.kiln-partial.tar", "..a"])
def test_ordinary_keys_pass(key: str) -> None:
    assert refusal(key) is None


def test_escape_keeps_one_line() -> None:
    assert escape("a\nb\tc\\d ü") == "a\\nb\\tc\\\\d ü"


def test_a_symlink_on_the_way_out_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "link"
    (root / "sub").mkdir(parents=True)
    os.symlink(tmp_path, root / "out")
    os.symlink("sub", root / "in")
    assert inside(root, "sub/f") and inside(root, "in/f") and inside(root, "f")
    assert not inside(root, "out/f")
