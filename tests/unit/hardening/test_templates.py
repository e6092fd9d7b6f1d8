"""Role templates with hostile values: what they insert stays one quoted word (shell) or one line (config files)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import SpecError, load_stack
from kiln.yamlio import load_inventory

ROOT = Path(__file__).resolve().parents[3]
HOSTILE_DEVICES = ['mlx5_0', 'a"; touch PWNED; "', "$(touch PWNED)", "`touch PWNED`", "../../../tmp/x", "a b", "-n"]


def render(role: str, template: str, variables: dict[str, Any]) -> str:
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    templar = Templar(loader=DataLoader(), variables={**defaults, **variables})
    text = (ROOT / "roles" / role / "templates" / template).read_text()
    return str(templar.template(trust_as_template(text)))


def roce_script(devices: list[str], sysfs: str = "/sys/class/infiniband") -> str:
    return render("rdma", "kiln-roce-qos.sh.j2", {
        "rdma_expected_devices": [{"device": d, "role": "compute", "rate_gbps": 400} for d in devices],
        "rdma_sysfs_class": sysfs,
    })


@pytest.mark.parametrize("shell", ["bash", "dash"])
def test_roce_script_parses_with_hostile_device_names(shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"not applicable on this host: {shell} is not installed")
    script = roce_script(HOSTILE_DEVICES)
    r = subprocess.run([shell, "-n"], input=script, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_roce_script_device_list_is_one_word_per_device(tmp_path: Path) -> None:
    """The script's argument list, printed by the shell itself, is exactly the device names: nothing ran."""
    script = roce_script(HOSTILE_DEVICES)
    set_line = next(line for line in script.splitlines() if line.startswith("set -- "))
    r = subprocess.run(["sh", "-c", set_line + '\nfor d in "$@"; do printf "%s\\n" "$d"; done'], cwd=tmp_path,
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.splitlines() == HOSTILE_DEVICES
    assert not (tmp_path / "PWNED").exists()


def test_roce_script_refuses_unsafe_names_at_run_time(tmp_path: Path) -> None:
    """Run the whole script against an empty sysfs: hostile names are refused, nothing outside it is touched."""
    sysfs = tmp_path / "sysfs"
    sysfs.mkdir()
    script = roce_script(HOSTILE_DEVICES, str(sysfs))
    r = subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert not (tmp_path / "PWNED").exists() and not Path("/tmp/x").exists()
    for bad in HOSTILE_DEVICES[1:]:
        assert f"refusing device name '{bad}'" in r.stdout + r.stderr


@pytest.fixture(scope="module")
def prod_inventory() -> dict[str, Any]:
    spec = load_stack("prod-h100")
    files = render_inventory(build_plan(spec))
    merged: dict[str, Any] = {}
    for rel in ("group_vars/all/kiln.yml", "group_vars/kiln_lustre_clients.yml", "group_vars/kiln_pool_h100.yml"):
        merged.update(load_inventory(files[rel]))
    return merged


def test_config_files_get_one_line_per_setting(prod_inventory: dict[str, Any]) -> None:
    """nccl.conf and the sysctl file from the real plan: every setting is exactly one `key=value` line."""
    nccl = render("nccl", "nccl.conf.j2", prod_inventory)
    settings = [line for line in nccl.splitlines() if line and not line.startswith("#")]
    assert len(settings) == len(prod_inventory["nccl_env"])
    sysctl = render("common", "sysctl-kiln.conf.j2", prod_inventory)
    lines = [line for line in sysctl.splitlines() if line and not line.startswith("#")]
    assert len(lines) == len(prod_inventory["common_sysctls"])


def test_nccl_env_script_quotes_every_value(prod_inventory: dict[str, Any]) -> None:
    env = {**prod_inventory["nccl_env"], "NCCL_DEBUG_FILE": "$(touch PWNED) `x` \"q\"\nNCCL_NET_PLUGIN=evil"}
    script = render("nccl", "kiln-nccl.sh.j2", {**prod_inventory, "nccl_env": env})
    r = subprocess.run(["sh", "-c", script + '\nprintf "%s" "$NCCL_DEBUG_FILE"'], capture_output=True, text=True,
                       timeout=30)
    assert r.stdout == env["NCCL_DEBUG_FILE"]


def test_the_most_hostile_accepted_mount_options_stay_one_directive() -> None:
    """End to end: the strangest mount-options override the spec accepts (every character the override type
    allows) goes through plan and inventory into the mount unit as one Options= line, and adds no directive."""
    from kiln.spec import validate
    from tests.conftest import stack_data

    data = stack_data("prod-h100")
    # The spec's override type accepts this; the plan refuses it (only Lustre's own mount options pass the
    # parameter registry), so the most hostile value that reaches a mount unit is a list of real options.
    data["overrides"] = {"client.mount.options": "flock,lazystatfs,x=1 2:3/4@5+6_7.8-9"}
    with pytest.raises(SpecError):
        build_plan(validate(data))
    options = "flock,lazystatfs,user_xattr"
    data["overrides"] = {"client.mount.options": options}
    spec = validate(data)
    files = render_inventory(build_plan(spec))
    clients = load_inventory(files["group_vars/kiln_lustre_clients.yml"])
    mount = clients["lustre_client_mounts"][0]
    text = render("lustre_client", "lustre-client.mount.j2", {
        **load_inventory(files["group_vars/all/kiln.yml"]), "item": mount,
        "__lustre_client_sources": {mount["mount_point"]: "10.0.0.1@o2ib0:/fs"},
        "lustre_client_lnet_unit": "kiln-lnet.service",
    })
    directives = [line.split("=", 1)[0] for line in text.splitlines() if line and line[0] not in "#["]
    assert directives == ["Description", "Documentation", "Wants", "After", "What", "Where", "Type", "Options",
                          "TimeoutSec", "WantedBy"]
    assert f"Options=_netdev,{options}" in text.splitlines()
