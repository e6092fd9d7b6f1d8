"""The OS pre-flight of every kiln role: may this role run on this host's operating system?

``{{ ansible_facts | kiln.cluster.os_support_problem('lustre_server', lab=lustre_server_config_only) }}`` is
'' on a supported platform and otherwise the refusal, naming the host's OS, the reason, its source and the
supported list. The data is the collection's meta/os_support.yml (read once per controller process); the
matching is plugins/module_utils/os_support.py, which kiln's own pre-flight (``kiln deploy``) imports too.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.module_utils.os_support import platform_of, problem

#: meta/os_support.yml of the collection this plugin belongs to (plugins/filter/ → the collection root).
DATA_FILE = Path(__file__).resolve().parents[2] / "meta" / "os_support.yml"


@cache
def os_support_data(path: str = str(DATA_FILE)) -> dict[str, Any]:
    """meta/os_support.yml, parsed."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise AnsibleFilterError(f"cannot read the supported-OS data {path}: {exc}") from exc
    if not isinstance(data, dict) or not {"platforms", "roles"} <= data.keys():
        raise AnsibleFilterError(f"{path} has no platforms and roles")
    return data


def os_support_problem(facts: Mapping[str, Any], role: str, lab: Any = False) -> str:
    """'' when ``role`` supports the OS these facts describe; otherwise why not, and what it supports."""
    if not isinstance(facts, Mapping) or "os_family" not in facts:
        raise AnsibleFilterError(
            f"role {role}: no OS facts (os_family, distribution, distribution_major_version); gather facts first"
        )
    try:
        return problem(os_support_data(), role, facts, lab=str(lab).lower() in ("true", "1", "yes"))
    except KeyError as exc:
        raise AnsibleFilterError(str(exc.args[0])) from exc


def os_platform(facts: Mapping[str, Any]) -> str:
    """The key of the platform the facts match (``debian12``, ``el9``, ...), '' for none."""
    return platform_of(os_support_data(), facts) or ""


class FilterModule:
    """Supported operating systems."""

    def filters(self) -> dict[str, Any]:
        return {"os_support_problem": os_support_problem, "os_platform": os_platform}
