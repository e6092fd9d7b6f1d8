"""The operating systems kiln's roles support, validated: os_support.yaml, a link to the collection's
meta/os_support.yml, where the roles' pre-flight (the kiln.cluster.os_support_problem filter) reads it.

``os_support()`` is the validated file; ``os_problems(roles, facts, lab=...)`` is the same refusal the roles
give, for ``kiln deploy``'s pre-flight: it takes a host's Ansible facts (``ansible_facts``, without the
``ansible_`` prefix) and the roles that run there, and returns {role: why not} for each refusing role. The
matching itself is kiln.lustre.os_support (the collection's plugins/module_utils/os_support.py), which the
filter uses too, so the two pre-flights cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Literal

from pydantic import Field, model_validator

from kiln.knowledge import Entry, Words, _read
from kiln.lustre import os_support as matching


class Platform(Entry):
    """A supported OS release, as Ansible's facts name it."""

    name: Words
    os_family: Literal["Debian", "RedHat"]
    distributions: tuple[str, ...] = Field(min_length=1)
    versions: tuple[str, ...] = Field(min_length=1)
    checked: Literal["ci", "static"]
    source: Words


class RoleSupport(Entry):
    """The platforms one role supports, and those it accepts only as the lab's stand-ins."""

    platforms: tuple[str, ...] = Field(min_length=1)
    lab_only: tuple[str, ...] = ()
    reason: str = ""
    source: str = ""

    @model_validator(mode="after")
    def _sourced(self) -> RoleSupport:
        if self.lab_only and not (self.reason and self.source):
            raise ValueError("a role with lab_only platforms needs the reason and its source")
        return self


class OsSupportFile(Entry):
    schema_: Literal[1] = Field(alias="schema")
    platforms: dict[str, Platform]
    checked: dict[Literal["ci", "static"], Words]
    roles: dict[str, RoleSupport]

    @model_validator(mode="after")
    def _known_platforms(self) -> OsSupportFile:
        for role, entry in self.roles.items():
            unknown = [p for p in (*entry.platforms, *entry.lab_only) if p not in self.platforms]
            if unknown:
                raise ValueError(f"role {role} names unknown platforms {unknown}")
        return self


@cache
def os_support() -> OsSupportFile:
    """os_support.yaml, validated (KnowledgeError names the file, path and problem)."""
    return _read("os_support.yaml", OsSupportFile)


def _data() -> dict[str, Any]:
    return os_support().model_dump(by_alias=True)


def platform_of(facts: Mapping[str, Any]) -> str | None:
    """The platform key (``el9``, ``ubuntu2404``, ...) a host's facts match; None for an unsupported OS."""
    return matching.platform_of(_data(), facts)


def os_problems(roles: Sequence[str], facts: Mapping[str, Any], *, lab: bool = False) -> dict[str, str]:
    """{role: why it refuses this host} for each of ``roles`` that does; {} when all of them may run.

    ``lab`` is the lab's allowance (``kiln_allow_not_applicable=true``): the Lustre roles then accept their
    lab-only platforms (Debian 12 stand-ins).
    """
    return matching.problems(_data(), roles, facts, lab=lab)
