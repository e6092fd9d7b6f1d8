"""The context a check runs in: the plan, the inventory, the reached hosts and the options, and what each host
has (probes: a GPU, an RDMA device, Lustre, ...; cached per host and run)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kiln.plan.model import Host, Plan
from kiln.spec.models import Acceptance
from kiln.verify.checks.check import CheckError
from kiln.verify.checks.options import Options, Variables
from kiln.verify.hosts import CommandResult, Remote
from kiln.verify.inventory import Inventory

V = TypeVar("V", bound=Variables)
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
    _shared: dict[tuple[str, ...], Any] = field(default_factory=dict)

    def var(self, variables: type[V]) -> V:
        """This run's values of a check's variable set (--option <scope>.<variable>=VALUE, else the defaults)."""
        return self.options.var(variables)

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

    def recall(self, key: tuple[str, ...]) -> Any:
        """What a check kept for this run under `key` (figures several targets share), else None."""
        with self._lock:
            return self._shared.get(key)

    def keep(self, key: tuple[str, ...], value: Any) -> None:
        """Keep `value` for this run only: a new run (a new context) measures again."""
        with self._lock:
            self._shared[key] = value

    # ---- what a host has (cached per host) -------------------------------------------------------------

    def plan_lacks(self, host: str, requirement: str) -> str | None:
        """Why the plan gives `host` none of `requirement` (a GPU, an RDMA device, local NVMe), or None."""
        ph = self.plan_host(host)
        if ph is None:
            return None
        if requirement == "gpu" and not ph.gpus:
            return "the plan puts no GPU on this host"
        if requirement == "rdma" and not any(n.device for n in ph.nics):
            return "the plan gives this host no RDMA device"
        if requirement == "nvme" and self.plan.local_nvme_mount(ph.pool) is None:
            return "the plan gives this host no local NVMe"
        return None

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


Probe = Callable[[Context, str], "str | None"]

# A target's `requires` → the probe that says why a host lacks it (None: it has it). The checks module that owns
# a requirement's settings registers its probe (storage: nvme, with storage.local_nvme_path).
PROBES: dict[str, Probe] = {}


def host_probe(requirement: str) -> Callable[[Probe], Probe]:
    def add(fn: Probe) -> Probe:
        PROBES[requirement] = fn
        return fn

    return add


@host_probe("gpu")
def _probe_gpu(ctx: Context, host: str) -> str | None:
    r = ctx.run(host, "command -v nvidia-smi >/dev/null 2>&1 || exit 3; nvidia-smi -L", 60)
    if r.rc == 3:
        return "no NVIDIA GPU on this host (nvidia-smi not found)"
    if not r.ok or "GPU" not in r.stdout:
        return f"no NVIDIA GPU visible (nvidia-smi -L: {(r.stdout + r.stderr).strip()[:160] or 'no output'})"
    return None


@host_probe("rdma")
def _probe_rdma(ctx: Context, host: str) -> str | None:
    r = ctx.run(host, "ls /sys/class/infiniband 2>/dev/null", 30)
    if not r.stdout.strip():
        return "no RDMA device on this host (/sys/class/infiniband is empty or missing)"
    return None


@host_probe("lustre")
def _probe_lustre(ctx: Context, host: str) -> str | None:
    r = ctx.run(host, "command -v lctl >/dev/null 2>&1 && test -d /sys/fs/lustre && echo ok", 30)
    if r.stdout.strip() != "ok":
        return "no Lustre on this host (lctl missing or the lustre module is not loaded: no /sys/fs/lustre)"
    return None
