"""The node health check: what a compute node needs to take work, checked against the plan.

`kiln-health --expect /etc/kiln/health.json [--drain slurm|kubernetes|none]` runs every check, prints one
line each and exits with the first fault's code (0 when healthy). A check whose part the host lacks says
NOT APPLICABLE with the reason and never counts as a pass or a fault. Fault codes (docs/monitoring.md):

  10 GPU count differs from the plan       11 uncorrectable ECC errors      12 GPU in hardware slowdown
  20 planned RDMA device missing           21 RDMA port not ACTIVE          22 RDMA port below its planned rate
  30 Lustre not mounted at the plan's mount point                           31 a Lustre import not FULL
  40 an LNet server NID does not answer `lnetctl ping`
  50 clock not synchronised (systemd-timesyncd/chrony via timedatectl)
  60 local NVMe scratch not mounted

Formats: /sys/class/infiniband/<dev>/ports/<n>/{state,rate} ("4: ACTIVE", "400 Gb/sec (4X NDR)"), the
Lustre import file ("import:" then "    state: FULL"; lustre-release v2_15_8
lustre/obdclass/lprocfs_status.c, lprocfs_import_seq_show_locked).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the node runs this file alone (roles/monitoring installs it): standard library only
    from kiln.plan.model import Plan

Status = Literal["ok", "fault", "not_applicable"]
FAULTS: dict[int, str] = {
    10: "GPU count differs from the plan",
    11: "uncorrectable ECC errors",
    12: "GPU in hardware slowdown",
    20: "planned RDMA device missing",
    21: "RDMA port not ACTIVE",
    22: "RDMA port below its planned rate",
    30: "Lustre not mounted at the plan's mount point",
    31: "a Lustre import is not FULL",
    40: "an LNet server NID does not answer",
    50: "clock not synchronised",
    60: "local NVMe scratch not mounted",
}

#: Runs argv and returns (exit code, stdout); None when the program is not installed.
Runner = Callable[[list[str]], tuple[int, str] | None]


def run(argv: list[str]) -> tuple[int, str] | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 124, str(exc)
    return res.returncode, res.stdout


@dataclass(frozen=True, slots=True)
class Expect:
    """What the plan says this host has (written by `expectations`, read on the node)."""

    host: str
    gpus: int
    rdma: dict[str, float]  # RDMA device → planned link rate, Gb/s
    lustre_mount: str
    server_nids: list[str]
    nvme_mount: str | None = None


@dataclass(frozen=True, slots=True)
class Result:
    check: str
    status: Status
    detail: str
    code: int = 0  # the fault code when status is "fault"
    extra: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        label = {"ok": "OK", "fault": f"FAULT {self.code}", "not_applicable": "NOT APPLICABLE"}[self.status]
        return f"{self.check}: {label}: {self.detail}"


def expectations(plan: Plan, host: str, nvme_mount: str | None = None) -> Expect:
    h = plan.host(host)
    servers = [n for x in plan.hosts if x.role in ("mgs", "mds", "oss") for n in x.nids]
    return Expect(
        host=host,
        gpus=h.gpus,
        rdma={n.device: n.link_Gbps for n in h.nics if n.device},
        lustre_mount=plan.mount_point,
        server_nids=sorted(set(servers)),
        nvme_mount=nvme_mount,
    )


def _mounts(root: Path) -> list[tuple[str, str]]:
    """(mount point, fs type) from /proc/mounts."""
    try:
        text = (root / "proc/mounts").read_text()
    except OSError:
        return []
    return [(f[1], f[2]) for f in (line.split() for line in text.splitlines()) if len(f) >= 3]


def check_gpus(e: Expect, runner: Runner) -> Iterator[Result]:
    if e.gpus == 0:
        yield Result("health.gpu", "not_applicable", "the plan gives this host no GPUs")
        return
    out = runner(["nvidia-smi", "--query-gpu=index,ecc.errors.uncorrected.volatile.total,"
                  "clocks_throttle_reasons.hw_slowdown", "--format=csv,noheader,nounits"])
    if out is None:
        yield Result("health.gpu", "not_applicable", "nvidia-smi is not installed (no NVIDIA driver on this host)")
        return
    rc, text = out
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    if rc != 0 or len(rows) != e.gpus:
        yield Result("health.gpu", "fault", f"{len(rows)} GPUs answer nvidia-smi (rc {rc}); the plan has {e.gpus}", 10)
        return
    ecc = [r[0] for r in rows if len(r) > 1 and r[1].isdigit() and int(r[1]) > 0]
    if ecc:
        yield Result("health.gpu", "fault", f"uncorrectable ECC errors on GPU {', '.join(ecc)}", 11)
        return
    slow = [r[0] for r in rows if len(r) > 2 and r[2].lower() == "active"]
    if slow:
        yield Result("health.gpu", "fault", f"hardware slowdown active on GPU {', '.join(slow)}", 12)
        return
    yield Result("health.gpu", "ok", f"{e.gpus} GPUs, no uncorrectable ECC errors, no hardware slowdown")


def _rate_Gbps(text: str) -> float | None:
    m = re.match(r"\s*([\d.]+) Gb/sec", text)
    return float(m.group(1)) if m else None


def check_rdma(e: Expect, root: Path) -> Iterator[Result]:
    if not e.rdma:
        yield Result("health.rdma", "not_applicable", "the plan gives this host no RDMA devices")
        return
    base = root / "sys/class/infiniband"
    if not base.is_dir():
        yield Result("health.rdma", "fault", f"{base} is absent: no RDMA devices (planned {sorted(e.rdma)})", 20)
        return
    for dev, planned in sorted(e.rdma.items()):
        port = base / dev / "ports" / "1"
        if not port.is_dir():
            yield Result("health.rdma", "fault", f"planned device {dev} is missing", 20)
            return
        state = (port / "state").read_text().strip()
        if not state.endswith("ACTIVE"):
            yield Result("health.rdma", "fault", f"{dev} port 1 is {state}", 21)
            return
        rate = _rate_Gbps((port / "rate").read_text())
        if rate is None or rate < planned:
            yield Result("health.rdma", "fault", f"{dev} runs at {rate} Gb/s; the plan expects {planned:g}", 22)
            return
    yield Result("health.rdma", "ok", f"{len(e.rdma)} RDMA ports ACTIVE at their planned rate")


def check_lustre(e: Expect, root: Path) -> Iterator[Result]:
    if not (root / "sys/fs/lustre").is_dir():
        yield Result("health.lustre", "not_applicable", "no Lustre client modules loaded (/sys/fs/lustre absent)")
        return
    if (e.lustre_mount, "lustre") not in _mounts(root):
        yield Result("health.lustre", "fault", f"no Lustre mount at {e.lustre_mount}", 30)
        return
    bad = []
    for imp in sorted((root / "proc/fs/lustre").glob("[om][sd]c/*/import")):
        m = re.search(r"^\s+state:\s*(\S+)", imp.read_text(), re.MULTILINE)
        if not m or m.group(1) != "FULL":
            bad.append(f"{imp.parent.name} ({m.group(1) if m else 'unknown'})")
    if bad:
        yield Result("health.lustre", "fault", f"imports not FULL: {', '.join(bad)}", 31)
        return
    yield Result("health.lustre", "ok", f"{e.lustre_mount} mounted, every OST/MDT import FULL")


def check_lnet(e: Expect, runner: Runner) -> Iterator[Result]:
    if not e.server_nids:
        yield Result("health.lnet", "not_applicable", "the plan has no Lustre server NIDs")
        return
    for nid in e.server_nids:
        out = runner(["lnetctl", "ping", nid])
        if out is None:
            yield Result("health.lnet", "not_applicable", "lnetctl is not installed (no LNet on this host)")
            return
        if out[0] != 0:
            yield Result("health.lnet", "fault", f"lnetctl ping {nid} failed (rc {out[0]})", 40)
            return
    yield Result("health.lnet", "ok", f"{len(e.server_nids)} server NIDs answer")


def in_container(root: Path) -> bool:
    """podman and Docker mark their containers with these files (podman run(1): /run/.containerenv)."""
    return (root / "run/.containerenv").exists() or (root / ".dockerenv").exists()


def check_clock(runner: Runner, root: Path = Path("/")) -> Iterator[Result]:
    if in_container(root):
        yield Result("health.clock", "not_applicable",
                     "a container shares its host's clock and runs no time service; check the host")
        return
    out = runner(["timedatectl", "show", "--property=NTPSynchronized", "--value"])
    if out is None:
        yield Result("health.clock", "not_applicable", "timedatectl is not installed")
    elif out[0] != 0:
        yield Result("health.clock", "not_applicable", f"timedatectl failed (rc {out[0]}): no systemd time service")
    elif out[1].strip() == "yes":
        yield Result("health.clock", "ok", "NTPSynchronized=yes")
    else:
        yield Result("health.clock", "fault", f"NTPSynchronized={out[1].strip() or '?'}", 50)


def check_nvme(e: Expect, root: Path) -> Iterator[Result]:
    if not e.nvme_mount:
        yield Result("health.nvme", "not_applicable", "the plan gives this host no local NVMe")
    elif any(mp == e.nvme_mount for mp, _ in _mounts(root)):
        yield Result("health.nvme", "ok", f"{e.nvme_mount} mounted")
    else:
        yield Result("health.nvme", "fault", f"nothing mounted at {e.nvme_mount}", 60)


def run_checks(e: Expect, root: Path = Path("/"), runner: Runner = run) -> list[Result]:
    return [
        *check_gpus(e, runner), *check_rdma(e, root), *check_lustre(e, root), *check_lnet(e, runner),
        *check_clock(runner, root), *check_nvme(e, root),
    ]


def scheduler_actions(kind: str, host: str, fault: Result | None, runner: Runner = run) -> list[list[str]]:
    """Commands that take the node out of the scheduler on a fault, or return it when healthy. A node is
    returned only if kiln-health took it out (Slurm reason or Kubernetes taint), never one an operator
    drained."""
    if kind == "slurm":
        if fault:
            return [["scontrol", "update", f"nodename={host}", "state=drain", f"reason=kiln-health {fault.code}"]]
        out = runner(["sinfo", "-h", "-n", host, "-o", "%E"])
        ours = out is not None and out[0] == 0 and out[1].strip().startswith("kiln-health")
        return [["scontrol", "update", f"nodename={host}", "state=resume"]] if ours else []
    if kind == "kubernetes":
        if fault:
            return [["kubectl", "cordon", host],
                    ["kubectl", "taint", "nodes", host, f"kiln.io/health=fault-{fault.code}:NoSchedule", "--overwrite"]]
        out = runner(["kubectl", "get", "node", host, "-o", "jsonpath={.spec.taints[*].key}"])
        ours = out is not None and out[0] == 0 and "kiln.io/health" in out[1].split()
        return [["kubectl", "taint", "nodes", host, "kiln.io/health:NoSchedule-"], ["kubectl", "uncordon", host]] \
            if ours else []
    return []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kiln-health", description="Check this node against the plan.")
    p.add_argument("--expect", default="/etc/kiln/health.json", help="expectations file (kiln.health.Expect)")
    p.add_argument("--drain", choices=["none", "slurm", "kubernetes"], default="none",
                   help="take the node out of the scheduler on a fault, and back when healthy")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    args = p.parse_args(argv)
    try:
        e = Expect(**json.loads(Path(args.expect).read_text()))
    except (OSError, ValueError, TypeError) as exc:
        print(f"kiln-health: cannot read {args.expect}: {exc}; fix: render it from the plan", file=sys.stderr)
        return 2
    results = run_checks(e)
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        for r in results:
            print(r.line())
    fault = next((r for r in results if r.status == "fault"), None)
    for cmd in scheduler_actions(args.drain, e.host or socket.gethostname(), fault):
        out = run(cmd)
        if out is None or out[0] != 0:
            print(f"kiln-health: {' '.join(cmd)} failed", file=sys.stderr)
    return fault.code if fault else 0


if __name__ == "__main__":
    raise SystemExit(main())
