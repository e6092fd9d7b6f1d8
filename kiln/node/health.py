"""The node health check: what a compute node needs to take work, checked against the plan.

`kiln-health --expect /etc/kiln/health.json [--drain slurm|kubernetes|none]` runs every check, prints one
line each and exits with the first fault's code (0 when healthy). In the kit's Kubernetes DaemonSet
(kiln/render/manifests/health.py) it runs as `kiln-health --kubernetes --root /host --every 300`: the host's
/proc and /sys mounted read-only under /host, and a faulty node cordoned and tainted through the in-cluster API
(plain HTTPS with the pod's service-account token; `KubeApi`, `reconcile_node`). A check whose part the host lacks says
NOT APPLICABLE with the reason and never counts as a pass or a fault. Fault codes (docs/monitoring.md):

  10 GPU count differs from the plan (or no nvidia-smi where the plan has GPUs)
  11 uncorrectable ECC errors              12 GPU in hardware slowdown
  13 a hardware or driver XID in this boot's kernel log (NVIDIA's Xid listing; application XIDs only noted)
  14 nvidia-smi printed an error ([Unknown Error], ERR!, [N/A], ...) where a value is required
  20 planned RDMA device missing           21 RDMA port not ACTIVE          22 RDMA port below its planned rate
  30 Lustre not mounted at the plan's mount point (another filesystem there, or no client modules on a planned
     client)                                31 a Lustre import neither FULL nor IDLE, or invalid/deactivated
  32 fewer Lustre imports than the plan's targets (zero imports is not healthy)
  40 an LNet server NID does not answer `lnetctl ping`
  50 clock not synchronised (timedatectl NTPSynchronized; without systemd, the same test on adjtimex(2))
  60 local NVMe scratch not mounted         61 local NVMe scratch read-only or memory-backed (tmpfs, ramfs)
  80 taken out for maintenance: `--maintenance start` drains or cordons the node without running the checks; only
     `--maintenance end` (one whole round, which returns the node if it is healthy) brings it back
  90 a probe failed: what the check reads could not be read (the error is the detail)

Every check returns a verdict, whatever the host holds: a probe that raises becomes fault 90 with the error
(`guarded`), so the `--every` loop never ends on a probe error. On a lab stand-in (`stand_in` in the
expectations: kiln_allow_not_applicable) a planned part that is absent altogether is NOT APPLICABLE with that
reason instead of a fault; a part that is present is judged as anywhere else.

Formats: /sys/class/infiniband/<dev>/ports/<n>/{state,rate} ("4: ACTIVE", "400 Gb/sec (4X NDR)"), the
Lustre import file ("import:" then "    state: FULL"; lustre-release v2_15_8
lustre/obdclass/lprocfs_status.c, lprocfs_import_seq_show_locked, with "    import_flags: [ ... ]" from
obd_import_flags2str), the kernel's XID line ("NVRM: Xid (PCI:%04x:%02x:%02x): %d, ..."; NVIDIA
open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/kernel_rc.c).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
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
    13: "a hardware or driver XID in the kernel log",
    14: "a GPU reports an error instead of a value",
    20: "planned RDMA device missing",
    21: "RDMA port not ACTIVE",
    22: "RDMA port below its planned rate",
    30: "Lustre not mounted at the plan's mount point",
    31: "a Lustre import is neither FULL nor IDLE",
    32: "fewer Lustre imports than the plan's targets",
    40: "an LNet server NID does not answer",
    50: "clock not synchronised",
    60: "local NVMe scratch not mounted",
    61: "local NVMe scratch read-only or memory-backed",
    80: "taken out for maintenance (--maintenance start); only --maintenance end returns it",
    90: "a probe failed",
}
#: The code a node taken out for maintenance carries in the scheduler (Slurm reason "kiln-health 80", taint value
#: fault-80): no round returns it but `--maintenance end`, so neither the timer nor the DaemonSet resumes a node in
#: the middle of an upgrade, whatever its checks say meanwhile.
MAINTENANCE = 80
#: The fault code of a probe that raised (guarded): the check could not read what it checks.
PROBE_FAILED = 90

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
    #: The OSTs and MDTs a Lustre client of this plan imports ([] : the plan makes this host no Lustre client;
    #: None: an expectations file written before the field, which still asks for at least one import).
    lustre_targets: list[str] | None = None
    #: A lab stand-in (roles/monitoring monitoring_health_stand_in, set from kiln_allow_not_applicable): a
    #: planned part that is absent altogether is NOT APPLICABLE instead of a fault.
    stand_in: bool = False


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
    client = h.lustre_client
    return Expect(
        host=host,
        gpus=h.gpus,
        rdma={n.device: n.link_Gbps for n in h.nics if n.device},
        lustre_mount=plan.mount_point,
        server_nids=sorted(set(servers)),
        nvme_mount=nvme_mount,
        lustre_targets=sorted(t.name for t in plan.lustre_targets if t.kind in ("ost", "mdt")) if client else [],
    )


def _absent(e: Expect, check: str, planned: str, missing: str, code: int) -> Result:
    """A planned part the host lacks altogether: a fault, or on a lab stand-in NOT APPLICABLE with the reason."""
    if e.stand_in:
        return Result(check, "not_applicable", f"lab stand-in (kiln_allow_not_applicable): {missing}; the plan has "
                                               f"{planned}")
    return Result(check, "fault", f"{missing}; the plan has {planned}", code)


#: Why the host's mount table cannot be read (then the mount checks are NOT APPLICABLE, never a fault).
NO_HOST_MOUNTS = ("the host's /proc/1/mounts is not readable here (procfs hidepid?), and /proc/mounts under "
                  "--root would be this container's own mounts")


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of the mount table: where, which filesystem type, its options."""

    point: str
    fstype: str
    options: tuple[str, ...]


def _mounts(root: Path) -> list[Mount] | None:
    """The host's mount table: /proc/1/mounts (init's mount namespace, so a pod reading the host's /proc under
    --root sees the host's mounts, not its own), else /proc/mounts; node_exporter 1.5.0 reads them the same way
    (collector/filesystem_linux.go, mountPointDetails). Under a --root that is a real procfs (it has
    /proc/self), /proc/mounts is the reader's own mount namespace: None rather than a wrong answer."""
    names = ["proc/1/mounts"]
    if root == Path("/") or not (root / "proc/self").exists():
        names.append("proc/mounts")
    for name in names:
        try:
            text = (root / name).read_text()
        except OSError:
            continue
        return [Mount(f[1], f[2], tuple(f[3].split(",")) if len(f) > 3 else ())
                for f in (line.split() for line in text.splitlines()) if len(f) >= 3]
    return None if len(names) == 1 else []


def mounted_at(mounts: list[Mount], point: str) -> Mount | None:
    """What is mounted at `point` now: the last line for it (a later mount hides the earlier ones)."""
    return next((m for m in reversed(mounts) if m.point == point), None)


# ------------------------------------------------------------------------------------------------- GPUs

GPU_QUERY = ["nvidia-smi", "--query-gpu=index,ecc.errors.uncorrected.volatile.total,"
             "clocks_throttle_reasons.hw_slowdown", "--format=csv,noheader,nounits"]
#: What each queried column must hold; nvidia-smi prints "[N/A]", "[Not Supported]", "[Unknown Error]", "ERR!" or
#: "[GPU requires reset]" where it has no value, and a check that needs the value cannot pass on it.
GPU_COLUMNS = (("index", re.compile(r"\d+")), ("uncorrected ECC", re.compile(r"\d+")),
               ("hw_slowdown", re.compile(r"(?i)active|not active")))


def _gpu_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]


def _gpu_errors(rows: list[list[str]]) -> list[str]:
    """'<column> of row <n>: <what nvidia-smi printed>' for every required value that is not one."""
    out = []
    for n, row in enumerate(rows):
        for i, (name, shape) in enumerate(GPU_COLUMNS):
            value = row[i] if i < len(row) else "(missing)"
            if not shape.fullmatch(value):
                out.append(f"{name} of GPU {row[0] if row and row[0].isdigit() else n}: {value}")
    return out


def check_gpus(e: Expect, runner: Runner) -> Iterator[Result]:
    if e.gpus == 0:
        yield Result("health.gpu", "not_applicable", "the plan gives this host no GPUs")
        return
    out = runner(GPU_QUERY)
    if out is None:
        yield _absent(e, "health.gpu", f"{e.gpus} GPUs", "nvidia-smi is not installed (no NVIDIA driver)", 10)
        return
    rc, text = out
    rows = _gpu_rows(text)
    if rc != 0 or len(rows) != e.gpus:
        yield Result("health.gpu", "fault", f"{len(rows)} GPUs answer nvidia-smi (rc {rc}); the plan has {e.gpus}", 10)
        return
    errors = _gpu_errors(rows)
    if errors:
        yield Result("health.gpu", "fault", f"nvidia-smi printed no value: {'; '.join(errors)}", 14)
        return
    ecc = [r[0] for r in rows if int(r[1]) > 0]
    if ecc:
        yield Result("health.gpu", "fault", f"uncorrectable ECC errors on GPU {', '.join(ecc)}", 11)
        return
    slow = [r[0] for r in rows if r[2].lower() == "active"]
    if slow:
        yield Result("health.gpu", "fault", f"hardware slowdown active on GPU {', '.join(slow)}", 12)
        return
    yield Result("health.gpu", "ok", f"{e.gpus} GPUs, no uncorrectable ECC errors, no hardware slowdown")


#: The XID line the NVIDIA driver logs (open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/kernel_rc.c:
#: "NVRM: Xid (PCI:%04x:%02x:%02x[ GPU-I:%02u GPU-CI:%02u]): %d, pid=%s, name=%s, %s").
XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<gpu>[0-9A-Fa-f:.]+)[^)]*\): (?P<xid>\d+),")
#: XIDs whose possible causes in NVIDIA's Xid listing include a user application error (docs.nvidia.com/deploy/
#: xid-errors, "Xid Error Listing": e.g. 13 Graphics Engine Exception, 31 GPU memory page fault, 43 GPU stopped
#: processing): the application's, noted but never drained.
XID_APPLICATION = frozenset({8, 13, 24, 25, 31, 43, 45, 66, 67, 68, 93, 106, 107, 109, 137})
#: XIDs the listing marks with no cause (unused codes) and 154, which NVIDIA's Xid catalog
#: (analyzing-xid-catalog.html) calls informational only, about another XID: noted, never drained.
XID_INFORMATIONAL = frozenset({5, 10, 14, 15, 17, 23, 39, 40, 41, 49, 50, 51, 52, 53, 54, 55, 61, 87, 90, 91, 108,
                               126, 127, 128, 129, 130, 131, 132, 134, 135, 136, 138, 139, 141, 142, 154})


def xid_is_hardware(xid: int) -> bool:
    """A hardware or driver XID (the listing names only hardware, driver, bus, thermal or memory causes: 48 DBE,
    63/64 row remapping, 74 NVLink, 79 fallen off the bus, 92/94/95 ECC, ...) and any XID the listing does not
    name as the application's or informational: those drain."""
    return xid not in XID_APPLICATION and xid not in XID_INFORMATIONAL


def _kmsg(root: Path) -> str | None:
    """The kernel ring buffer from /dev/kmsg (one record per read, "prio,seq,usec,flags;message"), read without
    blocking to its end; None when it cannot be opened (not root, or a container without /dev)."""
    try:
        fd = os.open(root / "dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    records: list[str] = []
    try:
        while True:
            try:
                chunk = os.read(fd, 8192)
            except BrokenPipeError:  # records overwritten while reading: go on with the next
                continue
            except BlockingIOError:
                break
            if not chunk:
                break
            records.append(chunk.decode("utf-8", "replace").split(";", 1)[-1])
    finally:
        os.close(fd)
    return "".join(records)


def kernel_log(runner: Runner, root: Path) -> tuple[str, str] | None:
    """(where from, text) of this boot's kernel messages: `journalctl -k -b 0` where systemd's journal is (bare
    metal; the kiln-health image has none), else <root>/dev/kmsg, the ring buffer; None: neither is readable."""
    out = runner(["journalctl", "-k", "-b", "0", "-o", "cat", "--no-pager"])
    if out is not None and out[0] == 0:
        return "journalctl -k -b 0", out[1]
    text = _kmsg(root)
    return None if text is None else (str(root / "dev/kmsg"), text)


def check_xid(e: Expect, runner: Runner, root: Path = Path("/")) -> Iterator[Result]:
    if e.gpus == 0:
        yield Result("health.xid", "not_applicable", "the plan gives this host no GPUs")
        return
    if not (root / "proc/driver/nvidia").is_dir():  # the NVIDIA kernel module logs XIDs; without it none can appear
        yield Result("health.xid", "not_applicable", "no NVIDIA kernel module loaded (/proc/driver/nvidia absent): "
                                                     "an empty kernel log says nothing about the GPUs")
        return
    log = kernel_log(runner, root)
    if log is None:
        yield Result("health.xid", "not_applicable", "the kernel log is not readable here (no journalctl, and "
                                                     "/dev/kmsg cannot be opened: not root, or a pod without /dev)")
        return
    source, text = log
    seen = sorted({(int(m["xid"]), m["gpu"]) for m in XID_LINE.finditer(text)})
    hardware = [f"XID {x} on {gpu}" for x, gpu in seen if xid_is_hardware(x)]
    others = [f"XID {x} on {gpu}" for x, gpu in seen if not xid_is_hardware(x)]
    noted = f" (the application's or informational, not drained: {', '.join(others)})" if others else ""
    if hardware:
        yield Result("health.xid", "fault", f"{source}: hardware or driver {', '.join(hardware)}{noted}", 13)
    else:
        yield Result("health.xid", "ok", f"{source}: no hardware or driver XID this boot{noted}")


# ------------------------------------------------------------------------------------------------- RDMA

def _rate_Gbps(text: str) -> float | None:
    m = re.match(r"\s*([\d.]+) Gb/sec", text)
    return float(m.group(1)) if m else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _rdma_port(dev: str, planned: float, port: Path) -> Result | None:
    """The fault of one planned port, None when it is ACTIVE at its planned rate."""
    state = _read(port / "state")
    if state is None:
        return Result("health.rdma", "fault", f"{dev} port 1: {port / 'state'} is not readable", 21)
    if not state.strip().endswith("ACTIVE"):
        return Result("health.rdma", "fault", f"{dev} port 1 is {state.strip()}", 21)
    text = _read(port / "rate")
    rate = None if text is None else _rate_Gbps(text)
    if rate is None or rate < planned:
        shown = "unreadable" if text is None else f"{rate} Gb/s"
        return Result("health.rdma", "fault", f"{dev} runs at {shown}; the plan expects {planned:g}", 22)
    return None


def check_rdma(e: Expect, root: Path) -> Iterator[Result]:
    if not e.rdma:
        yield Result("health.rdma", "not_applicable", "the plan gives this host no RDMA devices")
        return
    base = root / "sys/class/infiniband"
    if not base.is_dir():
        yield _absent(e, "health.rdma", f"RDMA devices {sorted(e.rdma)}", f"{base} is absent: no RDMA devices", 20)
        return
    for dev, planned in sorted(e.rdma.items()):
        port = base / dev / "ports" / "1"
        if not port.is_dir():
            yield Result("health.rdma", "fault", f"planned device {dev} is missing", 20)
            return
        bad = _rdma_port(dev, planned, port)
        if bad is not None:
            yield bad
            return
    yield Result("health.rdma", "ok", f"{len(e.rdma)} RDMA ports ACTIVE at their planned rate")


# ----------------------------------------------------------------------------------------------- Lustre

#: Import states a client works with: Lustre ≥ 2.12 moves an unused OSC import to IDLE after osc_idle_timeout
#: (20 s by default; lustre/osc/osc_request.c) and reconnects it on the next RPC; osc_import_not_healthy()
#: (lustre/osc/osc_io.c, v2_15_8) counts FULL and IDLE as healthy unless the import is invalid or deactivated.
HEALTHY_IMPORT_STATES = ("FULL", "IDLE")
_IMPORT_BAD_FLAGS = ("invalid", "deactive")


def import_verdict(text: str) -> str | None:
    """None when an import file says healthy (osc_import_not_healthy's test), else what is wrong."""
    state = re.search(r"^\s+state:\s*(\S+)", text, re.MULTILINE)
    if state is None:
        return "no state line"
    flags = re.search(r"^\s+import_flags:\s*\[([^\]]*)\]", text, re.MULTILINE)
    bad = [f for f in (x.strip() for x in (flags.group(1) if flags else "").split(",")) if f in _IMPORT_BAD_FLAGS]
    if state.group(1) not in HEALTHY_IMPORT_STATES:
        return state.group(1)
    return f"{state.group(1)}, {'/'.join(bad)}" if bad else None


def _target(import_dir: str) -> str:
    """The target of an import directory: lab-OST0000-osc-ffff8a1b2c3d4000 → lab-OST0000."""
    return import_dir.rsplit("-", 2)[0]


def _imports(root: Path) -> tuple[dict[str, str | None], list[str]]:
    """{import directory: verdict} of every OSC/MDC import, and the import files that could not be read."""
    verdicts: dict[str, str | None] = {}
    unreadable = []
    for imp in sorted((root / "proc/fs/lustre").glob("[om][sd]c/*/import")):
        text = _read(imp)
        if text is None:
            unreadable.append(imp.parent.name)
            continue
        verdicts[imp.parent.name] = import_verdict(text)
    return verdicts, unreadable


def _lustre_mount(e: Expect, root: Path) -> Result | None:
    """The fault or not-applicable of the Lustre mount point; None when Lustre is mounted there."""
    mounts = _mounts(root)
    if mounts is None:
        return Result("health.lustre", "not_applicable", NO_HOST_MOUNTS)
    there = mounted_at(mounts, e.lustre_mount)
    if there is None:
        return Result("health.lustre", "fault", f"no Lustre mount at {e.lustre_mount}", 30)
    if there.fstype != "lustre":
        return Result("health.lustre", "fault", f"{e.lustre_mount} holds a {there.fstype} filesystem, not Lustre", 30)
    return None


def _import_counts(e: Expect, verdicts: dict[str, str | None]) -> Result | None:
    """Fault 32 when a planned target has no import (or, without the plan's list, when there is none at all)."""
    have = {_target(name) for name in verdicts}
    wanted = e.lustre_targets if e.lustre_targets is not None else []
    missing = sorted(set(wanted) - have) or ([] if have else ["any target"])
    if not missing:
        return None
    planned = "" if e.lustre_targets is None else f" of the plan's {len(e.lustre_targets)}"
    return Result("health.lustre", "fault", f"{len(have)} targets imported{planned}; no import of "
                                            f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}", 32)


def check_lustre(e: Expect, root: Path) -> Iterator[Result]:
    if e.lustre_targets == []:
        yield Result("health.lustre", "not_applicable", "the plan makes this host no Lustre client")
        return
    if not (root / "sys/fs/lustre").is_dir():
        yield _absent(e, "health.lustre", f"a Lustre client at {e.lustre_mount}",
                      "no Lustre client modules loaded (/sys/fs/lustre absent)", 30)
        return
    bad_mount = _lustre_mount(e, root)
    if bad_mount is not None:
        yield bad_mount
        return
    verdicts, unreadable = _imports(root)
    bad = [f"{name} ({why})" for name, why in verdicts.items() if why] + [f"{n} (import unreadable)"
                                                                           for n in unreadable]
    if bad:
        yield Result("health.lustre", "fault", f"imports not healthy (FULL or IDLE): {', '.join(bad)}", 31)
        return
    short = _import_counts(e, verdicts)
    if short is not None:
        yield short
        return
    yield Result("health.lustre", "ok", f"{e.lustre_mount} mounted, {len(verdicts)} OST/MDT imports FULL or IDLE")


def check_lnet(e: Expect, runner: Runner, root: Path = Path("/")) -> Iterator[Result]:
    if not e.server_nids:
        yield Result("health.lnet", "not_applicable", "the plan has no Lustre server NIDs")
        return
    for nid in e.server_nids:
        out = runner(["lnetctl", "ping", nid])
        if out is None:
            if (root / "sys/module/lnet").is_dir():
                yield Result("health.lnet", "not_applicable",
                             "LNet is loaded but lnetctl is not here (the kiln-health pod: an LNet ping needs the "
                             "host's lnetctl and /dev/lnet, which it does not mount); health.lustre still checks "
                             "every server import")
            else:
                yield Result("health.lnet", "not_applicable", "lnetctl is not installed (no LNet on this host)")
            return
        if out[0] != 0:
            yield Result("health.lnet", "fault", f"lnetctl ping {nid} failed (rc {out[0]})", 40)
            return
    yield Result("health.lnet", "ok", f"{len(e.server_nids)} server NIDs answer")


def in_container(root: Path) -> bool:
    """podman and Docker mark their containers with these files (podman run(1): /run/.containerenv)."""
    return (root / "run/.containerenv").exists() or (root / ".dockerenv").exists()


#: systemd-timedated's NTPSynchronized: adjtimex()'s maxerror below 16 s, in µs (systemd v252
#: src/timedate/timedated.c, ntp_synced; the STA_UNSYNC flag is ignored there, and here).
MAXERROR_SYNCED_US = 16_000_000


class _Timex(ctypes.Structure):
    """The head of Linux's struct timex (include/uapi/linux/timex.h) up to `status`, then room for the rest."""

    _fields_ = [("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
                ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long), ("status", ctypes.c_int),
                ("_rest", ctypes.c_char * 256)]


def adjtimex_maxerror_us() -> int | None:
    """The kernel clock's maximum error (µs) from a read-only adjtimex(2) (modes 0: no capability needed, so it
    works in the unprivileged pod, whose kernel clock is the host's); None where the call is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        tx = _Timex()
        if libc.adjtimex(ctypes.byref(tx)) < 0:
            return None
    except (OSError, AttributeError):
        return None
    return int(tx.maxerror)


def check_clock(runner: Runner, root: Path = Path("/"),
                maxerror: Callable[[], int | None] | None = None) -> Iterator[Result]:
    if in_container(root):
        yield Result("health.clock", "not_applicable",
                     "a container shares its host's clock and runs no time service; check the host")
        return
    out = runner(["timedatectl", "show", "--property=NTPSynchronized", "--value"])
    if out is None:
        # no systemd here (the kiln-health pod): the kernel's own answer, as timedated computes it
        err = (maxerror or adjtimex_maxerror_us)()
        if err is None:
            yield Result("health.clock", "not_applicable", "timedatectl is not installed and adjtimex(2) failed")
        elif err < MAXERROR_SYNCED_US:
            yield Result("health.clock", "ok", f"adjtimex maxerror {err} µs (< 16 s: synchronised)")
        else:
            yield Result("health.clock", "fault", f"adjtimex maxerror {err} µs (≥ 16 s: not synchronised)", 50)
    elif out[0] != 0:
        yield Result("health.clock", "not_applicable", f"timedatectl failed (rc {out[0]}): no systemd time service")
    elif out[1].strip() == "yes":
        yield Result("health.clock", "ok", "NTPSynchronized=yes")
    else:
        yield Result("health.clock", "fault", f"NTPSynchronized={out[1].strip() or '?'}", 50)


#: Filesystems held in memory: a local NVMe scratch replaced by one is gone at the next reboot and small.
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")


def check_nvme(e: Expect, root: Path) -> Iterator[Result]:
    if not e.nvme_mount:
        yield Result("health.nvme", "not_applicable", "the plan gives this host no local NVMe")
        return
    mounts = _mounts(root)
    if mounts is None:
        yield Result("health.nvme", "not_applicable", NO_HOST_MOUNTS)
        return
    there = mounted_at(mounts, e.nvme_mount)
    if there is None:
        yield Result("health.nvme", "fault", f"nothing mounted at {e.nvme_mount}", 60)
    elif there.fstype in MEMORY_FILESYSTEMS:
        yield Result("health.nvme", "fault", f"{e.nvme_mount} is a {there.fstype} (memory), not the NVMe", 61)
    elif "ro" in there.options:
        yield Result("health.nvme", "fault", f"{e.nvme_mount} ({there.fstype}) is mounted read-only", 61)
    else:
        yield Result("health.nvme", "ok", f"{e.nvme_mount} mounted read-write ({there.fstype})")


#: Every check of run_checks, in order: its name and the part of the host it reads.
CHECKS = ("health.gpu", "health.xid", "health.rdma", "health.lustre", "health.lnet", "health.clock", "health.nvme")


def guarded(check: str, results: Callable[[], Iterator[Result]]) -> list[Result]:
    """A check's results, or, when its probe raises, fault PROBE_FAILED with the error: never an exception."""
    try:
        return list(results())
    except Exception as exc:  # any probe error is a verdict, never the end of the --every loop
        return [Result(check, "fault", f"probe failed: {type(exc).__name__}: {exc}", PROBE_FAILED)]


def run_checks(e: Expect, root: Path = Path("/"), runner: Runner = run,
               maxerror: Callable[[], int | None] | None = None) -> list[Result]:
    checks: dict[str, Callable[[], Iterator[Result]]] = {
        "health.gpu": lambda: check_gpus(e, runner),
        "health.xid": lambda: check_xid(e, runner, root),
        "health.rdma": lambda: check_rdma(e, root),
        "health.lustre": lambda: check_lustre(e, root),
        "health.lnet": lambda: check_lnet(e, runner, root),
        "health.clock": lambda: check_clock(runner, root, maxerror),
        "health.nvme": lambda: check_nvme(e, root),
    }
    return [r for name in CHECKS for r in guarded(name, checks[name])]


def scheduler_actions(kind: str, host: str, fault: Result | None, runner: Runner = run,
                      ending: bool = False) -> list[list[str]]:
    """Commands that take the node out of the scheduler on a fault, or return it when healthy. A node is
    returned only if kiln-health took it out (Slurm reason; on Kubernetes its cordon annotation), never one an
    operator drained; a node in maintenance is left as it is unless `ending` (--maintenance end)."""
    if kind == "slurm":
        reason = _slurm_reason(host, runner)
        if reason[:2] == _SLURM_MAINTENANCE and not ending and not _maintenance(fault):
            return []
        if fault:
            return [["scontrol", "update", f"nodename={host}", "state=drain", f"reason=kiln-health {fault.code}"]]
        return [["scontrol", "update", f"nodename={host}", "state=resume"]] if reason[:1] == ["kiln-health"] else []
    if kind == "kubernetes":
        # the patch of --kubernetes (_node_patch: taint, reason, a cordon only kiln-health undoes), through kubectl
        out = runner(["kubectl", "get", "node", host, "-o", "json"])
        try:
            node = json.loads(out[1]) if out is not None and out[0] == 0 else None
        except ValueError:
            node = None
        if not isinstance(node, dict):
            print(f"kiln-health: kubectl get node {host} failed: the node is left as it is", file=sys.stderr)
            return []
        patch, _ = _node_patch(node, fault, ending)
        return [] if patch is None else [["kubectl", "patch", "node", host, "--type", "merge", "-p",
                                          json.dumps(patch, separators=(",", ":"))]]
    return []


def _maintenance(fault: Result | None) -> bool:
    return fault is not None and fault.code == MAINTENANCE


#: The first words of a Slurm reason kiln-health set for maintenance ("kiln-health 80").
_SLURM_MAINTENANCE = ["kiln-health", str(MAINTENANCE)]


def _slurm_reason(host: str, runner: Runner) -> list[str]:
    """The words of the node's Slurm reason (`sinfo %E`); none when sinfo does not answer."""
    out = runner(["sinfo", "-h", "-n", host, "-o", "%E"])
    return out[1].strip().split() if out is not None and out[0] == 0 else []


def _maintenance_taint(taints: object) -> bool:
    """Whether a node's taints hold kiln-health's maintenance taint (kiln.io/health=fault-80)."""
    return isinstance(taints, list) and any(
        isinstance(t, dict) and t.get("key") == TAINT_KEY and t.get("value") == f"fault-{MAINTENANCE}" for t in taints)


# ---------------------------------------------------------------------------------------- Kubernetes API

#: The taint a faulty node gets (value fault-<code>), and the node annotations kiln-health keeps on it.
TAINT_KEY = "kiln.io/health"
REASON_ANNOTATION = "kiln.io/health-reason"
CORDONED_ANNOTATION = "kiln.io/health-cordoned"  # "true": kiln-health set spec.unschedulable, so it may unset it
SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeError(Exception):
    """A Kubernetes API request failed; the message names the request, the answer and the fix."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class KubeApi:
    """The few Kubernetes API calls kiln-health makes, over HTTPS with a bearer token (standard library only, as
    the node runs this file alone). The token is read for every request: the kubelet rotates projected tokens."""

    def __init__(self, base: str, token_file: Path, ca_file: Path | None = None, timeout: float = 15) -> None:
        self.base = base.rstrip("/")
        self.token_file = token_file
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None

    @classmethod
    def in_cluster(cls) -> KubeApi:
        """The pod's own API server and service account (the variables and files the kubelet provides)."""
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host or not (SA_DIR / "token").is_file():
            raise KubeError("not in a Kubernetes pod (no KUBERNETES_SERVICE_HOST or service-account token); fix: run "
                            "--kubernetes only in the kiln-health DaemonSet, or use --drain kubernetes (kubectl)")
        return cls(f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}",
                   SA_DIR / "token", SA_DIR / "ca.crt")

    def request(self, method: str, path: str, body: object | None = None,
                content_type: str = "application/json") -> dict[str, object]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token_file.read_text().strip()}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as res:
                doc = json.loads(res.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                detail = str(json.loads(exc.read()).get("message", ""))
            except ValueError:
                detail = exc.reason
            fix = ("; fix: bind the ClusterRole kiln-health (nodes get/patch) and the Role kiln-health (events "
                   "create) to this pod's service account" if exc.code == 403 else "")
            raise KubeError(f"{method} {path}: {exc.code} {detail}{fix}", exc.code) from None
        except (OSError, ValueError) as exc:
            raise KubeError(f"{method} {path}: {exc}") from None
        return doc if isinstance(doc, dict) else {}


def _node_patch(node: dict[str, object], fault: Result | None,
                ending: bool = False) -> tuple[dict[str, object] | None, str]:
    """The merge patch (RFC 7386) that takes the node out on a fault or returns it when healthy, and the event
    reason; (None, "") when the node is already as it should be, or is in maintenance and not `ending`. A cordon
    kiln-health did not set is never undone; the patch carries the node's resourceVersion, so a concurrent change
    makes it fail (409) and retry."""
    meta = node.get("metadata") if isinstance(node.get("metadata"), dict) else {}
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    assert isinstance(meta, dict) and isinstance(spec, dict)
    annotations = meta.get("annotations") or {}
    taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    others = [t for t in taints if t.get("key") != TAINT_KEY]
    unschedulable = spec.get("unschedulable") is True
    ours_cordon = annotations.get(CORDONED_ANNOTATION) == "true"
    if _maintenance_taint(taints) and not ending and not _maintenance(fault):
        return None, ""
    if fault is not None:
        want = {"key": TAINT_KEY, "value": f"fault-{fault.code}", "effect": "NoSchedule"}
        if want in taints and unschedulable and annotations.get(REASON_ANNOTATION) == fault.line():
            return None, ""
        ann: dict[str, object] = {REASON_ANNOTATION: fault.line()}
        new_spec: dict[str, object] = {"taints": [*others, want]}
        if not unschedulable:
            new_spec["unschedulable"] = True
            ann[CORDONED_ANNOTATION] = "true"
        return {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": ann},
                "spec": new_spec}, "KilnHealthFault"
    if len(others) == len(taints) and REASON_ANNOTATION not in annotations and not ours_cordon:
        return None, ""  # nothing of kiln-health's on this node: an operator's cordon stays
    healthy_spec: dict[str, object] = {"taints": others}
    if ours_cordon and unschedulable:
        healthy_spec["unschedulable"] = False
    return {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                         "annotations": {REASON_ANNOTATION: None, CORDONED_ANNOTATION: None}},
            "spec": healthy_spec}, "KilnHealthRecovered"


def reconcile_node(api: KubeApi, node: str, fault: Result | None, namespace: str,
                   ending: bool = False) -> str | None:
    """Cordon and taint `node` on a fault (the reason as an annotation and an event), or return it when healthy
    (one in maintenance only when `ending`); returns what was done, None when nothing had to change."""
    for attempt in (1, 2):
        current = api.request("GET", f"/api/v1/nodes/{node}")
        patch, reason = _node_patch(current, fault, ending)
        if patch is None:
            return None
        try:
            api.request("PATCH", f"/api/v1/nodes/{node}", patch, "application/merge-patch+json")
            break
        except KubeError as exc:
            if exc.status != 409 or attempt == 2:
                raise
    meta = current.get("metadata") if isinstance(current.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    message = (f"kiln-health cordoned and tainted {TAINT_KEY}=fault-{fault.code}:NoSchedule: {fault.line()}"
               if fault else "kiln-health: healthy again; its taint removed (and its own cordon undone)")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    api.request("POST", f"/api/v1/namespaces/{namespace}/events", {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": "kiln-health-", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": meta.get("uid", "")},
        "reason": reason, "message": message, "type": "Warning" if fault else "Normal",
        "source": {"component": "kiln-health", "host": node}, "reportingComponent": "kiln-health",
        "reportingInstance": node, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    })
    return message


def _namespace() -> str:
    try:
        return (SA_DIR / "namespace").read_text().strip()
    except OSError:
        return "default"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kiln-health", description="Check this node against the plan.")
    p.add_argument("--expect", default="/etc/kiln/health.json", help="expectations file (kiln.node.health.Expect)")
    p.add_argument("--drain", choices=["none", "slurm", "kubernetes"], default="none",
                   help="take the node out of the scheduler on a fault, and back when healthy")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--root", default="/", type=Path,
                   help="where the host's /proc and /sys are (the DaemonSet mounts them read-only under /host)")
    p.add_argument("--kubernetes", action="store_true",
                   help="cordon and taint this node through the in-cluster API on a fault, and return it when "
                        "healthy (the pod's service account; node name from $NODE_NAME, else the plan's host)")
    p.add_argument("--every", type=int, default=0, metavar="SECONDS",
                   help="run the checks every SECONDS until stopped (the DaemonSet); 0: once")
    p.add_argument("--maintenance", choices=["start", "end"],
                   help="start: take this node out of the scheduler for maintenance (code 80) without running the "
                        "checks; no round returns it until `end`: one round that returns it if healthy")
    args = p.parse_args(argv)
    if args.kubernetes and args.drain != "none":
        p.error("--kubernetes takes the node out itself; leave out --drain")
    if args.maintenance and args.every:
        p.error("--maintenance runs once; leave out --every")
    try:
        e = Expect(**json.loads(Path(args.expect).read_text()))
        api = KubeApi.in_cluster() if args.kubernetes else None
    except (OSError, ValueError, TypeError) as exc:
        print(f"kiln-health: cannot read {args.expect}: {exc}; fix: render it from the plan", file=sys.stderr)
        return 2
    except KubeError as exc:
        print(f"kiln-health: {exc}", file=sys.stderr)
        return 2
    if args.maintenance == "start":
        return _take_out(e, args, api)
    while True:
        code = _round(e, args, api)
        if args.every <= 0:
            return code
        time.sleep(args.every)


def _round(e: Expect, args: argparse.Namespace, api: KubeApi | None) -> int:
    """One round that never raises: an error outside the checks (printing, the scheduler) is said on stderr and
    the round counts as the probe failure it is, so `--every` goes on."""
    try:
        return _once(e, args, api)
    except Exception as exc:  # the loop outlives any one round
        print(f"kiln-health: round failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return PROBE_FAILED


def _take_out(e: Expect, args: argparse.Namespace, api: KubeApi | None) -> int:
    """--maintenance start: the node out of its scheduler with the maintenance code; 1 when that failed."""
    fault = Result("maintenance", "fault", "taken out for maintenance by kiln-health --maintenance start",
                   MAINTENANCE)
    host = (os.environ.get("NODE_NAME") or e.host) if api is not None else (e.host or socket.gethostname())
    if api is None and args.drain == "none":
        print(f"kiln-health: {host}: no scheduler to take it out of (--drain none)")
        return 0
    try:
        done = reconcile_node(api, host, fault, _namespace()) if api is not None else None
    except KubeError as exc:
        print(f"kiln-health: node {host}: {exc}", file=sys.stderr)
        return 1
    for cmd in scheduler_actions(args.drain, host, fault, run):
        if (out := run(cmd)) is None or out[0] != 0:
            print(f"kiln-health: {' '.join(cmd)} failed", file=sys.stderr)
    if api is None and not in_maintenance(args.drain, host, run):
        print(f"kiln-health: {host}: not taken out of {args.drain}: the scheduler does not show it in maintenance "
              f"(fix: run kiln-health where {'scontrol' if args.drain == 'slurm' else 'kubectl'} reaches it)",
              file=sys.stderr)
        return 1
    print(f"kiln-health: {host}: {done or fault.line()}")
    return 0


def in_maintenance(kind: str, host: str, runner: Runner = run) -> bool:
    """Whether the scheduler shows the node taken out for maintenance: Slurm's reason "kiln-health 80", or the
    node's kiln.io/health taint fault-80."""
    if kind == "slurm":
        return _slurm_reason(host, runner)[:2] == _SLURM_MAINTENANCE
    out = runner(["kubectl", "get", "node", host, "-o", "json"])
    try:
        spec = json.loads(out[1]).get("spec") if out is not None and out[0] == 0 else None
    except (ValueError, AttributeError):
        return False
    return _maintenance_taint(spec.get("taints") if isinstance(spec, dict) else None)


def _once(e: Expect, args: argparse.Namespace, api: KubeApi | None) -> int:
    """One round: every check, its lines (or JSON), the scheduler actions; the first fault's code."""
    results = run_checks(e, args.root, run)
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        for r in results:
            print(r.line())
    fault = next((r for r in results if r.status == "fault"), None)
    ending = args.maintenance == "end"
    if api is not None:
        node = os.environ.get("NODE_NAME") or e.host
        try:
            done = reconcile_node(api, node, fault, _namespace(), ending)
        except KubeError as exc:
            print(f"kiln-health: node {node}: {exc}", file=sys.stderr)
        else:
            if done:
                print(f"kiln-health: node {node}: {done}")
    failed = False
    for cmd in scheduler_actions(args.drain, e.host or socket.gethostname(), fault, run, ending):
        out = run(cmd)
        if out is None or out[0] != 0:
            print(f"kiln-health: {' '.join(cmd)} failed", file=sys.stderr)
            failed = True
    sys.stdout.flush()
    return fault.code if fault else int(failed and ending)


if __name__ == "__main__":
    raise SystemExit(main())
