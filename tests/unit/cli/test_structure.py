"""How the CLI package is put together: adapters never import it, and its commands keep to its rules."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

KILN = Path(__file__).resolve().parents[3] / "kiln"
CLI = KILN / "cli"


def _modules(root: Path) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _imported(node: ast.AST, members: bool = True) -> list[str]:
    """Absolute module names an import statement names; with members also `module.name` for each name of a
    `from module import name` (so `from kiln import cli` counts as kiln.cli)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module, *(f"{node.module}.{a.name}" for a in node.names if members)]
    return []


def test_no_module_outside_the_cli_imports_it() -> None:
    offenders = sorted({
        f"{path.relative_to(KILN.parent)}:{node.lineno} imports {name}"
        for path, tree in _modules(KILN) if CLI not in path.parents
        for node in ast.walk(tree) for name in _imported(node)
        if name == "kiln.cli" or name.startswith("kiln.cli.")
    })
    assert not offenders, offenders


def test_the_command_modules_import_common_never_the_package() -> None:
    """kiln/cli/__init__.py imports the command modules; they import kiln.cli.common only, and it none of them."""
    for path, tree in _modules(CLI):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        names = {n for node in ast.walk(tree) for n in _imported(node, members=False) if n.startswith("kiln.cli")}
        assert names <= (set() if path.name == "common.py" else {"kiln.cli.common"}), (path, names)


def test_no_function_local_kiln_import_in_the_cli() -> None:
    local = sorted({
        f"{path.name}:{node.lineno}"
        for path, tree in _modules(CLI)
        for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(fn) for name in _imported(node, members=False) if name.split(".")[0] == "kiln"
    })
    assert not local, local


def test_commands_exit_with_the_named_codes() -> None:
    """No literal exit status in a command: `return 2`, `sys.exit(1)`, `SystemExit(1)` (use kiln.cli.common.EXIT_*)."""
    literal = []
    for path, tree in _modules(CLI):
        for node in ast.walk(tree):
            value = node.value if isinstance(node, ast.Return) else None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                value = node.args[0] if called in ("exit", "SystemExit") and node.args else None
            if isinstance(value, ast.Constant) and isinstance(value.value, int) and not isinstance(value.value, bool):
                literal.append(f"{path.name}:{node.lineno}")
    assert not literal, literal


def test_commands_report_through_common() -> None:
    """Results through kiln.cli.common.result, diagnostics through logging: no print(), no sys.stdout/stderr."""
    stray = []
    for path, tree in _modules(CLI):
        if path.name in ("common.py", "__init__.py"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                stray.append(f"{path.name}:{node.lineno} print()")
            if isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr"):
                stray.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not stray, stray
