"""The node health check: what a compute node needs to take work, checked against the plan.

`kiln-health --expect /etc/kiln/health.json [--drain slurm|kubernetes|none]` runs every check, prints one
line each and exits with the first fault's code (0 when healthy). In the kit's Kubernetes DaemonSet
(kiln/render/manifests/health.py) it runs as `kiln-health --kubernetes --root /host --every 300`: the host's
/proc and /sys mounted read-only under /host, and a faulty node cordoned and tainted through the in-cluster API
(plain HTTPS with the pod's service-account token; `KubeApi`, `reconcile_node`). A check whose part the host lacks says
NOT APPLICABLE with the reason and never counts as a pass or a fault. Fault codes (docs/monitoring.md):

  10 GPU count differs from the plan       11 uncorrectable ECC errors      12 GPU in hardware slowdown
  20 planned RDMA device missing           21 RDMA port not ACTIVE          22 RDMA port below its planned rate
  30 Lustre not mounted at the plan's mount point                           31 a Lustre import not FULL
  40 an LNet server NID does not answer `lnetctl ping`
  50 clock not synchronised (timedatectl NTPSynchronized; without systemd, the same test on adjtimex(2))
  60 local NVMe scratch not mounted

Formats: /sys/class/infiniband/<dev>/ports/<n>/{state,rate} ("4: ACTIVE", "400 Gb/sec (4X NDR)"), the
Lustre import file ("import:" then "    state: FULL"; lustre-release v2_15_8
lustre/obdclass/lprocfs_status.c, lprocfs_import_seq_show_locked).
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


#: Why the host's mount table cannot be read (then the mount checks are NOT APPLICABLE, never a fault).
NO_HOST_MOUNTS = ("the host's /proc/1/mounts is not readable here (procfs hidepid?), and /proc/mounts under "
                  "--root would be this container's own mounts")


def _mounts(root: Path) -> list[tuple[str, str]] | None:
    """(mount point, fs type) of the host: /proc/1/mounts (init's mount namespace, so a pod reading the host's
    /proc under --root sees the host's mounts, not its own), else /proc/mounts; node_exporter 1.5.0 reads them
    the same way (collector/filesystem_linux.go, mountPointDetails). Under a --root that is a real procfs
    (it has /proc/self), /proc/mounts is the reader's own mount namespace: None rather than a wrong answer."""
    names = ["proc/1/mounts"]
    if root == Path("/") or not (root / "proc/self").exists():
        names.append("proc/mounts")
    for name in names:
        try:
            text = (root / name).read_text()
        except OSError:
            continue
        return [(f[1], f[2]) for f in (line.split() for line in text.splitlines()) if len(f) >= 3]
    return None if len(names) == 1 else []


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
    mounts = _mounts(root)
    if mounts is None:
        yield Result("health.lustre", "not_applicable", NO_HOST_MOUNTS)
        return
    if (e.lustre_mount, "lustre") not in mounts:
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


def check_nvme(e: Expect, root: Path) -> Iterator[Result]:
    mounts = _mounts(root) if e.nvme_mount else []
    if not e.nvme_mount:
        yield Result("health.nvme", "not_applicable", "the plan gives this host no local NVMe")
    elif mounts is None:
        yield Result("health.nvme", "not_applicable", NO_HOST_MOUNTS)
    elif any(mp == e.nvme_mount for mp, _ in mounts):
        yield Result("health.nvme", "ok", f"{e.nvme_mount} mounted")
    else:
        yield Result("health.nvme", "fault", f"nothing mounted at {e.nvme_mount}", 60)


def run_checks(e: Expect, root: Path = Path("/"), runner: Runner = run,
               maxerror: Callable[[], int | None] | None = None) -> list[Result]:
    return [
        *check_gpus(e, runner), *check_rdma(e, root), *check_lustre(e, root), *check_lnet(e, runner, root),
        *check_clock(runner, root, maxerror), *check_nvme(e, root),
    ]


def scheduler_actions(kind: str, host: str, fault: Result | None, runner: Runner = run) -> list[list[str]]:
    """Commands that take the node out of the scheduler on a fault, or return it when healthy. A node is
    returned only if kiln-health took it out (Slurm reason; on Kubernetes its cordon annotation), never one an
    operator drained."""
    if kind == "slurm":
        if fault:
            return [["scontrol", "update", f"nodename={host}", "state=drain", f"reason=kiln-health {fault.code}"]]
        out = runner(["sinfo", "-h", "-n", host, "-o", "%E"])
        ours = out is not None and out[0] == 0 and out[1].strip().startswith("kiln-health")
        return [["scontrol", "update", f"nodename={host}", "state=resume"]] if ours else []
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
        patch, _ = _node_patch(node, fault)
        return [] if patch is None else [["kubectl", "patch", "node", host, "--type", "merge", "-p",
                                          json.dumps(patch, separators=(",", ":"))]]
    return []


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


def _node_patch(node: dict[str, object], fault: Result | None) -> tuple[dict[str, object] | None, str]:
    """The merge patch (RFC 7386) that takes the node out on a fault or returns it when healthy, and the event
    reason; (None, "") when the node is already as it should be. A cordon kiln-health did not set is never
    undone; the patch carries the node's resourceVersion, so a concurrent change makes it fail (409) and retry."""
    meta = node.get("metadata") if isinstance(node.get("metadata"), dict) else {}
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    assert isinstance(meta, dict) and isinstance(spec, dict)
    annotations = meta.get("annotations") or {}
    taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    others = [t for t in taints if t.get("key") != TAINT_KEY]
    unschedulable = spec.get("unschedulable") is True
    ours_cordon = annotations.get(CORDONED_ANNOTATION) == "true"
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


def reconcile_node(api: KubeApi, node: str, fault: Result | None, namespace: str) -> str | None:
    """Cordon and taint `node` on a fault (the reason as an annotation and an event), or return it when healthy;
    returns what was done, None when nothing had to change."""
    for attempt in (1, 2):
        current = api.request("GET", f"/api/v1/nodes/{node}")
        patch, reason = _node_patch(current, fault)
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
    args = p.parse_args(argv)
    if args.kubernetes and args.drain != "none":
        p.error("--kubernetes takes the node out itself; leave out --drain")
    try:
        e = Expect(**json.loads(Path(args.expect).read_text()))
        api = KubeApi.in_cluster() if args.kubernetes else None
    except (OSError, ValueError, TypeError) as exc:
        print(f"kiln-health: cannot read {args.expect}: {exc}; fix: render it from the plan", file=sys.stderr)
        return 2
    except KubeError as exc:
        print(f"kiln-health: {exc}", file=sys.stderr)
        return 2
    while True:
        code = _once(e, args, api)
        if args.every <= 0:
            return code
        time.sleep(args.every)


def _once(e: Expect, args: argparse.Namespace, api: KubeApi | None) -> int:
    """One round: every check, its lines (or JSON), the scheduler actions; the first fault's code."""
    results = run_checks(e, args.root, run)
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        for r in results:
            print(r.line())
    fault = next((r for r in results if r.status == "fault"), None)
    if api is not None:
        node = os.environ.get("NODE_NAME") or e.host
        try:
            done = reconcile_node(api, node, fault, _namespace())
        except KubeError as exc:
            print(f"kiln-health: node {node}: {exc}", file=sys.stderr)
        else:
            if done:
                print(f"kiln-health: node {node}: {done}")
    for cmd in scheduler_actions(args.drain, e.host or socket.gethostname(), fault):
        out = run(cmd)
        if out is None or out[0] != 0:
            print(f"kiln-health: {' '.join(cmd)} failed", file=sys.stderr)
    sys.stdout.flush()
    return fault.code if fault else 0


if __name__ == "__main__":
    raise SystemExit(main())
