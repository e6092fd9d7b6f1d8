"""Every `kiln …` command README.md and docs/*.md show in a fenced shell block runs as shown (in a scratch directory
with the repository's stacks), or is skipped with the reason it cannot run here."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from kiln.cli import main

ROOT = Path(__file__).resolve().parents[3]
FENCE = re.compile(r"```(?:sh|bash|shell|console)\n(.*?)```", re.S)
#: Subcommands that need something this test does not have, and what.
NEEDS = {
    "verify": "runs benchmarks on a cluster's hosts",
    "lab": "deploys podman hosts (the lab)",
    "data": "moves data between a live object store and Lustre",
    "deploy": "configures a cluster's hosts over SSH",
    "diff": "compares the spec with the plan a converge recorded on a cluster",
}


def own(args: list[str]) -> list[str]:
    """kiln's own arguments: what follows `--` goes to another program (ansible-playbook for kiln deploy)."""
    return args[:args.index("--")] if "--" in args else args


def words(line: str) -> list[str]:
    """The first command of a shell line as argv: comments dropped, cut at a pipe or a command separator."""
    lex = shlex.shlex(line, posix=True, punctuation_chars="|;&")
    lex.whitespace_split, lex.commenters = True, "#"
    out: list[str] = []
    for token in lex:
        if token in ("|", "||", ";", "&", "&&"):
            break
        out.append(token)
    return out


def documented() -> list[tuple[str, str]]:
    """(file, command) for every line of a fenced shell block that runs kiln."""
    out = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in FENCE.findall(doc.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                first = line.split(maxsplit=1)[0] if line.strip() else ""
                if first.removeprefix(".venv/bin/") == "kiln":
                    out.append((doc.name, shlex.join(words(line))))
    return out


COMMANDS = documented()


def _key(command: str) -> tuple[str, ...]:
    """What a command does, its output directory aside: the same command shown twice runs once (CI time)."""
    args = words(command)[1:]
    return tuple(a for i, a in enumerate(args) if a != "--out" and (i == 0 or args[i - 1] != "--out"))


FIRST = {_key(c): c for _, c in reversed(COMMANDS)}
#: Stacks the docs create with `kiln init NAME …` → that command (later commands on NAME run after it).
INITS = {words(c)[2]: c for _, c in COMMANDS if words(c)[1:2] == ["init"] and len(words(c)) > 2}


def test_the_docs_show_kiln_commands() -> None:
    assert len(COMMANDS) > 10 and any("plan" in c for _, c in COMMANDS)


@pytest.mark.parametrize(("doc", "command"), COMMANDS, ids=[f"{d}: {c}" for d, c in COMMANDS])
def test_documented_command_runs(doc: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = shlex.split(command)[1:]
    sub = next((a for a in args if not a.startswith("-") and a not in ("/etc/kiln/stacks",)), "")
    if sub in NEEDS:
        pytest.skip(f"{doc}: `{command}` {NEEDS[sub]}")
    if any(a.startswith("/etc/") for a in args):
        pytest.skip(f"{doc}: `{command}` names a site directory that exists on a deployment host")
    if FIRST[_key(command)] != command:
        known, _ = _options(own(args))
        assert not [a for a in own(args) if a.startswith("-") and a not in known], f"{doc}: `{command}`"
        return  # the same command runs where the docs first show it
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    for stack in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        shutil.copy(stack, tmp_path / stack.name)
    init = INITS.get(args[1] if len(args) > 1 else "")
    if args[0] != "init" and init is not None:  # a stack the docs make with `kiln init` first
        monkeypatch.chdir(tmp_path)
        assert main(shlex.split(init)[1:]) == 0, f"{doc}: `{init}` failed"
    args = [str(tmp_path / a.removeprefix("/tmp/")) if a.startswith("/tmp/") else a for a in args]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KILN_STACKS_DIR", raising=False)
    try:
        code = main(args)
    except SystemExit as e:  # --version and --help exit from argparse
        code = int(e.code or 0)
    assert code == 0, f"{doc}: `{command}` failed"


INLINE = re.compile(r"`((?:\.venv/bin/)?kiln [^`]+)`")


def inline_commands() -> list[tuple[str, str]]:
    """(file, command) for every `kiln …` in inline code of the docs: their options must exist."""
    out = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for span in INLINE.findall(doc.read_text(encoding="utf-8")):
            if "…" not in span and "..." not in span:
                out.append((doc.name, span))
    return out


def _options(command: list[str]) -> tuple[set[str], str]:
    """The option strings the (sub)command accepts, walking nested subcommands, and its name."""
    import argparse

    from kiln.cli import parser

    p, name = parser(), "kiln"
    opts = {o for a in p._actions for o in a.option_strings}
    for word in command:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            continue
        p, name = subs[0].choices[word], f"{name} {word}"
        opts |= {o for a in p._actions for o in a.option_strings}
    return opts, name


@pytest.mark.parametrize(("doc", "command"), inline_commands(), ids=[f"{d}: {c}" for d, c in inline_commands()])
def test_documented_options_exist(doc: str, command: str) -> None:
    args = own(words(command)[1:])
    known, name = _options(args)
    unknown = [a.split("=", 1)[0] for a in args if a.startswith("-") and a.split("=", 1)[0] not in known]
    assert not unknown, f"{doc}: `{command}`: {name} has no option {', '.join(unknown)}"


#: Docs about one command: a bare `--option` in their inline code is that command's.
ABOUT = {"plan-json.md": ["plan"]}


@pytest.mark.parametrize("doc", sorted(ABOUT))
def test_bare_options_of_a_commands_doc_exist(doc: str) -> None:
    known, name = _options(ABOUT[doc])
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    unknown = sorted(set(re.findall(r"`(--[a-z-]+)", text)) - known)
    assert not unknown, f"docs/{doc} names {', '.join(unknown)}, which {name} refuses"
