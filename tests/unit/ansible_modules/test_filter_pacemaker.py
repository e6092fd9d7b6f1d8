"""plugins/filter/pacemaker.py: where OCF resource agents live and which ones a probe found missing."""

from __future__ import annotations

import re

import pytest
from ansible.errors import AnsibleFilterError
from kiln_filters import filter_plugin

F = filter_plugin("pacemaker")


@pytest.mark.parametrize(("agent", "path"), [
    ("ocf:lustre:Lustre", "/usr/lib/ocf/resource.d/lustre/Lustre"),
    ("ocf:heartbeat:ZFS", "/usr/lib/ocf/resource.d/heartbeat/ZFS"),
    # As `IFS=: read -r class provider type` splits it: the type keeps any further colon; a name of
    # another class gets a path where nothing is installed (reported missing, not refused).
    ("ocf:acme:a:b", "/usr/lib/ocf/resource.d/acme/a:b"),
    ("stonith:fence_ipmilan", "/usr/lib/ocf/resource.d/fence_ipmilan/"),
])
def test_agent_path(agent: str, path: str) -> None:
    assert F.ocf_agent_path(agent) == path


def test_missing_agents_in_the_order_given() -> None:
    paths = {
        "/usr/lib/ocf/resource.d/lustre/Lustre": {"exists": True, "executable": True},
        "/usr/lib/ocf/resource.d/lustre/healthLNET": {"exists": True, "executable": False},
        "/usr/lib/ocf/resource.d/heartbeat/ZFS": {"exists": False, "executable": False},
    }
    agents = ["ocf:lustre:Lustre", "ocf:lustre:healthLNET", "ocf:heartbeat:ZFS"]
    assert F.ocf_agents_missing(agents, paths) == ["ocf:lustre:healthLNET", "ocf:heartbeat:ZFS"]


def test_an_agent_the_probe_did_not_look_at_is_a_role_bug() -> None:
    with pytest.raises(AnsibleFilterError, match=re.escape("did not look at /usr/lib/ocf/resource.d/lustre/Lustre")):
        F.ocf_agents_missing(["ocf:lustre:Lustre"], {})
