"""Testinfra checks for role gpu in configuration-only mode (no GPU in this container)."""

import pathlib

import pytest
import yaml

VARS = yaml.safe_load((pathlib.Path(__file__).parent.parent / "vars" / "gpu-instance.yml").read_text())


def test_systemd_is_running(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


def test_no_gpu_here(host):
    # The scenario relies on this: nothing fakes a GPU.
    assert not host.file("/proc/driver/nvidia").exists
    assert not host.exists("nvidia-smi")


def test_peermem_loaded_at_boot(host):
    f = host.file("/etc/modules-load.d/kiln-gpu.conf")
    if not VARS["gpu_peermem"]:
        assert not f.exists
        return
    assert f.mode == 0o644
    assert [line for line in f.content_string.splitlines() if line and not line.startswith("#")] == ["nvidia-peermem"]


def test_persistence_mode_dropin(host):
    f = host.file("/etc/systemd/system/nvidia-persistenced.service.d/kiln.conf")
    assert f.content_string.startswith("# Managed by kiln")
    lines = [line for line in f.content_string.splitlines() if line and not line.startswith("#")]
    assert lines == ["[Service]", "ExecStart=", "ExecStart=/usr/bin/nvidia-persistenced --persistence-mode --verbose"]


@pytest.mark.parametrize("unit", ["nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm"])
def test_no_nvidia_service_without_packages(host, unit):
    # No NVIDIA repository is configured by default: nothing is installed or started.
    assert not host.service(unit).is_running
    assert not host.file("/etc/apt/sources.list.d/kiln-nvidia.sources").exists
