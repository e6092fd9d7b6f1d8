"""Filters that read the answers of kiln.cluster.host_probe (plugins/modules/host_probe.py).

The probe returns its answers keyed by what was asked: ``paths``, ``units``, ``mounts``, ``users`` … map
each path, unit, mount point or user to a dict, ``tools`` each program to its path or null, ``interfaces``
each interface to a boolean. These filters pick keys out of such a mapping, so that a role says what it
wants to know instead of walking the mapping in Jinja.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError


def _is_present(answer: Any) -> bool:
    if isinstance(answer, Mapping):
        return bool(answer.get("exists", True))
    return bool(answer)


def absent(answers: Mapping[str, Any]) -> list[str]:
    """The keys whose answer says "not there", in the order asked.

    An answer that is a dict is absent when its ``exists`` is false (paths, mounts, users, groups); any other
    answer when it is false or null (a tool that was not found, an interface that does not exist).
    """
    if not isinstance(answers, Mapping):
        raise AnsibleFilterError(f"absent expects the mapping of a host_probe answer, got {type(answers).__name__}")
    return [key for key, answer in answers.items() if not _is_present(answer)]


def answer_is(answer: Any, **fields: Any) -> bool:
    """Whether one answer has every field given, e.g. ``type='directory', owner='root', mode='0755'``.

    A missing answer (undefined, null, an empty dict) has none. Values are compared as they are, so
    ``sha256=''`` never matches a file and ``islnk=false`` refuses a symbolic link.
    """
    if not fields:
        raise AnsibleFilterError("answer_is needs at least one field to compare")
    if not isinstance(answer, Mapping) or not answer:
        return False
    return all(key in answer and answer[key] == value for key, value in fields.items())


def answers_where(answers: Mapping[str, Any], **fields: Any) -> list[str]:
    """The keys whose answer has every field given (``answer_is``), in the order asked."""
    if not isinstance(answers, Mapping):
        raise AnsibleFilterError(
            f"answers_where expects the mapping of a host_probe answer, got {type(answers).__name__}")
    return [key for key, answer in answers.items() if answer_is(answer, **fields)]


def version_output(versions: Mapping[str, Any] | None, name: str) -> str:
    """What the version command NAME printed on stdout; '' when it was not run or its program is not there."""
    answer = (versions or {}).get(name)
    if not isinstance(answer, Mapping):
        return ""
    return str(answer.get("stdout") or "")


class FilterModule:
    """Readers of host_probe answers."""

    def filters(self) -> dict[str, Any]:
        return {
            "absent": absent,
            "answer_is": answer_is,
            "answers_where": answers_where,
            "version_output": version_output,
        }
