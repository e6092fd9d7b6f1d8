"""The repository's own text: the paths it names exist, and it refers to no tracker numbers.

Paths are checked in the docs and in kiln's, bench's and scripts' docstrings and comments. A path is a word that
starts with one of the repository's top-level directories (`kiln/`, `docs/`, …) and is not the tail of a longer
path (`lustre/tests/…` in lustre-release is not `tests/…`). `<placeholder>` segments and glob characters match any
name, `{a,b}` either alternative; relative Markdown links are resolved from their file.
"""

from __future__ import annotations

import ast
import glob
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOP = ("kiln", "docs", "roles", "bench", "scripts", "tests", "ansible", "stacks", "containers", "policy", "plugins")
# CHANGELOG.md is not among them: it names the old paths of what moved.
DOCS = ("docs/**/*.md", "README.md", "CONTRIBUTING.md", "roles/*/README.md", "ansible/README.md")
CODE = ("kiln", "bench", "scripts")

# Paths that are named on purpose although the checkout does not hold them, and why.
ALLOWED = {
    "kiln/stack": "docs/architecture.md explains why the spec package is not called that",
}

_PATH = re.compile(rf"(?<![\w./~$-])(?:{'|'.join(TOP)})/[\w.*?<>{{}},/-]*")
_LINK = re.compile(r"\]\((?!https?:|mailto:)([\w./-]+)(?:#[\w-]*)?\)")
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def _candidates(word: str) -> list[str]:
    """Glob patterns for a path as written: trailing punctuation dropped, {a,b} expanded, <x> and [] made globs."""
    word = word.rstrip(".,:;")
    brace = re.search(r"\{([^{}]*)\}", word)
    if brace:
        return [c for alt in brace[1].split(",") for c in _candidates(word[: brace.start()] + alt + word[brace.end():])]
    return [re.sub(r"<[^<>]*>", "*", word)]


def _exists(pattern: str, base: Path = ROOT) -> bool:
    if any(ch in pattern for ch in "*?["):
        return bool(glob.glob(pattern, root_dir=base, recursive=True))
    return (base / pattern).exists()


def _doc_texts() -> Iterator[tuple[Path, str]]:
    for pattern in DOCS:
        for path in sorted(ROOT.glob(pattern)):
            yield path, path.read_text(encoding="utf-8")


def _python_prose(text: str) -> str:
    """The docstrings and comments of a Python file."""
    parts = [tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            parts.append(ast.get_docstring(node, clean=False) or "")
    return "\n".join(parts)


def _shell_prose(text: str) -> str:
    """The comments of a shell (or other #-commented) file: whole-line comments and ` # ` tails."""
    return "\n".join(line.split(" # ", 1)[1] if " # " in line else line.strip()
                     for line in text.splitlines() if line.lstrip().startswith("#") or " # " in line)


def _code_texts() -> Iterator[tuple[Path, str]]:
    for top in CODE:
        for path in sorted((ROOT / top).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix in {".json", ".csv", ".pyc"}:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if path.suffix == ".py":
                yield path, _python_prose(text)
            elif path.suffix in {".sh", ""} or text.startswith("#!"):
                yield path, _shell_prose(text)


def broken_paths() -> list[str]:
    problems = []
    for path, text in [*_doc_texts(), *_code_texts()]:
        rel = path.relative_to(ROOT)
        for word in sorted(set(_PATH.findall(text))):
            candidates = _candidates(word)
            if not any(_exists(c) for c in candidates) and word.rstrip(".,:;") not in ALLOWED:
                problems.append(f"{rel}: {word}")
        if path.suffix == ".md":
            for target in sorted(set(_LINK.findall(_CODE_SPAN.sub("", text)))):
                if not _exists(target, path.parent):
                    problems.append(f"{rel}: link {target}")
    return problems


def test_paths_named_in_docs_and_comments_exist() -> None:
    problems = broken_paths()
    assert not problems, "paths that do not exist (fix the reference, or allow it with its reason):\n" + "\n".join(
        problems
    )


# "issue" with a number, or "(issue" opening a reference: this project's tracker. Published sources are cited with
# their repository and a #number (NVIDIA/nccl-tests issue #287), which this does not match.
TRACKER = re.compile(r"\bissues? \d+|\(issues?[ :]", re.I)


def tracker_references(paths: list[str]) -> list[str]:
    found = []
    for rel in paths:
        try:
            text = (ROOT / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary, a submodule, or deleted in the work tree
        found += [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if TRACKER.search(line)]
    return found


def test_no_tracker_numbers_in_tracked_text() -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    this = str(Path(__file__).resolve().relative_to(ROOT))  # its examples below are references on purpose
    found = tracker_references([rel for rel in tracked.stdout.split("\0")[:-1] if rel != this])
    assert not found, "say what the reference meant instead of a tracker number:\n" + "\n".join(found)


def test_the_tracker_pattern_tells_references_from_citations() -> None:
    assert TRACKER.search("the floors of Issue 14") and TRACKER.search("targets (issue: scale)")
    assert not TRACKER.search("NVIDIA/nccl-tests issue #287") and not TRACKER.search("list(issues.values())")


def test_the_path_pattern_reads_placeholders_braces_and_tails() -> None:
    assert _PATH.findall("see roles/<role>/README.md, lustre/tests/sanity.sh and .kiln/state") == [
        "roles/<role>/README.md,"
    ]
    assert _candidates("kiln/{plan,spec}/model.py.") == ["kiln/plan/model.py", "kiln/spec/model.py"]
    assert _exists(_candidates("roles/<role>/README.md,")[0]) and not _exists("docs/no-such-page.md")
