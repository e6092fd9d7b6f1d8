"""Package metadata: the wheel (pyproject.toml) and the collection (galaxy.yml) say the same things about kiln."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
AUTHOR = re.compile(r"^[\w][\w .'-]* \(@[\w-]+\)$")  # ansible-test validate-modules: "Name (@handle)"


def test_versions_and_addresses_agree() -> None:
    assert GALAXY["version"] == PROJECT["version"]
    urls = PROJECT["urls"]
    assert GALAXY["repository"] == urls["Repository"]
    assert GALAXY["homepage"] == urls["Homepage"]
    assert GALAXY["documentation"] == urls["Documentation"]
    assert GALAXY["issues"] == urls["Issues"]
    assert all(u.startswith("https://") for u in urls.values())


def test_python_classifiers_match_requires_python() -> None:
    low, high = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", PROJECT["requires-python"]).groups()  # type: ignore[union-attr]
    listed = {c.rsplit(" ", 1)[1] for c in PROJECT["classifiers"] if re.fullmatch(r".*Python :: 3\.\d+", c)}
    assert listed == {f"3.{n}" for n in range(int(low), int(high))}
    assert PROJECT["keywords"] and PROJECT["license"] == GALAXY["license"][0]


def test_every_module_names_its_authors_as_galaxy_does() -> None:
    assert all(AUTHOR.match(a) for a in GALAXY["authors"]), GALAXY["authors"]
    for path in sorted((ROOT / "plugins" / "modules").glob("*.py")):
        tree = ast.parse(path.read_text())
        doc = next(n.value.value for n in tree.body if isinstance(n, ast.Assign)  # type: ignore[attr-defined]
                   and getattr(n.targets[0], "id", "") == "DOCUMENTATION")
        authors = yaml.safe_load(doc)["author"]
        authors = [authors] if isinstance(authors, str) else authors
        assert authors and all(AUTHOR.match(a) for a in authors), (path.name, authors)


def test_sanity_ignores_are_few_and_give_reasons() -> None:
    files = sorted((ROOT / "tests" / "sanity").glob("ignore-*.txt"))
    assert [f.name for f in files] == ["ignore-2.18.txt", "ignore-2.19.txt"]
    assert files[0].read_text() == files[1].read_text()  # one list for the ansible-core releases the extras allow
    for line in files[0].read_text().splitlines():
        entry, _, reason = line.partition(" # ")
        assert entry.split()[1] == "validate-modules:missing-gplv3-license", line  # nothing else is ignored
        assert "Apache-2.0" in reason, line
