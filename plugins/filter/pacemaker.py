"""Filters for the lustre_ha role: where Pacemaker's OCF resource agents live.

An agent ``ocf:<provider>:<type>`` is the executable ``/usr/lib/ocf/resource.d/<provider>/<type>`` (the OCF
resource agent API, "Installation"); ``ocf:lustre:Lustre`` comes with Lustre's lustre-resource-agents,
``ocf:heartbeat:*`` with resource-agents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

OCF_ROOT = "/usr/lib/ocf/resource.d"


def ocf_agent_path(agent: str) -> str:
    """``ocf:lustre:Lustre`` → ``/usr/lib/ocf/resource.d/lustre/Lustre``.

    The name is split at its first two colons into class, provider and type (as ``IFS=: read -r class
    provider type`` splits it); a name of another class gets a path where no agent is installed, so it is
    reported missing rather than refused here.
    """
    parts = [*str(agent).split(":", 2), "", ""][:3]
    return f"{OCF_ROOT}/{parts[1]}/{parts[2]}"


def ocf_agents_missing(agents: Sequence[str], paths: Mapping[str, Any]) -> list[str]:
    """The agents whose file a host_probe (paths) found missing or not executable, in the order given."""
    missing = []
    for agent in agents:
        answer = paths.get(ocf_agent_path(agent))
        if not isinstance(answer, Mapping):
            raise AnsibleFilterError(f"the probe did not look at {ocf_agent_path(agent)} (agent {agent})")
        if not answer.get("executable"):
            missing.append(agent)
    return missing


class FilterModule:
    """OCF resource agents."""

    def filters(self) -> dict[str, Any]:
        return {"ocf_agent_path": ocf_agent_path, "ocf_agents_missing": ocf_agents_missing}
