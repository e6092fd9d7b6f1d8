"""Which operating systems kiln's roles support, and the refusal for any other.

The data is the collection's ``meta/os_support.yml`` (platforms, each role's platforms, and the platforms a
role accepts only in the lab); this module only reads it, already parsed, so it needs no YAML library:

- the ``kiln.cluster.os_support_problem`` filter (plugins/filter/os_support.py) loads the file on the
  controller and every role calls it first (tasks/os.yml), before any change;
- kiln loads the same file (``kiln.knowledge.os_support()``) and imports this module as
  ``kiln.lustre.os_support`` (``kiln/lustre`` links to this directory) for ``kiln deploy``'s pre-flight.

Pure functions of their arguments; Python 3.9 and the standard library, like the rest of module_utils.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def platform_of(data: Mapping[str, Any], facts: Mapping[str, Any]) -> str | None:
    """The key of the platform (``el9``, ``ubuntu2404``, ...) that a host's Ansible facts match, or None.

    ``facts`` are Ansible's fact names without the ``ansible_`` prefix (``ansible_facts``): os_family,
    distribution, distribution_major_version and distribution_version.
    """
    family = str(facts.get("os_family", ""))
    distribution = str(facts.get("distribution", ""))
    versions = {str(facts.get("distribution_major_version", "")), str(facts.get("distribution_version", ""))}
    for key, platform in data["platforms"].items():
        if (
            platform["os_family"] == family
            and distribution in platform["distributions"]
            and versions & {str(v) for v in platform["versions"]}
        ):
            return str(key)
    return None


def describe(facts: Mapping[str, Any]) -> str:
    """How a host's facts name its OS, e.g. ``Rocky 9.4 (os_family RedHat)``."""
    name = f"{facts.get('distribution', '?')} {facts.get('distribution_version', '?')}"
    return f"{name} (os_family {facts.get('os_family', '?')})"


def supported(data: Mapping[str, Any], role: str, lab: bool = False) -> list[str]:
    """The platform keys ``role`` accepts; with ``lab`` also its lab-only ones."""
    entry = role_entry(data, role)
    return list(entry["platforms"]) + (list(entry.get("lab_only", [])) if lab else [])


def role_entry(data: Mapping[str, Any], role: str) -> Mapping[str, Any]:
    """The role's entry in the data; a role without one is an error in the collection, not in the host."""
    try:
        entry: Mapping[str, Any] = data["roles"][role]
    except KeyError:
        raise KeyError(f"role {role} has no entry in meta/os_support.yml") from None
    return entry


def problem(data: Mapping[str, Any], role: str, facts: Mapping[str, Any], lab: bool = False) -> str:
    """Why ``role`` must not run on this host, or '' when it may.

    ``lab`` allows the role's lab-only platforms (the lab's Debian stand-ins for Lustre servers and clients:
    the role's ``<role>_config_only`` switch, on where it lays down configuration without the real
    software). The message names the host's OS, the reason and source the data gives, the supported list
    and, for a lab-only platform, the switch.
    """
    entry = role_entry(data, role)
    key = platform_of(data, facts)
    if key is not None and key in supported(data, role, lab):
        return ""
    names = ", ".join(data["platforms"][k]["name"] for k in entry["platforms"])
    why = entry.get("reason", "")
    message = f"role {role} does not support {describe(facts)}: it supports {names}"
    if why:
        message += f" ({why}; source: {entry.get('source', 'meta/os_support.yml')})"
    if key is not None and key in entry.get("lab_only", []):
        message += (
            f". {data['platforms'][key]['name']} is accepted only as the lab's stand-in, where the role lays down"
            f" configuration ({role}_config_only, or -e kiln_allow_not_applicable=true as `kiln lab` passes)"
        )
    return message + ". Nothing was changed on this host."


def problems(
    data: Mapping[str, Any], roles: Sequence[str], facts: Mapping[str, Any], lab: bool = False
) -> dict[str, str]:
    """``problem`` for each role that a host runs, only the refusals: {role: message}."""
    found = {role: problem(data, role, facts, lab) for role in roles}
    return {role: message for role, message in found.items() if message}
