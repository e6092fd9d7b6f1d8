"""Where each check's runbook section is: `<runbook>#<anchor of the check id>`, linked to the clone's docs/ when
kiln runs from one (from a wheel, the relative path)."""

from __future__ import annotations

import re
from pathlib import Path

# The clone kiln runs from, if any: runbook links then point at its docs/.
REPO = Path(__file__).resolve().parents[2]


def anchor(check: str) -> str:
    """GitHub's heading anchor for '## <check id>' (dots dropped): storage.fio_local_read → storagefio_local_read."""
    return re.sub(r"[^a-z0-9_\- ]", "", check.lower()).replace(" ", "-")


def runbook_ref(runbook: str, check: str) -> str:
    """`docs/runbooks/<file>.md#<anchor>`, or '' for a check without a runbook."""
    return f"{runbook}#{anchor(check)}" if runbook else ""


def runbook_href(runbook: str, check: str) -> str:
    """A link to the section: the file in this clone when there is one, else the relative reference."""
    local = REPO / runbook
    return f"{local.as_uri()}#{anchor(check)}" if runbook and local.exists() else runbook_ref(runbook, check)
