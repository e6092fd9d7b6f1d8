"""What every check shares: options, the run context, subjects, samples, host probes and the registry."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from kiln.plan.model import AcceptanceTarget, Host, Plan
from kiln.spec.models import Acceptance
from kiln.verify.hosts import CommandResult, Remote, RemoteError
from kiln.verify.inventory import Inventory

SEAWEEDFS_UNITS = ("seaweedfs-master", "seaweedfs-volume", "seaweedfs-filer", "seaweedfs-s3")


@dataclass(frozen=True, slots=True)
class Options:
    """Run options. The CLI sets the common ones by flag and any of them with --option KEY=VALUE."""

    strict: bool = False
    only: tuple[str, ...] = ()
    hosts_pattern: str | None = None
    workers: int = 4
    backend_template: str | None = None
    command_timeout_s: float = 900.0
    workdir: str = "/tmp/kiln-verify"  # scratch directory on the hosts (tool output, pushed binaries)
    # multi-node launcher (IOR, mdtest, NCCL across nodes)
    launcher: Literal["mpirun", "srun"] = "mpirun"
    launcher_host: str | None = None
    mpirun_args: str = ""
    srun_args: str = ""
    # storage
    local_nvme_path: str | None = None  # default: host var kiln_local_nvme_mount, else /mnt/local-nvme
    lustre_dir: str | None = None  # default: the plan's scratch layout dir (or mount point)/kiln-verify
    dataflow_python: str = "/opt/kiln-datamover/bin/python"  # the datamover role's kiln (dataflow.* checks)
    dataflow_fast_tier: str | None = None  # default: the plan's Lustre mount point (the lab: /srv/kiln-fast)
    dataflow_shard_MiB: int = 64  # checkpoint shard and model size of the dataflow.* pass (4 such files resume)
    fio_jobs: int = 4
    fio_size_per_job: str | None = None  # e.g. 4G: overrides acceptance.fio_size_factor × RAM
    fio_runtime_s: int = 60
    fio_iodepth: int = 16
    fio_block_size: str = "1M"
    ior_path: str = "ior"
    mdtest_path: str = "mdtest"
    ior_procs_per_node: int = 8
    ior_block: str = "4g"
    mdtest_files_per_proc: int = 1000
    # network
    iperf3_seconds: int = 10
    iperf3_streams: int = 4
    # fabric
    perftest_seconds: int = 5
    perftest_size: int = 1 << 20
    perftest_qps: int = 4
    all_reduce_perf: str = "all_reduce_perf"
    nccl_max_bytes: str = "8G"
    # GPU
    gpu_tool: Literal["auto", "nvbandwidth", "bandwidthTest"] = "auto"
    nvbandwidth_path: str = "nvbandwidth"
    bandwidth_test_path: str = "bandwidthTest"
    # object store
    warp_binary: str | None = None  # local warp pushed to the launcher when it has none
    warp_duration_s: int = 30
    warp_obj_size: str = "4MiB"
    warp_concurrent: int = 32
    warp_objects: int = 500
    warp_bucket: str = "kiln-verify-warp"
    s3_endpoint: str | None = None  # default: every object-store host's storage address:s3_port
    s3_access_key: str | None = None  # default: the plan's access key id
    s3_secret_key: str | None = field(default=None, repr=False)  # from KILN_S3_SECRET_KEY; never reported
    objectstore_units: tuple[str, ...] = SEAWEEDFS_UNITS

    def with_values(self, pairs: dict[str, str]) -> Options:
        """Options with `KEY=VALUE` strings converted to each field's type."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        changes: dict[str, Any] = {}
        for key, raw in pairs.items():
            if key not in fields or key in ("s3_secret_key",):
                known = ", ".join(sorted(k for k in fields if k != "s3_secret_key"))
                raise ValueError(f"unknown option {key!r}; known: {known}")
            current = getattr(self, key)
            if isinstance(current, bool):
                changes[key] = raw.lower() in ("1", "true", "yes", "on")
            elif isinstance(current, int):
                changes[key] = int(raw)
            elif isinstance(current, float):
                changes[key] = float(raw)
            elif isinstance(current, tuple):
                changes[key] = tuple(x for x in re.split(r"[,\s]+", raw) if x)
            else:
                changes[key] = raw or None
        return dataclasses.replace(self, **changes)

    def public(self) -> dict[str, Any]:
        """For the report: every option except secrets."""
        out = dataclasses.asdict(self)
        out.pop("s3_secret_key", None)
        out["s3_secret_key_set"] = bool(self.s3_secret_key)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


@dataclass(frozen=True, slots=True)
class Subject:
    """What one result row is about: a host, a host pair (+ rail), or a group measured together."""

    label: str
    hosts: tuple[str, ...]  # hosts[0] runs the tool (client / launcher)
    extra: tuple[tuple[str, str], ...] = ()

    def get(self, key: str, default: str = "") -> str:
        return dict(self.extra).get(key, default)


@dataclass(slots=True)
class Sample:
    value: float
    details: list[str] = field(default_factory=list)
    raw: dict[str, str] = field(default_factory=dict)  # file name → content, kept beside the report
    info: dict[str, Any] = field(default_factory=dict)  # extra figures (per-job bandwidth, retransmits, ...)


class NotApplicable(Exception):
    """Raised by a check when it finds at run time that it cannot apply (reason in the message)."""


class CheckError(RuntimeError):
    """The check could not produce a measurement (tool missing, command failed, bad configuration)."""


Progress = Callable[[str], None]


@dataclass
class Context:
    plan: Plan
    acceptance: Acceptance
    inventory: Inventory
    remotes: dict[str, Remote]
    options: Options
    progress: Progress = lambda _msg: None
    _probe_cache: dict[tuple[str, str], str | None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def remote(self, host: str) -> Remote:
        try:
            return self.remotes[host]
        except KeyError:
            raise CheckError(f"{host} is not among the selected hosts ({', '.join(self.remotes)})") from None

    def hostvars(self, host: str) -> dict[str, Any]:
        return self.inventory.vars(host)

    def plan_host(self, host: str) -> Host | None:
        try:
            return self.plan.host(host)
        except KeyError:
            return None

    def group_hosts(self, group: str | None) -> list[str]:
        """Selected hosts of a plan group, in plan order ('all' or None: every selected host)."""
        if group is None or group in ("", "all"):
            members = [h.name for h in self.plan.hosts]
        else:
            members = list(self.plan.groups.get(group, ()))
        return [h for h in members if h in self.remotes]

    def run(self, host: str, command: str, timeout: float | None = None) -> CommandResult:
        return self.remote(host).run(command, timeout)

    def must(self, host: str, command: str, timeout: float | None = None, what: str = "") -> CommandResult:
        r = self.run(host, command, timeout)
        if not r.ok:
            msg = (r.stderr.strip() or r.stdout.strip())[-400:]
            hint = " (timed out)" if r.timed_out else ""
            raise CheckError(f"{host}: {what or command[:160]} failed with rc {r.rc}{hint}: {msg}")
        return r

    def workdir(self, *parts: str) -> str:
        return "/".join([self.options.workdir.rstrip("/"), *parts])

    # ---- capability probes (cached per host) ----------------------------------------------------------

    def probe(self, host: str, requirement: str) -> str | None:
        """None when `host` has `requirement`, else the not-applicable reason."""
        key = (host, requirement)
        with self._lock:
            if key in self._probe_cache:
                return self._probe_cache[key]
        fn = PROBES.get(requirement)
        reason = fn(self, host) if fn else None
        with self._lock:
            self._probe_cache[key] = reason
        return reason

    def local_nvme_path(self, host: str) -> str:
        planned = self.hostvars(host).get("kiln_local_nvme_mount")
        return str(self.options.local_nvme_path or planned or "/mnt/local-nvme")

    def in_container(self, host: str) -> bool:
        key = (host, "_container")
        with self._lock:
            if key in self._probe_cache:
                return self._probe_cache[key] == "yes"
        r = self.run(host, "test -e /run/.containerenv -o -e /.dockerenv && echo yes || "
                           "(systemd-detect-virt --container >/dev/null 2>&1 && echo yes || echo no)", 30)
        yes = r.stdout.strip().endswith("yes")
        with self._lock:
            self._probe_cache[key] = "yes" if yes else "no"
        return yes


def _probe_gpu(ctx: Context, host: str) -> str | None:
    r = ctx.run(host, "command -v nvidia-smi >/dev/null 2>&1 || exit 3; nvidia-smi -L", 60)
    if r.rc == 3:
        return "no NVIDIA GPU on this host (nvidia-smi not found)"
    if not r.ok or "GPU" not in r.stdout:
        return f"no NVIDIA GPU visible (nvidia-smi -L: {(r.stdout + r.stderr).strip()[:160] or 'no output'})"
    return None


def _probe_rdma(ctx: Context, host: str) -> str | None:
    r = ctx.run(host, "ls /sys/class/infiniband 2>/dev/null", 30)
    if not r.stdout.strip():
        return "no RDMA device on this host (/sys/class/infiniband is empty or missing)"
    return None


def _probe_lustre(ctx: Context, host: str) -> str | None:
    r = ctx.run(host, "command -v lctl >/dev/null 2>&1 && test -d /sys/fs/lustre && echo ok", 30)
    if r.stdout.strip() != "ok":
        return "no Lustre on this host (lctl missing or the lustre module is not loaded: no /sys/fs/lustre)"
    return None


def _probe_nvme(ctx: Context, host: str) -> str | None:
    path = ctx.local_nvme_path(host)
    r = ctx.run(host, f"test -d {shlex.quote(path)} && echo ok", 30)
    if r.stdout.strip() != "ok":
        return (f"no local NVMe scratch directory {path} on this host "
                "(set host var kiln_local_nvme_mount or --option local_nvme_path=DIR)")
    return None


PROBES: dict[str, Callable[[Context, str], str | None]] = {
    "gpu": _probe_gpu,
    "rdma": _probe_rdma,
    "lustre": _probe_lustre,
    "nvme": _probe_nvme,
}


@dataclass(frozen=True, slots=True)
class Rep:
    index: int  # 1-based within its phase
    total: int
    warmup: bool

    @property
    def label(self) -> str:
        return f"warmup{self.index}" if self.warmup else f"rep{self.index}"


class Check(ABC):
    """One acceptance check (a target's `check` id). Subclasses say where it runs and how to measure."""

    id: ClassVar[str]
    kind: ClassVar[Literal["conformance", "benchmark"]] = "benchmark"
    runbook: ClassVar[str] = ""  # docs/runbooks/acceptance-<area>.md
    parallel_hosts: ClassVar[bool] = False  # subjects may run at the same time (no shared resource)
    single_run: ClassVar[bool] = False  # one run per subject whatever acceptance.repetitions says (faults)
    tools: ClassVar[tuple[str, ...]] = ()  # what the report names as the tool(s)

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        """Default by scope: host/node → one per host; pair → a ring of host pairs; aggregate → one."""
        hosts = ctx.group_hosts(target.group)
        if target.scope in ("host", "node"):
            return [Subject(h, (h,)) for h in hosts]
        if target.scope == "pair":
            return ring_pairs(hosts)
        if not hosts:
            return []
        launcher = ctx.options.launcher_host if ctx.options.launcher_host in hosts else hosts[0]
        ordered = (launcher, *[h for h in hosts if h != launcher])
        return [Subject(f"{target.group} ({len(hosts)} hosts, from {launcher})", ordered)]

    def not_applicable(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> str | None:
        for req in target.requires:
            for h in subject.hosts:
                reason = ctx.probe(h, req)
                if reason:
                    return reason if len(subject.hosts) == 1 else f"{h}: {reason}"
        return None

    def prepare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:  # noqa: B027 - optional hook
        """Once before the runs of a subject (push binaries, lay out files)."""

    def cleanup(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:  # noqa: B027 - optional hook
        """Once after the runs of a subject, also after errors."""

    @abstractmethod
    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        """One run. Raise NotApplicable, CheckError or ParseError when there is no value."""


def ring_pairs(hosts: list[str]) -> list[Subject]:
    """Each host once as client and once as server: h0→h1, h1→h2, …, hN→h0 (two hosts: both directions)."""
    if len(hosts) < 2:
        return []
    return [Subject(f"{a}→{b}", (a, b)) for a, b in zip(hosts, hosts[1:] + hosts[:1], strict=True)]


REGISTRY: dict[str, Check] = {}


def register(cls: type[Check]) -> type[Check]:
    REGISTRY[cls.id] = cls()
    return cls


def quote(s: str) -> str:
    return shlex.quote(s)


def need_tool(ctx: Context, host: str, tool: str, hint: str) -> str:
    """The tool's path on the host, or CheckError saying how to get it."""
    r = ctx.run(host, f"command -v {quote(tool)}", 30)
    if not r.ok or not r.stdout.strip():
        raise CheckError(f"{host}: {tool} is not installed ({hint})")
    return r.stdout.strip().splitlines()[0]


def tool_finished(host: str, tool: str, r: CommandResult) -> None:
    """CheckError when a tool (or its launcher) exited non-zero, even if its output parsed.

    Callers parse first, so that the tool's own error text is the reason when there is one; a run that
    printed a plausible table and then aborted (MPI_ABORT, a killed rank, a timeout) is still an ERROR.
    """
    if r.ok:
        return
    hint = " (timed out)" if r.timed_out else ""
    tail = (r.stderr.strip() or r.stdout.strip())[-300:]
    raise CheckError(f"{host}: {tool} exited with rc {r.rc}{hint}" + (f": {tail}" if tail else ""))


def push_env_file(ctx: Context, host: str, name: str, values: dict[str, str]) -> str:
    """Put `values` as a 0600 shell env file on the host and return its path; for secrets.

    The file is written locally with mode 0600 in a private temporary directory and copied by file transfer
    (Remote.put_secret) into <workdir>/secrets (mode 0700), so no secret is ever part of a command line: not
    in the local ssh/podman argv, not in the remote `sh -c`, not in `ps` on a shared node. Commands load it
    with `. FILE` (set -a exports) and remove it afterwards (`drop_env_file`).
    """
    secrets_dir = ctx.workdir("secrets")
    remote_path = f"{secrets_dir}/{name}"
    ctx.must(host, f"mkdir -p {quote(secrets_dir)} && chmod 700 {quote(secrets_dir)}", 60,
             what=f"creating {secrets_dir}")
    with tempfile.TemporaryDirectory(prefix="kiln-secret-") as d:
        local = Path(d) / name
        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(f"{k}={shlex.quote(v)}\n" for k, v in values.items()))
        ctx.remote(host).put_secret(local, remote_path)
    return remote_path


def with_env_file(path: str, command: str) -> str:
    """`command` run with the variables of an env file exported (the file is read by the shell, not passed)."""
    return f"set -a && . {quote(path)} && set +a && {command}"


def drop_env_file(ctx: Context, host: str, path: str) -> None:
    ctx.run(host, f"rm -f {quote(path)}", 30)


def write_remote_file(ctx: Context, host: str, path: str, text: str) -> None:
    """Write a small text file on the host through the shell (heredoc with a quoted delimiter)."""
    marker = "KILN_VERIFY_EOF"
    if marker in text:
        raise ValueError("file text contains the heredoc marker")
    ctx.must(host, f"mkdir -p {quote(str(Path(path).parent))} && cat > {quote(path)} <<'{marker}'\n{text}\n{marker}",
             60, what=f"writing {path}")


__all__ = [
    "REGISTRY",
    "SEAWEEDFS_UNITS",
    "Check",
    "CheckError",
    "Context",
    "NotApplicable",
    "Options",
    "RemoteError",
    "Rep",
    "Sample",
    "Subject",
    "drop_env_file",
    "need_tool",
    "push_env_file",
    "quote",
    "register",
    "ring_pairs",
    "tool_finished",
    "with_env_file",
    "write_remote_file",
]
