"""Testinfra checks for role nccl: the files on the node carry exactly the plan's NCCL environment."""

import pathlib

import pytest
import yaml

SCENARIO = pathlib.Path(__file__).parent.parent


@pytest.fixture(scope="module")
def contract(host):
    return yaml.safe_load((SCENARIO / "vars" / f"{host.check_output('hostname')}.yml").read_text())


def test_nccl_conf_equals_the_plan(host, contract):
    f = host.file("/etc/nccl.conf")
    assert f.is_file and f.user == "root" and f.mode == 0o644
    lines = f.content_string.splitlines()
    assert lines[0].startswith("# Managed by kiln")
    # NCCL treats every line with an equals sign as a variable, comments included.
    settings = [line for line in lines if "=" in line]
    assert all(not line.startswith("#") for line in settings)
    got = dict(line.split("=", 1) for line in settings)
    assert got == {k: str(v) for k, v in contract["nccl_env"].items()}


def test_profile_exports_the_plan(host, contract):
    f = host.file("/etc/profile.d/kiln-nccl.sh")
    assert f.mode == 0o644
    # What a login shell really gets, values with '=' and ',' included.
    out = host.check_output("env -i /bin/sh -c '. /etc/profile.d/kiln-nccl.sh; env'")
    got = dict(line.split("=", 1) for line in out.splitlines() if line.startswith("NCCL_"))
    assert got == {k: str(v) for k, v in contract["nccl_env"].items()}


def test_topology_file(host, contract):
    path = contract["nccl_topo_file"]
    if path is None:
        assert not host.file("/etc/nccl/topo").exists
        return
    f = host.file(path)
    assert f.is_file and f.mode == 0o644
    assert f.content_string == (SCENARIO / "files" / "h100-8gpu-topo.xml").read_text()
    assert contract["nccl_env"]["NCCL_TOPO_FILE"] == path
