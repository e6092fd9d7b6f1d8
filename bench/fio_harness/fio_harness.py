#!/usr/bin/env python3
"""Does the acceptance suite's fio check measure the disk, or the container around it?

Runs kiln's `storage.fio_local_<op>` check (kiln/verify/checks/storage.py: its job file, pushed through
testinfra's podman backend, parsed by kiln.verify.parsers) inside a podman systemd host whose local-NVMe
directory is a bind mount of a directory on this machine, and fio directly on this machine against that same
directory with the same job (only `directory=` differs: the container path vs the host path). Rounds
alternate the order (suite→direct, direct→suite, …) after one discarded warm-up round; the ratio of medians
suite ÷ direct should be ≥ 0.9.

    .venv/bin/python bench/fio_harness/fio_harness.py --rounds 6 --size 1G --jobs 4 --runtime 20

Needs root, podman, localhost/kiln-node:bookworm (scripts/build-base-image.sh) and fio on this machine. The
container is kiln-verify-test-fio-harness; it and the data directory are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kiln.lustre.lustre_common import parse_size  # noqa: E402
from kiln.plan import build_plan  # noqa: E402
from kiln.render.inventory import render_inventory  # noqa: E402
from kiln.spec import load_stack  # noqa: E402
from kiln.spec.models import Acceptance  # noqa: E402
from kiln.verify.checks import REGISTRY  # noqa: E402
from kiln.verify.checks.check import Rep, Subject  # noqa: E402
from kiln.verify.checks.context import Context  # noqa: E402
from kiln.verify.checks.options import Options  # noqa: E402
from kiln.verify.checks.storage import FioVariables, StorageVariables  # noqa: E402
from kiln.verify.fiojob import FioJobSpec  # noqa: E402
from kiln.verify.hosts import TestinfraRemote  # noqa: E402
from kiln.verify.inventory import inventory_from_files  # noqa: E402
from kiln.verify.parsers import parse_fio  # noqa: E402

CONTAINER = "kiln-verify-test-fio-harness"
IMAGE = "localhost/kiln-node:bookworm"
IN_CONTAINER = "/mnt/local-nvme"


def sh(args: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and p.returncode:
        raise SystemExit(f"{' '.join(args)} failed: {p.stderr.strip()[-500:]}")
    return p


def start_container(data: Path) -> None:
    sh(["podman", "rm", "-f", "-t", "2", CONTAINER], check=False)
    sh(["podman", "run", "-d", "--name", CONTAINER, "--hostname", "gpu001", "--systemd=always",
        "-v", f"{data}:{IN_CONTAINER}", IMAGE, "/sbin/init"])
    for _ in range(120):
        if sh(["podman", "exec", CONTAINER, "systemctl", "is-system-running"], check=False).stdout.strip() in (
                "running", "degraded"):
            break
        time.sleep(0.5)
    r = sh(["podman", "exec", CONTAINER, "bash", "-c", "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq "
            "&& apt-get install -y -qq --no-install-recommends fio >/dev/null"], check=False)
    if r.returncode:
        raise SystemExit(f"installing fio in the container failed: {r.stderr[-400:]}")


def fio_version_in_container() -> str:
    return sh(["podman", "exec", CONTAINER, "fio", "--version"]).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6, help="measured rounds per op (default 6)")
    ap.add_argument("--size", default="1G", help="size per job (default 1G)")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--runtime", type=int, default=20, help="fio runtime cap per run, s")
    ap.add_argument("--iodepth", type=int, default=16)
    ap.add_argument("--ops", default="write,read")
    ap.add_argument("--dir", default="/var/tmp", help="parent of the data directory on this machine's disk")
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args()
    if shutil.which("fio") is None or shutil.which("podman") is None:
        raise SystemExit("needs fio and podman on this machine (scripts/host-prereqs.sh)")

    data = Path(tempfile.mkdtemp(prefix="kiln-verify-test-fio-harness.", dir=a.dir))
    spec = load_stack("lab")
    plan = build_plan(spec, source="lab")
    inv = inventory_from_files(render_inventory(plan), "fio harness")
    opts = Options(workdir="/tmp/kiln-verify", variables=(
        StorageVariables(local_nvme_path=IN_CONTAINER),
        FioVariables(jobs=a.jobs, runtime_s=a.runtime, iodepth=a.iodepth, size_per_job=a.size)))
    out: dict[str, object] = {"command": " ".join(sys.argv), "machine": platform.node(),
                              "fio_host": sh(["fio", "--version"]).stdout.strip(), "rounds": a.rounds,
                              "size_per_job": a.size, "jobs": a.jobs, "runtime_s": a.runtime, "ops": {}}
    try:
        start_container(data)
        out["fio_container"] = fio_version_in_container()
        remote = TestinfraRemote("gpu001", f"podman://{CONTAINER}")
        ctx = Context(plan, Acceptance(fio_size_factor=0), inv, {"gpu001": remote}, opts)
        subject = Subject("gpu001", ("gpu001",))
        for op in a.ops.split(","):
            check = REGISTRY[f"storage.fio_local_{op}"]
            target = next(t for t in plan.targets if t.check == check.id)
            check.prepare(ctx, target, subject)

            def suite_run(i: int, check=check, target=target) -> float:  # type: ignore[no-untyped-def]
                return check.measure(ctx, target, subject, Rep(i, a.rounds, False)).value

            def direct_run(op: str = op) -> float:
                job = FioJobSpec(op, str(data / "kiln-verify"), parse_size(a.size), a.jobs, a.runtime, "1M",
                                 a.iodepth)
                jf = data / f"direct-{op}.fio"
                jf.write_text(job.text())
                p = subprocess.run(["fio", "--output-format=json", str(jf)], capture_output=True, text=True,
                                   check=False)
                return parse_fio(p.stdout, p.stderr).aggregate_Bps(op) / 1e9

            suite_run(0)
            direct_run()  # warm-up round, discarded (also lays the read files out)
            suite: list[float] = []
            direct: list[float] = []
            for i in range(a.rounds):
                if i % 2 == 0:
                    suite.append(suite_run(i + 1))
                    direct.append(direct_run())
                else:
                    direct.append(direct_run())
                    suite.append(suite_run(i + 1))
                print(f"{op} round {i + 1}/{a.rounds}: suite {suite[-1]:.3f} GB/s, direct {direct[-1]:.3f} GB/s",
                      flush=True)
            check.cleanup(ctx, target, subject)
            ratio = statistics.median(suite) / statistics.median(direct)
            out["ops"][op] = {"suite_GBps": [round(x, 4) for x in suite],  # type: ignore[index]
                              "direct_GBps": [round(x, 4) for x in direct],
                              "suite_median": round(statistics.median(suite), 4),
                              "direct_median": round(statistics.median(direct), 4), "ratio": round(ratio, 3),
                              "meets_0.9": ratio >= 0.9}
            print(f"{op}: median suite {statistics.median(suite):.3f} GB/s / direct "
                  f"{statistics.median(direct):.3f} GB/s = ratio {ratio:.3f} ({'≥' if ratio >= 0.9 else '<'} 0.9)")
    finally:
        sh(["podman", "rm", "-f", "-t", "2", CONTAINER], check=False)
        shutil.rmtree(data, ignore_errors=True)
    text = json.dumps(out, indent=2)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n")
    return 0 if all(v["meets_0.9"] for v in out["ops"].values()) else 1  # type: ignore[attr-defined]


if __name__ == "__main__":
    raise SystemExit(main())
