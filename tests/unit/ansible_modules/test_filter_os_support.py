"""plugins/filter/os_support.py: the roles' OS pre-flight over the collection's meta/os_support.yml."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from kiln_filters import filter_plugin

F = filter_plugin("os_support")

ROCKY9 = {"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "9",
          "distribution_version": "9.3"}
UBUNTU2204 = {"os_family": "Debian", "distribution": "Ubuntu", "distribution_major_version": "22",
              "distribution_version": "22.04"}
DEBIAN12 = {"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12",
            "distribution_version": "12.11"}


def test_a_supported_platform_passes() -> None:
    assert F.os_support_problem(ROCKY9, "lustre_server") == ""
    assert F.os_support_problem(UBUNTU2204, "gpu") == ""
    assert F.os_platform(ROCKY9) == "el9"


def test_a_lustre_server_on_ubuntu_is_refused_with_the_reason_and_the_supported_list() -> None:
    message = F.os_support_problem(UBUNTU2204, "lustre_server", lab=True)
    assert message.startswith("role lustre_server does not support Ubuntu 22.04 (os_family Debian): it supports EL 8")
    assert "Whamcloud" in message and message.endswith("Nothing was changed on this host.")


@pytest.mark.parametrize("lab", [True, "True", "true"])
def test_debian_is_the_labs_stand_in_only(lab: object) -> None:
    assert "accepted only as the lab's stand-in" in F.os_support_problem(DEBIAN12, "lustre_client")
    assert F.os_support_problem(DEBIAN12, "lustre_client", lab=lab) == ""


def test_missing_facts_and_an_unknown_role_are_errors() -> None:
    with pytest.raises(AnsibleFilterError, match="gather facts first"):
        F.os_support_problem({}, "common")
    with pytest.raises(AnsibleFilterError, match=r"no entry in meta/os_support\.yml"):
        F.os_support_problem(ROCKY9, "no_such_role")
