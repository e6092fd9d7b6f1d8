"""Inventory group names are spelled once, in kiln/plan/groups.py: code elsewhere in kiln/ uses its constants
and builders, so a renamed group cannot leave a stale copy behind."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kiln.plan import build_plan, groups
from kiln.spec import load_stack

KILN = Path(__file__).resolve().parents[3] / "kiln"
PREFIXES = (groups.POOL_PREFIX, groups.ROUTER_PREFIX)
NAMES = [v for k, v in vars(groups).items() if k.isupper() and isinstance(v, str) and v not in PREFIXES]
#: A group name as a whole word (kiln_lustre_mgs, not the variable kiln_lustre_mgs_nids), or a builder prefix.
GROUP = re.compile(r"(?<![A-Za-z0-9_])(?:(?:" + "|".join(map(re.escape, NAMES)) + r")(?![A-Za-z0-9_])|"
                   + "|".join(map(re.escape, PREFIXES)) + ")")


def _prose(tree: ast.AST) -> set[int]:
    """ids of docstrings and pydantic `description=` texts: prose may name a group, code may not."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            out.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg == "description":
            out.update(id(n) for n in ast.walk(node.value))
    return out


def group_literals(path: Path) -> list[str]:
    """'line: literal' for every string literal of a Python file (f-string parts included) that spells a group."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = _prose(tree)
    hits = [node for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in prose and GROUP.search(node.value)]
    return [f"{node.lineno}: {node.value!r}" for node in sorted(hits, key=lambda n: (n.lineno, n.col_offset))]


def test_group_names_are_written_only_in_the_groups_module() -> None:
    home = KILN / "plan" / "groups.py"
    found = [f"{path.relative_to(KILN.parent)}:{hit}" for path in sorted(KILN.rglob("*.py")) if path != home
             for hit in group_literals(path)]
    assert found == [], "use kiln.plan.groups instead of:\n" + "\n".join(found)


def test_the_check_sees_a_literal(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('"""Docs may say kiln_compute."""\nG = "kiln_compute"\nP = f"kiln_pool_{x}"\n'
                   'V = "kiln_lustre_mgs_nids"\nF = "group_vars/kiln_lustre_clients.yml"\n')
    assert group_literals(bad) == ["2: 'kiln_compute'", "3: 'kiln_pool_'", "5: 'group_vars/kiln_lustre_clients.yml'"]


def test_every_planned_group_is_one_the_module_names_or_builds() -> None:
    for stack in ("dev", "lab", "prod-h100"):
        plan = build_plan(load_stack(stack), stack)
        for name in plan.groups:
            assert name in NAMES or name.startswith(PREFIXES), name
        pools = {h.pool for h in plan.hosts if h.pool}
        assert {groups.pool_group(p) for p in pools} <= set(plan.groups)
