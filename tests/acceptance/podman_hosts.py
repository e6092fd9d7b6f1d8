"""Podman systemd hosts for the acceptance tests on real hosts (real containers, real tools, real SeaweedFS): the
rolling restart of a three-node object store.

Every container, network and directory is named kiln-verify-test-* and removed by `teardown`. The hosts are
configured here the way the kit's roles leave them (planned namespaced sysctls, /etc/nccl.conf, the four
SeaweedFS units of roles/objectstore, the planned buckets) because the test exercises `kiln verify`, not
the roles; the lab (kiln/lab) runs the roles for real.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kiln.plan.model import Plan
from kiln.render.inventory import container_name, render_inventory
from kiln.verify.inventory import inventory_from_files

PREFIX = "kiln-verify-test"
IMAGE = "localhost/kiln-node:bookworm"
WORK = Path("/var/tmp") / PREFIX


class HostSetupError(RuntimeError):
    pass


def sh(args: list[str], check: bool = True, timeout: float = 600, input_text: str | None = None) -> str:
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, input=input_text)
    if check and p.returncode != 0:
        raise HostSetupError(f"{' '.join(args)[:300]} failed ({p.returncode}): {(p.stderr or p.stdout).strip()[-800:]}")
    return p.stdout


def podman(*args: str, check: bool = True, timeout: float = 600, input_text: str | None = None) -> str:
    return sh(["podman", *args], check=check, timeout=timeout, input_text=input_text)


def pexec(container: str, command: str, check: bool = True, timeout: float = 600) -> str:
    return podman("exec", container, "bash", "-c", command, check=check, timeout=timeout)


def missing_prerequisites(root: Path) -> list[str]:
    out = []
    if shutil.which("podman") is None:
        out.append("podman (scripts/host-prereqs.sh)")
    elif subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
        out.append(f"image {IMAGE} (scripts/build-base-image.sh)")
    for tool in ("weed", "warp"):
        if not (root / ".tools" / "bin" / tool).is_file():
            out.append(f".tools/bin/{tool} (scripts/build-tools.sh)")
    if shutil.which("nsenter") is None:
        out.append("nsenter (util-linux)")
    return out


def teardown() -> None:
    names = podman("ps", "-a", "--format", "{{.Names}}", check=False).split()
    mine = [n for n in names if n.startswith(PREFIX + "-")]
    if mine:
        podman("rm", "-f", "-t", "2", *mine, check=False)
    for net in podman("network", "ls", "--format", "{{.Name}}", check=False).split():
        if net.startswith(PREFIX + "-"):
            podman("network", "rm", "-f", net, check=False)
    shutil.rmtree(WORK, ignore_errors=True)


@dataclass(frozen=True)
class TestHost:
    __test__ = False
    name: str  # plan host name
    container: str
    management_ip: str
    storage_ip: str


def write_lab_stack(root: Path, tmp: Path, stack: str, management_cidr: str, storage_cidr: str,
                    edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of the lab stack as Pulumi.<stack>.yaml in `tmp`: its own name and subnets (it never meets the lab),
    hosts reached with podman exec (no sshd set up here), then `edit` on its cluster object."""
    doc = yaml.safe_load((root / "stacks" / "Pulumi.lab.yaml").read_text())
    c = doc["config"]["kiln:cluster"]
    c["name"] = stack
    c["networks"] = {"management": management_cidr, "storage": storage_cidr}
    c["inventory"] = {"connection": "podman", "address_by": "hostname"}
    edit(c)
    path = tmp / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def plan_hosts(plan: Plan, names: Iterable[str]) -> list[TestHost]:
    """The plan's hosts `names` as containers of its stack, at their planned management and storage addresses."""
    inv = inventory_from_files(render_inventory(plan), "test")
    return [TestHost(h, container_name(plan.stack, h), plan.host(h).management_address, inv.storage_addresses(h)[0])
            for h in names]


def create_hosts(hosts: list[TestHost], management_cidr: str, storage_cidr: str,
                 sysctls: dict[str, str], local_dirs: Iterable[str] = ()) -> None:
    """Networks (management → eth0, storage → eth1) and one systemd container per host."""
    teardown()
    podman("network", "create", "--subnet", management_cidr, f"{PREFIX}-mgmt")
    podman("network", "create", "--subnet", storage_cidr, f"{PREFIX}-storage")
    WORK.mkdir(parents=True, exist_ok=True)
    local = set(local_dirs)
    for h in hosts:
        args = ["run", "-d", "--name", h.container, "--hostname", h.name, "--systemd=always",
                "--network", f"{PREFIX}-mgmt:ip={h.management_ip}", "--network", f"{PREFIX}-storage:ip={h.storage_ip}"]
        for other in hosts:
            args += ["--add-host", f"{other.name}:{other.management_ip}"]
        for k, v in sysctls.items():
            args += ["--sysctl", f"{k}={v}"]
        if h.name in local:
            d = WORK / h.name / "local-nvme"
            d.mkdir(parents=True, exist_ok=True)
            args += ["-v", f"{d}:/mnt/local-nvme"]
        podman(*args, IMAGE, "/sbin/init")
    deadline = time.monotonic() + 120
    for h in hosts:
        while True:
            state = podman("exec", h.container, "systemctl", "is-system-running", check=False).strip()
            if state in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                raise HostSetupError(f"{h.container}: systemd not up ({state})")
            time.sleep(0.5)


def install_packages(container: str, packages: list[str]) -> None:
    """apt-get inside the container (it reaches the Debian mirror); else the host's .debs via podman cp."""
    cmd = ("export DEBIAN_FRONTEND=noninteractive; (apt-get update -qq && apt-get install -y -qq "
           f"--no-install-recommends {' '.join(packages)}) >/tmp/apt.log 2>&1 || (tail -5 /tmp/apt.log; exit 1)")
    p = subprocess.run(["podman", "exec", container, "bash", "-c", cmd], capture_output=True, text=True,
                       timeout=600, check=False)
    if p.returncode == 0:
        return
    debs = WORK / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    deps = sh(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
               "--no-breaks", "--no-replaces", "--no-enhances", *packages])
    names = sorted({ln.strip() for ln in deps.splitlines() if ln and not ln.startswith(" ") and "<" not in ln})
    sh(["bash", "-c", f"cd {debs} && apt-get download {' '.join(names)}"], check=False)
    podman("cp", str(debs), f"{container}:/tmp/debs")
    pexec(container, "dpkg -i --force-depends /tmp/debs/*.deb >/tmp/dpkg.log 2>&1 || (tail -5 /tmp/dpkg.log; exit 1)")


UNIT = """[Unit]
Description=SeaweedFS {what} (kiln-verify-test)
After=network-online.target {after}

[Service]
ExecStart=/usr/local/bin/weed -logtostderr=true {args}
Restart=on-failure
WorkingDirectory=/var/lib/seaweedfs

[Install]
WantedBy=multi-user.target
"""


def start_seaweedfs(container: str, address: str, s3_port: int, access_key: str, secret_key: str,
                    weed: Path, buckets: list[str], masters: list[str] | None = None, replication: str = "000") -> None:
    """The four units of roles/objectstore (seaweedfs-master/-volume/-filer/-s3) running a real weed, bound to
    the storage address, with one S3 identity; then the planned buckets. `masters`: the storage addresses of every
    master of a cluster (each node runs one, as the role does on the first three), default this node alone;
    `replication`: the masters' default replication code."""
    peers = ",".join(f"{m}:9333" for m in (masters or [address]))
    podman("cp", str(weed), f"{container}:/usr/local/bin/weed")
    s3 = {"identities": [{"name": access_key, "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                          "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
    pexec(container, "mkdir -p /etc/seaweedfs /var/lib/seaweedfs/master /var/lib/seaweedfs/volume "
                     "/var/lib/seaweedfs/filer && chmod 700 /etc/seaweedfs")
    podman("exec", "-i", container, "bash", "-c", "umask 077; cat > /etc/seaweedfs/s3.json", input_text=json.dumps(s3))
    units = {
        "seaweedfs-master": ("master", "", f"master -ip={address} -ip.bind={address} -port=9333 -peers={peers} "
                             "-mdir=/var/lib/seaweedfs/master -volumeSizeLimitMB=256 "
                             f"-defaultReplication={replication}"),
        "seaweedfs-volume": ("volume server", "seaweedfs-master.service",
                             f"volume -ip={address} -ip.bind={address} -port=8080 -mserver={peers} "
                             "-dir=/var/lib/seaweedfs/volume -max=0"),
        "seaweedfs-filer": ("filer", "seaweedfs-volume.service",
                            f"filer -ip={address} -ip.bind={address} -port=8888 -master={peers} "
                            "-defaultStoreDir=/var/lib/seaweedfs/filer"),
        "seaweedfs-s3": ("S3 gateway", "seaweedfs-filer.service",
                         f"s3 -ip.bind={address} -port={s3_port} -filer={address}:8888 "
                         "-config=/etc/seaweedfs/s3.json"),
    }
    for unit, (what, after, args) in units.items():
        podman("exec", "-i", container, "bash", "-c", f"cat > /etc/systemd/system/{unit}.service",
               input_text=UNIT.format(what=what, after=after, args=args))
    pexec(container, "systemctl daemon-reload && systemctl enable --now " + " ".join(units))
    deadline = time.monotonic() + 180
    while True:  # S3 answers 403 to an anonymous request once master, volume, filer and gateway are up
        code = pexec(container, f"python3 -c \"import urllib.request as u\ntry: u.urlopen('http://{address}:{s3_port}/'"
                                ", timeout=3)\nexcept Exception as e: print(getattr(e, 'code', 0))\"", check=False)
        if code.strip() == "403":
            break
        if time.monotonic() > deadline:
            raise HostSetupError(f"SeaweedFS S3 on {address}:{s3_port} did not come up: "
                                 + pexec(container, "journalctl -u 'seaweedfs-*' -n 20 --no-pager", check=False))
        time.sleep(1)
    for b in buckets:
        out = ""
        for _ in range(30):  # the master may still be growing its first volumes
            out = pexec(container, f"echo 's3.bucket.create -name {b}' | weed shell -master={peers} "
                                   f"-filer={address}:8888 2>&1", check=False)
            listed = pexec(container, f"echo s3.bucket.list | weed shell -master={peers} "
                                      f"-filer={address}:8888 2>&1", check=False)
            if f"{b}\t" in listed or f" {b}" in listed:
                break
            time.sleep(1)
        else:
            raise HostSetupError(f"bucket {b} not created: {out[-400:]}")
