"""One mover at a time per link (and per checkpoint root): an exclusive `flock` on a file in the state directory.

Lustre keeps `flock` coherent across clients when mounted with `flock` (the lustre_client role's option), so the
lock holds between pods and hosts that share the state directory, as on Kubernetes. The holder writes its host,
pid and start time into the file, so a mover that finds it busy can say who holds it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class LockBusy(RuntimeError):
    """Another mover holds the lock; the message names it and the fix."""


def _holder(f: int) -> str:
    try:
        return os.pread(f, 200, 0).decode("utf-8", "replace").strip() or "another mover"
    except OSError:
        return "another mover"


@contextmanager
def hold(path: Path, what: str, wait_s: float | None) -> Iterator[None]:
    """Hold `path` exclusively while the block runs. wait_s None waits as long as it takes; otherwise LockBusy
    after wait_s seconds (0: at once), naming the holder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, path, what, wait_s)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{socket.gethostname()} pid {os.getpid()} since {time.ctime()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, what: str, wait_s: float | None) -> None:
    if wait_s is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            raise LockBusy(
                f"{what} is being moved by {_holder(fd)} (lock {path}); fix: wait for that pass to end, or give "
                "--lock-wait SECONDS to wait for it"
            )
        time.sleep(min(0.5, max(0.01, deadline - time.monotonic())))
