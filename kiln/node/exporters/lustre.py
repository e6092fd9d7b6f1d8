"""kiln's Lustre exporter: target state, space and inodes, RPC and bulk rates, job stats and LNet, for
Prometheus (port 9169 by default: kiln/knowledge/ports.yaml metrics.lustre; the role copies this file on its own).

Reads what a Lustre 2.15 server or client publishes; the formats are those of lustre-release v2_15_8:

- /sys/fs/lustre/health_check: "healthy" or "NOT HEALTHY" (lustre/obdclass/obd_sysfs.c, health_check_show).
- /sys/fs/lustre/osd-{ldiskfs,zfs}/<target>/{kbytestotal,kbytesfree,kbytesavail,filestotal,filesfree}: one
  number each (lustre/obdclass/dt_object.c, kbytestotal_show and friends).
- /proc/fs/lustre/{obdfilter,mdt}/<target>/recovery_status: "status: <STATE>" first
  (lustre/obdclass/lprocfs_status_server.c, lprocfs_recovery_status_seq_show).
- .../stats, md_stats and llite/<fs>-<id>/stats: "snapshot_time ... secs.nsecs" then one line per counter,
  "<name> <count> samples [<unit>] [<min> <max> <sum> [<sumsq>]]" (lustre/obdclass/lprocfs_status.c,
  lprocfs_stats_seq_show); ofd names its bulk counters read_bytes and write_bytes (lustre/ofd/lproc_ofd.c).
- .../job_stats: YAML, "job_stats:" then one "- job_id:" item per job with "<op>: { samples: N, unit: U,
  min: .., max: .., sum: .. }" (lustre/obdclass/lprocfs_jobstats.c, lprocfs_jobstats_seq_show); read as text,
  without YAML's typing of scalars.
- `lnetctl net show -v` and `lnetctl stats show`: YAML, "net:" of "net type" items with "local NI(s)"
  (nid, status up/down, statistics) and "statistics:" of global counters
  (lnet/utils/lnetconfig/liblnetconfig.c, lustre_lnet_show_net and lustre_lnet_show_stats).

On a host without Lustre it serves lustre_exporter_applicable 0 with the reason and says so on start.
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

log = logging.getLogger("kiln.node.exporters.lustre")

DEFAULT_PORT = 9169
TARGET_RE = re.compile(r"^(?P<fs>[A-Za-z0-9_]{1,8})-(?P<kind>OST|MDT)[0-9a-f]{4}$")
RECOVERY_STATES = ("COMPLETE", "RECOVERING", "WAITING", "WAITING_FOR_CLIENTS", "INACTIVE")

#: Runs `lnetctl <args>` and returns its stdout, or None when lnetctl is absent or fails.
LnetctlRunner = Callable[[list[str]], str | None]


@dataclass(frozen=True, slots=True)
class Counter:
    """One line of an lprocfs stats file."""

    name: str
    samples: int
    unit: str
    sum: int | None  # None where the counter keeps no min/max/sum


def parse_stats(text: str) -> dict[str, Counter]:
    """An lprocfs stats file (lprocfs_stats_seq_show) → counters by name; header lines are skipped."""
    out: dict[str, Counter] = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+(\d+) samples \[([^\]]*)\](?:\s+(-?\d+)\s+(-?\d+)\s+(-?\d+))?", line)
        if m:
            out[m.group(1)] = Counter(m.group(1), int(m.group(2)), m.group(3),
                                      int(m.group(6)) if m.group(6) is not None else None)
    return out


def parse_job_stats(text: str) -> dict[str, dict[str, dict[str, str]]]:
    """A job_stats file → {job_id: {op: {samples, unit, sum, ...}}}, every value the text Lustre printed.

    Read with YAML's base loader, which resolves no types: Lustre prints a job id unquoted when it has only
    letters, digits and ". @ - _" (v2_15_8 lustre/obdclass/lprocfs_jobstats.c, lprocfs_jobstats_seq_show), and
    YAML 1.1 typing would turn the job id 1234.10 into 1234.1 and 0123 into 83.
    """
    doc = yaml.load(text, Loader=yaml.BaseLoader) or {}  # builds only str, list and dict: safe on any input
    out: dict[str, dict[str, dict[str, str]]] = {}
    for job in doc.get("job_stats") or []:
        ops = {k: v for k, v in job.items() if isinstance(v, dict)}
        out[str(job["job_id"])] = ops
    return out


def parse_recovery_status(text: str) -> str | None:
    m = re.search(r"^status:\s*(\S+)", text, re.MULTILINE)
    return m.group(1) if m else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _number(path: Path) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def run_lnetctl(args: list[str]) -> str | None:
    exe = shutil.which("lnetctl")
    if exe is None:
        return None
    try:
        res = subprocess.run([exe, *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("lnetctl %s: %s", " ".join(args), exc)
        return None
    return res.stdout if res.returncode == 0 else None


class LustreCollector(Collector):
    """Collects on every scrape from the files under `root` (/ on a host; a fixture tree in tests)."""

    def __init__(self, root: Path = Path("/"), lnetctl: LnetctlRunner = run_lnetctl) -> None:
        self.root = root
        self.lnetctl = lnetctl

    @property
    def sys(self) -> Path:
        return self.root / "sys/fs/lustre"

    @property
    def proc(self) -> Path:
        return self.root / "proc/fs/lustre"

    def not_applicable(self) -> str | None:
        """Why this host has nothing to export, or None."""
        if not self.sys.is_dir() and not self.proc.is_dir():
            return f"no Lustre modules loaded ({self.sys} and {self.proc} are absent)"
        return None

    def targets(self) -> Iterator[tuple[str, str, str, Path]]:
        """(target, kind, osd, sysfs dir) of every target mounted on this host."""
        for osd_dir in sorted(self.sys.glob("osd-*")):
            for tdir in sorted(p for p in osd_dir.iterdir() if p.is_dir()):
                m = TARGET_RE.match(tdir.name)
                if m:
                    yield tdir.name, m.group("kind").lower(), osd_dir.name.removeprefix("osd-"), tdir

    def collect(self) -> Iterable[Metric]:
        reason = self.not_applicable()
        app = GaugeMetricFamily("lustre_exporter_applicable", "1 where this host has Lustre to export",
                                labels=["reason"])
        app.add_metric([reason or ""], 0 if reason else 1)
        yield app
        if reason:
            return
        yield from self._health()
        yield from self._targets()
        yield from self._stats()
        yield from self._clients()
        yield from self._lnet()

    def _health(self) -> Iterator[Metric]:
        text = _read(self.sys / "health_check")
        if text is not None:
            g = GaugeMetricFamily("lustre_health_healthy", "1 when /sys/fs/lustre/health_check says healthy")
            g.add_metric([], 1 if text.strip() == "healthy" else 0)
            yield g

    def _targets(self) -> Iterator[Metric]:
        labels = ["target", "kind", "fsname"]
        info = GaugeMetricFamily("lustre_target_info", "A Lustre target mounted on this host", labels=[*labels, "osd"])
        fams = {
            f: GaugeMetricFamily(name, helptext, labels=labels)
            for f, name, helptext in (
                ("kbytestotal", "lustre_target_capacity_bytes", "Target size in bytes"),
                ("kbytesfree", "lustre_target_free_bytes", "Free bytes on the target"),
                ("kbytesavail", "lustre_target_available_bytes", "Bytes available to non-root users"),
                ("filestotal", "lustre_target_files", "Inodes (objects) the target can hold"),
                ("filesfree", "lustre_target_files_free", "Free inodes"),
            )
        }
        recovery = GaugeMetricFamily("lustre_target_recovery_status", "1 for the target's recovery state",
                                     labels=["target", "status"])
        for name, kind, osd, tdir in self.targets():
            fs = name.split("-", 1)[0]
            info.add_metric([name, kind, fs, osd], 1)
            for f, fam in fams.items():
                v = _number(tdir / f)
                if v is not None:
                    fam.add_metric([name, kind, fs], v * 1024 if f.startswith("kbytes") else v)
            status = parse_recovery_status(_read(self._proc_dir(kind, name) / "recovery_status") or "")
            if status:
                recovery.add_metric([name, status], 1)
        yield info
        yield from fams.values()
        yield recovery

    def _proc_dir(self, kind: str, target: str) -> Path:
        return self.proc / ("obdfilter" if kind == "ost" else "mdt") / target

    def _stats(self) -> Iterator[Metric]:
        rd = CounterMetricFamily("lustre_target_read_bytes", "Bytes read from the target", labels=["target", "kind"])
        wr = CounterMetricFamily("lustre_target_write_bytes", "Bytes written", labels=["target", "kind"])
        ops = CounterMetricFamily("lustre_target_ops", "Requests served, by operation",
                                  labels=["target", "kind", "op"])
        jrd = CounterMetricFamily("lustre_job_read_bytes", "Bytes read per job", labels=["target", "job_id"])
        jwr = CounterMetricFamily("lustre_job_write_bytes", "Bytes written per job", labels=["target", "job_id"])
        jops = CounterMetricFamily("lustre_job_ops", "Requests per job and operation",
                                   labels=["target", "job_id", "op"])
        for name, kind, _, _ in self.targets():
            d = self._proc_dir(kind, name)
            counters = parse_stats(_read(d / ("stats" if kind == "ost" else "md_stats")) or "")
            for c in counters.values():
                if c.name == "read_bytes" and c.sum is not None:
                    rd.add_metric([name, kind], c.sum)
                elif c.name == "write_bytes" and c.sum is not None:
                    wr.add_metric([name, kind], c.sum)
                else:
                    ops.add_metric([name, kind, c.name], c.samples)
            for job, jstats in parse_job_stats(_read(d / "job_stats") or "").items():
                for op, v in jstats.items():
                    total = int(v.get("sum", 0))
                    if op in ("read_bytes", "read") and v.get("unit") == "bytes":
                        jrd.add_metric([name, job], total)
                    elif op in ("write_bytes", "write") and v.get("unit") == "bytes":
                        jwr.add_metric([name, job], total)
                    else:
                        jops.add_metric([name, job, op], int(v.get("samples", 0)))
        yield from (rd, wr, ops, jrd, jwr, jops)

    def _clients(self) -> Iterator[Metric]:
        rd = CounterMetricFamily("lustre_client_read_bytes", "Bytes read through this client mount",
                                 labels=["fsname", "instance_id"])
        wr = CounterMetricFamily("lustre_client_write_bytes", "Bytes written", labels=["fsname", "instance_id"])
        for d in sorted((self.proc / "llite").glob("*-*")):
            fs, _, inst = d.name.partition("-")
            counters = parse_stats(_read(d / "stats") or "")
            for c, fam in (("read_bytes", rd), ("write_bytes", wr)):
                s = counters.get(c)
                if s is not None and s.sum is not None:
                    fam.add_metric([fs, inst], s.sum)
        yield rd
        yield wr

    def _lnet(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("lustre_lnet_ni_up", "1 when lnetctl reports the NI up", labels=["net", "nid"])
        health = GaugeMetricFamily("lustre_lnet_ni_health_value", "LNet health value of the NI (1000 = healthy)",
                                   labels=["net", "nid"])
        ni_counts = {
            k: CounterMetricFamily(f"lustre_lnet_ni_{k}", f"LNet {k.replace('_', ' ')} on the NI",
                                   labels=["net", "nid"])
            for k in ("send_count", "recv_count", "drop_count")
        }
        net = yaml.safe_load(self.lnetctl(["net", "show", "-v"]) or "") or {}
        for n in net.get("net") or []:
            for ni in n.get("local NI(s)") or []:
                key = [str(n.get("net type")), str(ni.get("nid"))]
                up.add_metric(key, 1 if ni.get("status") == "up" else 0)
                for k, fam in ni_counts.items():
                    v = (ni.get("statistics") or {}).get(k)
                    if isinstance(v, int):
                        fam.add_metric(key, v)
                hv = (ni.get("health stats") or {}).get("health value")
                if isinstance(hv, int):
                    health.add_metric(key, hv)
        yield up
        yield health
        yield from ni_counts.values()
        stats = (yaml.safe_load(self.lnetctl(["stats", "show"]) or "") or {}).get("statistics") or {}
        for k in ("send_count", "recv_count", "drop_count", "errors", "resend_count"):
            if isinstance(stats.get(k), int):
                c = CounterMetricFamily(f"lustre_lnet_{k}", f"LNet {k.replace('_', ' ')} (lnetctl stats show)")
                c.add_metric([], stats[k])
                yield c


def registry(collector: LustreCollector) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg


def main(argv: list[str] | None = None) -> int:
    from prometheus_client import generate_latest, start_http_server

    p = argparse.ArgumentParser(prog="kiln-lustre-exporter", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"listen port (default {DEFAULT_PORT})")
    p.add_argument("--address", default="0.0.0.0", help="listen address (default all)")
    p.add_argument("--root", default="/", help="filesystem root to read /proc and /sys under (default /)")
    p.add_argument("--once", action="store_true", help="print the metrics once and exit")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="kiln-lustre-exporter: %(message)s")
    collector = LustreCollector(Path(args.root))
    reason = collector.not_applicable()
    if reason:
        print(f"kiln-lustre-exporter: NOT APPLICABLE on this host: {reason}", file=sys.stderr)
    reg = registry(collector)
    if args.once:
        sys.stdout.write(generate_latest(reg).decode())
        return 0
    start_http_server(args.port, addr=args.address, registry=reg)
    log.info("serving on %s:%d", args.address, args.port)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    raise SystemExit(main())
