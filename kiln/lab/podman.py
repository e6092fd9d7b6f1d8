"""A thin, typed wrapper over the podman CLI for the lab (networks, volumes, systemd containers)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LABEL = "io.kiln.lab"
# /dev/shm of a lab host: a tmpfs made afresh at every start, as a reboot gives a real server. Podman's own /dev/shm
# outlives a container's restart: a server the failover drills killed came back with the previous boot's libqb IPC
# files (Corosync and Pacemaker hold about 48 MiB there) in podman's 64 MiB, corosync failed with
# "qb_rb_open: No space left on device" and the node never rejoined its pair.
SHM_MIB = 256


class PodmanError(RuntimeError):
    """A podman command failed; the message carries the command and podman's own words."""


def _run(args: list[str], check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    podman = shutil.which("podman")
    if podman is None:
        raise PodmanError("podman is not installed; run scripts/host-prereqs.sh (make lab does)")
    try:
        proc = subprocess.run([podman, *args], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise PodmanError(
            f"podman {' '.join(args)} did not finish within {timeout:.0f} s; check `podman ps` and "
            "`systemctl status podman` (a stuck container or storage lock), then run the command again"
        ) from None
    if check and proc.returncode != 0:
        raise PodmanError(
            f"podman {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def _json(args: list[str]) -> Any:
    out = _run(args).stdout.strip()
    return json.loads(out) if out else []


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    state: str  # running, exited, created, ...
    labels: dict[str, str]


def containers(stack: str) -> list[Container]:
    rows = _json(["ps", "-a", "--filter", f"label={LABEL}={stack}", "--format", "json"])
    return [
        Container(r["Names"][0] if isinstance(r["Names"], list) else r["Names"], r["State"], r.get("Labels") or {})
        for r in rows
    ]


def networks(stack: str) -> list[str]:
    rows = _json(["network", "ls", "--filter", f"label={LABEL}={stack}", "--format", "json"])
    return [r["name"] if "name" in r else r["Name"] for r in rows]


def volumes(stack: str) -> list[str]:
    rows = _json(["volume", "ls", "--filter", f"label={LABEL}={stack}", "--format", "json"])
    return [r["Name"] if "Name" in r else r["name"] for r in rows]


def ensure_network(name: str, subnet: str, stack: str) -> bool:
    """Create the network if absent. True when created."""
    if _run(["network", "exists", name], check=False).returncode == 0:
        return False
    _run(["network", "create", "--subnet", subnet, "--label", f"{LABEL}={stack}", name])
    return True


def ensure_volume(name: str, stack: str) -> bool:
    if _run(["volume", "exists", name], check=False).returncode == 0:
        return False
    _run(["volume", "create", "--label", f"{LABEL}={stack}", name])
    return True


@dataclass(frozen=True, slots=True)
class HostSpec:
    container: str
    hostname: str
    image: str
    networks: tuple[tuple[str, str, str], ...]  # (network, static ip, interface name inside the container)
    volumes: tuple[tuple[str, str], ...]  # (volume, mount point)
    labels: dict[str, str]
    hosts: tuple[tuple[str, str], ...] = ()  # /etc/hosts entries: every lab host by name
    tmpfs: tuple[tuple[str, int], ...] = ()  # (mount point, size in MiB): small filesystems of the container's own
    binds: tuple[tuple[str, str], ...] = ()  # (host directory, container directory): bind mounts (lab-only services)


# /proc/sys is read-only in a podman container, so the roles could not apply even the sysctls a
# network namespace owns. The lab unmasks /proc/sys and masks again everything that is not the
# container's own: whole directories of host-global settings, and every writable kernel.* file
# except the UTS names and random/ (systemd needs random/boot_id). Net sysctls that are global
# (net.core.rmem_max, …) are read-only inside a child network namespace, so the host is safe.
_MASKED_DIRS = ("vm", "fs", "dev", "user", "abi", "debug", "crypto")
_KERNEL_KEEP = ("hostname", "domainname", "random/")


def sysctl_isolation(proc_sys: Path = Path("/proc/sys")) -> list[str]:
    """`--security-opt` arguments that make only namespaced sysctls writable in a lab container."""
    masks = [str(proc_sys / d) for d in _MASKED_DIRS if (proc_sys / d).exists()]
    kernel = proc_sys / "kernel"
    for path in sorted(kernel.rglob("*")) if kernel.exists() else []:
        rel = path.relative_to(kernel).as_posix()
        if path.is_file() and os.access(path, os.W_OK) and not rel.startswith(_KERNEL_KEEP):
            masks.append(str(path))
    return ["--security-opt", "unmask=/proc/sys", "--security-opt", "mask=" + ":".join(masks)]


def container_state(name: str) -> str | None:
    proc = _run(["container", "inspect", name, "--format", "{{.State.Status}}"], check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def ensure_container(h: HostSpec) -> str:
    """Create and start a systemd container; start it if it exists but stopped. Returns what was done."""
    state = container_state(h.container)
    recreated = False
    if state is not None and not (_has_tmpfs(h) and _has_binds(h)):
        # made by an older kiln without a tmpfs or bind mount the stack now plans: remake it (the converge restores it)
        _run(["rm", "-f", h.container])
        state, recreated = None, True
    if state == "running":
        return "running"
    if state is not None:
        _run(["start", h.container])
        return "started"
    # NET_ADMIN in the container's own network namespace: the firewall role loads nftables rules there
    args = ["run", "-d", "--name", h.container, "--hostname", h.hostname, "--systemd=always", "--cap-add", "NET_ADMIN",
            "--tmpfs", f"/dev/shm:rw,size={SHM_MIB}m,mode=1777", *sysctl_isolation()]
    for name, ip in h.hosts:
        args += ["--add-host", f"{name}:{ip}"]
    for net, ip, interface in h.networks:
        # named, because podman 4 attaches several networks in no fixed order: the plan's storage interface must
        # be the one on the storage network (the LNet loss drill downs it by name)
        args += ["--network", f"{net}:ip={ip},interface_name={interface}"]
    for vol, path in h.volumes:
        args += ["-v", f"{vol}:{path}"]
    for path, mib in h.tmpfs:
        args += ["--tmpfs", f"{path}:rw,size={mib}m,mode=0755"]
    for src, dst in h.binds:
        args += ["-v", f"{src}:{dst}"]
    for k, v in h.labels.items():
        args += ["--label", f"{k}={v}"]
    args += [h.image, "/sbin/init"]
    _run(args)
    return "recreated (new mount)" if recreated else "created"


def _has_tmpfs(h: HostSpec) -> bool:
    """Whether an existing container was made with every tmpfs mount of `h` and the lab's /dev/shm (an older kiln
    left podman's own, which outlives a restart)."""
    proc = _run(["container", "inspect", h.container, "--format", "{{json .HostConfig.Tmpfs}}"], check=False)
    try:
        have = json.loads(proc.stdout or "null") or {}
    except ValueError:
        return False
    return all(path in have for path in ("/dev/shm", *(p for p, _ in h.tmpfs)))


def _has_binds(h: HostSpec) -> bool:
    """Whether an existing container was made with every bind mount of `h`."""
    if not h.binds:
        return True
    proc = _run(["container", "inspect", h.container, "--format", "{{json .Mounts}}"], check=False)
    try:
        have = {m.get("Destination") for m in json.loads(proc.stdout or "null") or []}
    except (ValueError, AttributeError):
        return False
    return all(dst in have for _, dst in h.binds)


def copy_into(name: str, files: dict[str, Path]) -> None:
    """Copy local files into a running container (destination path -> local file), executable."""
    for dest, src in files.items():
        _run(["exec", name, "mkdir", "-p", str(Path(dest).parent)])
        _run(["cp", str(src), f"{name}:{dest}"])
        _run(["exec", name, "chmod", "0755", dest])


def api_service(socket_path: Path, pid_file: Path) -> bool:
    """Start the host's podman REST API on a unix socket (lab-only: the lab's fence agent stand-in drives the
    server containers through it), unless one answers there. True when started."""
    if socket_path.exists() and _run(["--url", f"unix://{socket_path}", "version"], check=False).returncode == 0:
        return False
    podman = shutil.which("podman")
    if podman is None:
        raise PodmanError("podman is not installed; run scripts/host-prereqs.sh (make lab does)")
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    socket_path.unlink(missing_ok=True)
    proc = subprocess.Popen([podman, "system", "service", "--time=0", f"unix://{socket_path}"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    pid_file.write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + 30
    while not socket_path.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise PodmanError(f"podman system service did not open {socket_path} within 30 s")
        time.sleep(0.2)
    return True


def stop_api_service(pid_file: Path) -> bool:
    """Stop the API service api_service() started (by the pid it recorded). True when one was stopped."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return False
    pid_file.unlink(missing_ok=True)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if b"service" not in cmdline or not any(arg.endswith(b"podman") for arg in cmdline[:1]):
        return False  # the pid was reused by another process: not ours to stop
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        return False
    return True


#: Seconds `podman exec` may fail outright (it prints no systemd state) before a container counts as stale.
UNREACHABLE_S = 45


def wait_for_systemd(name: str, timeout: float = 240) -> str:
    """Wait until systemd in the container is up; returns its state (running or degraded). A container that
    exits meanwhile fails at once, with its state and the end of its log."""
    deadline = time.monotonic() + timeout
    state = ""
    unreachable_since: float | None = None
    while time.monotonic() < deadline:
        proc = _run(["exec", name, "systemctl", "is-system-running"], check=False)
        state = proc.stdout.strip()
        if state in ("running", "degraded"):
            return state
        status = container_state(name)
        if status not in ("running", "created", "initialized", None):
            raise PodmanError(f"{name}: the container {status} before systemd came up: {_log_tail(name)}")
        # podman exec itself failing (no state printed) while the container says running: a stale container
        unreachable_since = (unreachable_since or time.monotonic()) if not state else None
        if unreachable_since is not None and time.monotonic() - unreachable_since > UNREACHABLE_S:
            raise PodmanError(f"{name}: cannot be entered for {UNREACHABLE_S} s although podman says {status}: "
                              f"{proc.stderr.strip()[-300:]}")
        time.sleep(1)
    raise PodmanError(f"{name}: systemd did not come up within {timeout:.0f} s (state {state or 'unknown'}, "
                      f"container {container_state(name) or 'gone'}): {_log_tail(name)}")


def _log_tail(name: str, lines: int = 8) -> str:
    """The last lines of a container's console log, on one line (what systemd printed before it stopped)."""
    proc = _run(["logs", "--tail", str(lines), name], check=False)
    text = " | ".join(line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip())
    return text[-600:] or "no log"


def recreate_container(h: HostSpec) -> str:
    """Remove a container that would not come up (made by an earlier run, its state stale) and make it anew."""
    _run(["rm", "-f", h.container])
    ensure_container(h)
    return "recreated (the earlier container did not come up)"


_AUTHORIZE = (
    'install -d -m 0700 /root/.ssh && f=/root/.ssh/authorized_keys && touch "$f" && chmod 0600 "$f" && '
    '{ grep -qxF "$1" "$f" || { printf "%s\\n" "$1" >> "$f"; echo added; }; }'
)


def authorize_key(name: str, public_key: str) -> bool:
    """Let `public_key` log in as root in the container. True when it was added (idempotent)."""
    proc = _run(["exec", name, "sh", "-c", _AUTHORIZE, "sh", public_key.strip()])
    return proc.stdout.strip() == "added"


def reachable(address: str, port: int = 22, timeout: float = 90) -> None:
    """Wait until `address:port` accepts a TCP connection from this host. A container remade with the address of
    an earlier one has a new MAC; the host's neighbour entry for the address is flushed first, else SSH times out
    until the stale entry expires."""
    subprocess.run(["ip", "neigh", "flush", "to", address], capture_output=True, check=False)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((address, port), timeout=3):
                return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise PodmanError(f"{address}:{port} does not accept connections after {timeout:.0f} s ({exc}); "
                                  "check `ip neigh show` and the container's sshd") from None
            time.sleep(1)


def ssh_host_key(name: str, timeout: float = 60) -> str:
    """The container's SSH host key (ed25519, `type base64`), once sshd runs with it."""
    deadline = time.monotonic() + timeout
    probe = "systemctl is-active --quiet ssh && cat /etc/ssh/ssh_host_ed25519_key.pub"
    while time.monotonic() < deadline:
        proc = _run(["exec", name, "sh", "-c", probe], check=False)
        parts = proc.stdout.split()
        if proc.returncode == 0 and len(parts) >= 2:
            return f"{parts[0]} {parts[1]}"
        time.sleep(1)
    raise PodmanError(
        f"{name}: sshd is not running with a host key after {timeout:.0f} s "
        f"(see: podman exec {name} journalctl -u ssh); rebuild the image with scripts/build-base-image.sh --force"
    )


def remove(kind: str, names: list[str]) -> None:
    if names:
        _run([kind, "rm", "-f", *names] if kind != "container" else ["rm", "-f", "-t", "5", *names])


def image_exists(image: str) -> bool:
    return _run(["image", "exists", image], check=False).returncode == 0
