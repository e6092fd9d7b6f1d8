"""Reaching hosts: testinfra backends (podman://, ssh://, local://, docker://, ansible://) behind one small API.

A kiln inventory names each host's connection; `backend_spec` turns it into a testinfra host spec:
containers.podman.podman → podman://<ansible_host>, ssh (default) → ssh://[user@]<ansible_host>[:port],
local → local://, anything else → ansible://<host>?ansible_inventory=<hosts.yml> (testinfra runs it through
Ansible). `--backend 'ssh://root@{host}'` overrides the inventory for every host.

Every command runs under coreutils `timeout` on the host, so a hung tool cannot hang the suite.
"""

from __future__ import annotations

import base64
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kiln.verify.inventory import Inventory

DEFAULT_TIMEOUT_S = 900.0
# ssh exits 255 when it, not the remote command, failed; testinfra's ssh backend then raises RuntimeError with the
# result (testinfra/backend/ssh.py, SshBackend.run_ssh). A connection that never opened ran nothing, so it is
# tried again: a host that is booting (after a fence) answers within seconds of its network coming up. ssh names
# such a failure "ssh: connect to host H port P: <reason>" (refused, timed out, no route, unreachable), or fails
# the banner exchange ("kex_exchange_identification: ...", "Connection closed by H port P"); a session that opened
# and then broke ("Connection to H closed by remote host", "client_loop: ... Connection reset by peer") may have
# run the command and is not retried.
SSH_FAILED = 255
SSH_NOT_CONNECTED = ("ssh: connect to host ", "kex_exchange_identification", "connection closed by ")
SSH_CONNECT_TRIES = 6
SSH_CONNECT_RETRY_S = 5.0


@dataclass(frozen=True, slots=True)
class CommandResult:
    command: str
    rc: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def timed_out(self) -> bool:
        return self.rc in (124, 137)


class RemoteError(RuntimeError):
    """A command on a host failed in a way that stops the check (not a measured mismatch)."""


class Remote(Protocol):
    name: str
    spec: str

    def run(self, command: str, timeout: float | None = None) -> CommandResult: ...

    def put(self, local: Path, remote_path: str, mode: int = 0o755) -> None: ...

    def put_secret(self, local: Path, remote_path: str) -> None: ...


def backend_spec(host: str, hostvars: dict[str, Any], hosts_file: Path | None, template: str | None = None) -> str:
    """The testinfra host spec for one inventory host."""
    if template:
        return template.format(host=host, address=hostvars.get("ansible_host", host),
                               management_address=hostvars.get("kiln_management_address", host))
    conn = str(hostvars.get("ansible_connection", "ssh"))
    target = str(hostvars.get("ansible_host", host))
    if conn in ("containers.podman.podman", "podman"):
        return f"podman://{target}"
    if conn in ("community.docker.docker", "docker"):
        return f"docker://{target}"
    if conn == "local":
        return "local://"
    if conn in ("ssh", "smart", "paramiko", "paramiko_ssh"):
        user = hostvars.get("ansible_user")
        port = hostvars.get("ansible_port")
        return f"ssh://{user + '@' if user else ''}{target}{':' + str(port) if port else ''}"
    if hosts_file is None:
        raise ValueError(f"{host}: connection {conn!r} needs the inventory on disk (--inventory DIR)")
    return f"ansible://{host}?ansible_inventory={hosts_file}"


class TestinfraRemote:
    """One host through a testinfra backend."""

    __test__ = False  # not a pytest test class

    def __init__(self, name: str, spec: str, default_timeout: float = DEFAULT_TIMEOUT_S) -> None:
        import testinfra  # type: ignore[import-untyped]

        self.name = name
        self.spec = spec
        self.default_timeout = default_timeout
        self.host = testinfra.get_host(spec)

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        """The command's result; ssh's own failure is rc 255 with ssh's message, after retrying a connection that
        never opened (the command did not run, so running it again is safe)."""
        t = timeout or self.default_timeout
        wrapped = f"timeout -k 10 {int(t)} sh -c {shlex.quote(command)}"
        start = time.monotonic()
        for attempt in range(1, SSH_CONNECT_TRIES + 1):
            try:
                out = self.host.run(wrapped)
            except RuntimeError as exc:
                out = exc.args[0] if exc.args and hasattr(exc.args[0], "stderr_bytes") else None
                if out is None:
                    raise
            stderr = _text(out.stderr_bytes)
            if (int(out.rc) != SSH_FAILED or attempt == SSH_CONNECT_TRIES
                    or not any(m in stderr.lower() for m in SSH_NOT_CONNECTED)):
                break
            time.sleep(SSH_CONNECT_RETRY_S)
        return CommandResult(command, int(out.rc), _text(out.stdout_bytes), stderr, time.monotonic() - start)

    def put(self, local: Path, remote_path: str, mode: int = 0o755) -> None:
        backend = self.host.backend
        kind = getattr(backend, "NAME", "")
        parent = str(Path(remote_path).parent)
        self._must(f"mkdir -p {shlex.quote(parent)}")
        if kind in ("podman", "docker"):
            _local([kind, "cp", str(local), f"{backend.name}:{remote_path}"])
        elif kind == "local":
            shutil.copyfile(local, remote_path)
        elif kind == "ssh":
            h = backend.host
            dest = f"{h.user + '@' if h.user else ''}{h.name}:{remote_path}"
            opts = ["-P", str(h.port)] if h.port else []
            if getattr(backend, "ssh_config", None):  # the same config, key and known_hosts as the commands
                opts += ["-F", str(backend.ssh_config)]
            if getattr(backend, "ssh_identity_file", None):
                opts += ["-i", str(backend.ssh_identity_file)]
            _local(["scp", "-q", *opts, str(local), dest])
        else:
            self._put_chunked(local, remote_path)
        self._must(f"chmod {mode:o} {shlex.quote(remote_path)}")

    def put_secret(self, local: Path, remote_path: str) -> None:
        """Copy a secret file (mode 0600) by file transfer only: its content never appears in an argv.

        podman/docker cp, scp and a local copy move bytes, not arguments; the chunked fallback would put the
        content on `printf`'s command line, so backends without a file transfer are refused.
        """
        kind = getattr(self.host.backend, "NAME", "")
        if kind not in ("podman", "docker", "local", "ssh"):
            raise RemoteError(f"{self.name}: backend {kind or self.spec!r} has no file transfer; a secret would "
                              "have to travel on a command line. Use an ssh:// or podman:// backend (--backend).")
        self.put(local, remote_path, 0o600)

    def _put_chunked(self, local: Path, remote_path: str) -> None:
        data = local.read_bytes()
        tmp = shlex.quote(remote_path + ".part")
        self._must(f": > {tmp}")
        step = 64 * 1024  # stays under the kernel's per-argument limit (MAX_ARG_STRLEN 128 KiB) once encoded
        for i in range(0, len(data), step):
            chunk = base64.b64encode(data[i:i + step]).decode()
            self._must(f"printf %s {chunk} | base64 -d >> {tmp}")
        self._must(f"mv {tmp} {shlex.quote(remote_path)}")

    def _must(self, command: str) -> CommandResult:
        r = self.run(command, timeout=120)
        if not r.ok:
            raise RemoteError(f"{self.name}: `{command[:120]}` failed (rc {r.rc}): {r.stderr.strip()[-300:]}")
        return r


def _text(b: bytes | str) -> str:
    return b if isinstance(b, str) else b.decode("utf-8", errors="replace")


def _local(argv: list[str]) -> None:
    p = subprocess.run(argv, capture_output=True, text=True, check=False)
    if p.returncode:
        raise RemoteError(f"`{' '.join(argv)}` failed (rc {p.returncode}): {p.stderr.strip()[-300:]}")


def build_remotes(inventory: Inventory, hosts: list[str], template: str | None = None,
                  default_timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, Remote]:
    out: dict[str, Remote] = {}
    for h in hosts:
        spec = backend_spec(h, inventory.vars(h), inventory.hosts_file, template)
        out[h] = TestinfraRemote(h, spec, default_timeout)
    return out
