"""A real SeaweedFS (master, volume, filer, S3) on loopback for the mover's tests; not a test double.

The binary is .tools/bin/weed (scripts/build-tools.sh), $KILN_WEED, or weed on PATH; without it the tests
skip and say why.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kiln.dataflow.lake import Credentials, client
from tests.dataflow.faulty_s3 import FaultyS3

ROOT = Path(__file__).resolve().parents[2]
RUNNING: dict[str, str] = {}  # the server's weed binary and filer address, for the filer-subscription tests
ACCESS, SECRET = "kiln", "mover-test-secret-1"  # the lab stack's access_key_id


def _weed() -> str | None:
    for cand in (os.environ.get("KILN_WEED"), str(ROOT / ".tools/bin/weed"), shutil.which("weed")):
        if cand and Path(cand).is_file():
            return cand
    return None


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports() -> list[int]:
    """Four ports, each with its +10000 gRPC twin free (SeaweedFS derives gRPC ports that way)."""
    base = 20000 + (os.getpid() * 7) % 9000
    out: list[int] = []
    p = base
    while len(out) < 4 and p < 30000:
        if _free(p) and _free(p + 10000):
            out.append(p)
        p += 1
    return out


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Credentials]:
    weed = _weed()
    if weed is None:
        pytest.skip("no SeaweedFS binary: build it with scripts/build-tools.sh or set KILN_WEED")
    d = tmp_path_factory.mktemp("weed")
    (d / "s3.json").write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "kiln",
                        "credentials": [{"accessKey": ACCESS, "secretKey": SECRET}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
        )
    )
    master, volume, filer, s3 = _ports()
    (d / "data").mkdir()
    log = open(d / "weed.log", "w")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        [
            weed,
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={d / 'data'}",
            f"-master.port={master}",
            f"-volume.port={volume}",
            "-filer",
            f"-filer.port={filer}",
            "-s3",
            f"-s3.port={s3}",
            f"-s3.config={d / 's3.json'}",
            "-master.volumeSizeLimitMB=64",
            "-volume.max=30",
            # A throwaway server: stop at once on SIGTERM instead of after the volume server's default 10 s
            # grace (-volume.preStopSeconds, SeaweedFS 3.39 weed/command/server.go).
            "-volume.preStopSeconds=0",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    creds = Credentials(f"http://127.0.0.1:{s3}", ACCESS, SECRET)
    RUNNING.update(weed=weed, filer=f"127.0.0.1:{filer}")
    s3c = client(creds)
    deadline = time.monotonic() + 90
    while True:
        try:
            s3c.create_bucket(Bucket="lake")
            break
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"SeaweedFS did not start: {(d / 'weed.log').read_text()[-2000:]}")
            time.sleep(1)
    yield creds
    # The data is thrown away: give weed a moment to stop, then kill it. Its volume server's graceful stop
    # waits for the open HTTP and gRPC connections (shutdown() in SeaweedFS 3.39 weed/command/volume.go),
    # which the filer keeps open: waiting longer only waited out the timeout.
    proc.terminate()
    try:
        proc.wait(3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def ensure_bucket(creds: Credentials, name: str) -> None:
    """The bucket, created unless an earlier test of the session made it."""
    s3 = client(creds)
    if name not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=name)


@pytest.fixture
def faulty(seaweedfs: Credentials) -> Iterator[tuple[FaultyS3, Credentials]]:
    """A fault-injecting proxy (TEST DOUBLE, tests/dataflow/faulty_s3.py) before the session's SeaweedFS, and
    credentials that go through it."""
    proxy = FaultyS3(seaweedfs.endpoint)
    yield proxy, dataclasses.replace(seaweedfs, endpoint=proxy.endpoint)
    proxy.stop()


@pytest.fixture
def weed_filer(seaweedfs: Credentials) -> tuple[str, str]:
    """(weed binary, filer host:port) of the running server."""
    return RUNNING["weed"], RUNNING["filer"]
