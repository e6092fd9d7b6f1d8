"""What kiln tells a user points at what an installed kiln has: `kiln deploy` and the collection's playbooks
(`kiln.cluster.site`), never a checkout's `ansible/` directory, which neither the wheel nor the collection ships.
The lab (kiln/lab, `kiln lab up`) is the exception: it needs a checkout and says so."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHECKOUT_ONLY = re.compile(r"ansible/(site|storage|compute)\.yml|ansible/plays/")


def test_no_message_of_kiln_names_the_checkouts_playbooks() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "kiln").rglob("*.py"))
             if not path.is_relative_to(ROOT / "kiln" / "lab") and not path.is_relative_to(ROOT / "kiln" / "collection")
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if CHECKOUT_ONLY.search(line)]
    assert found == []


def test_the_readme_deploys_with_kiln_deploy() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    real_cluster = text.split("## Using kiln on a real cluster", 1)[1].split("\n## ", 1)[0]
    assert "kiln deploy" in real_cluster and not CHECKOUT_ONLY.search(real_cluster)
