"""Pure parsers for the benchmark and inspection tools the acceptance checks run.

Every parser takes the tool's stdout (and stderr where the tool reports errors there) and returns a typed,
frozen result in base units (bytes/s, bits/s, ops/s), or raises ParseError saying what was wrong: no output,
the tool's own error text, a missing table or a non-numeric field. Units: GB/s = 10^9 bytes/s,
MiB = 2^20 bytes. Formats and their sources are listed in docs/acceptance.md. Lustre's own formats (lfs getstripe,
lctl get_param, NIDs, sizes, parameter values) are parsed and compared by kiln.lustre, the library the Ansible
modules use too (docs/architecture.md, "Lustre library").
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from kiln.lustre.lustre_common import normalize_lnet_net, normalize_nid

MIB = 1 << 20
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


class ParseError(ValueError):
    """Tool output could not be turned into a measurement; the message says why and shows an excerpt."""

    def __init__(self, tool: str, message: str, excerpt: str = "") -> None:
        self.tool = tool
        self.reason = message
        self.excerpt = excerpt.strip()[-600:]
        text = f"{tool}: {message}"
        if self.excerpt:
            text += f"\n--- output (tail) ---\n{self.excerpt}"
        super().__init__(text)


def _strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _num(tool: str, value: Any, what: str, excerpt: str = "") -> float:
    """A finite float, or ParseError naming the field."""
    if isinstance(value, bool):
        raise ParseError(tool, f"{what} is not a number: {value!r}", excerpt)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ParseError(tool, f"{what} is not a number: {value!r}", excerpt) from None
    if math.isnan(x) or math.isinf(x):
        raise ParseError(tool, f"{what} is not a finite number: {value!r}", excerpt)
    return x


def _obj(tool: str, value: Any, what: str, excerpt: str = "") -> dict[str, Any]:
    """A JSON object, or ParseError naming the field (malformed JSON never becomes an AttributeError)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParseError(tool, f"{what} is not a JSON object: {str(value)[:80]!r}", excerpt)
    return value


def _list(tool: str, value: Any, what: str, excerpt: str = "") -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(tool, f"{what} is not a JSON list: {str(value)[:80]!r}", excerpt)
    return value


def _version_tuple(text: str) -> tuple[int, ...]:
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(x) for x in m.groups() if x is not None) if m else ()


def _require_output(tool: str, stdout: str, stderr: str) -> None:
    if not stdout.strip():
        err = stderr.strip()
        raise ParseError(tool, "no output" + (f"; the tool said: {err.splitlines()[-1].strip()}" if err else ""), err)


def _json_object_after(tool: str, text: str, must_have: str) -> dict[str, Any]:
    """The first top-level JSON object in `text` that has key `must_have` (tools print notes around it)."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"(?m)^\s*\{", text):
        try:
            obj, _ = decoder.raw_decode(text, m.end() - 1)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and must_have in obj:
            return obj
    raise ParseError(tool, f"no JSON object with {must_have!r} in the output", text)


# --------------------------------------------------------------------------------------------------- fio


@dataclass(frozen=True, slots=True)
class FioJob:
    name: str
    error: int
    read_bytes: int
    write_bytes: int
    read_bw_Bps: float  # fio's own per-job figure (bw_bytes)
    write_bw_Bps: float
    read_runtime_ms: float
    write_runtime_ms: float


@dataclass(frozen=True, slots=True)
class FioResult:
    version: str
    jobs: tuple[FioJob, ...]

    def aggregate_Bps(self, op: str) -> float:
        """All jobs together: bytes moved ÷ the longest job's runtime (what fio's group_reporting reports)."""
        if op not in ("read", "write"):
            raise ValueError(op)
        total = sum(j.read_bytes if op == "read" else j.write_bytes for j in self.jobs)
        runtime = max((j.read_runtime_ms if op == "read" else j.write_runtime_ms) for j in self.jobs)
        if total <= 0 or runtime <= 0:
            raise ParseError("fio", f"no {op} I/O was done (bytes {total}, runtime {runtime} ms)")
        return total / (runtime / 1000.0)

    def per_job_Bps(self, op: str) -> tuple[float, ...]:
        return tuple(j.read_bw_Bps if op == "read" else j.write_bw_Bps for j in self.jobs)


# fio 2.x wrote io_bytes in KiB and had no bw_bytes (stat.c show_ddir_status_json: `io_bytes >> 10`);
# fio 3.0 writes io_bytes in bytes and adds io_kbytes and bw_bytes.
FIO_SUPPORTED = "fio 2.x and 3.x"


def parse_fio(stdout: str, stderr: str = "") -> FioResult:
    """fio --output-format=json. Notes fio prints before the JSON are skipped; a job error or a signal raises."""
    _require_output("fio", stdout, stderr)
    both = stdout + "\n" + stderr
    sig = re.search(r"^fio: terminating on signal (\d+)", both, re.M)
    if sig:  # fio still prints JSON with error 0 for the part it ran: not a measurement
        raise ParseError("fio", f"the run was interrupted by signal {sig.group(1)} (fio: terminating on signal)",
                         both)
    data = _json_object_after("fio", stdout, "jobs")
    version = str(data.get("fio version", ""))
    major = (_version_tuple(version) or (0,))[0]
    if major not in (2, 3):
        raise ParseError("fio", f"unsupported fio version {version or '(none in the JSON)'}; supported: "
                                f"{FIO_SUPPORTED}")
    jobs_raw = _list("fio", data.get("jobs"), "jobs", stdout)
    if not jobs_raw:
        raise ParseError("fio", "the JSON has no jobs", stdout)
    jobs: list[FioJob] = []
    for j in jobs_raw:
        j = _obj("fio", j, "a jobs[] entry", stdout)
        name = str(j.get("jobname", "?"))
        rd = _obj("fio", j.get("read"), f"job {name} read", stdout)
        wr = _obj("fio", j.get("write"), f"job {name} write", stdout)
        jobs.append(FioJob(
            name=name,
            error=int(_num("fio", j.get("error", 0), f"job {name} error")),
            read_bytes=_fio_bytes(rd, major, f"job {name} read"),
            write_bytes=_fio_bytes(wr, major, f"job {name} write"),
            read_bw_Bps=_fio_bw(rd, major, f"job {name} read"),
            write_bw_Bps=_fio_bw(wr, major, f"job {name} write"),
            read_runtime_ms=_num("fio", rd.get("runtime", 0), f"job {name} read.runtime"),
            write_runtime_ms=_num("fio", wr.get("runtime", 0), f"job {name} write.runtime"),
        ))
    failed = [j for j in jobs if j.error]
    if failed:
        notes = "\n".join(line for line in both.splitlines() if line.startswith("fio:"))
        errs = ", ".join(f"{j.name}: errno {j.error} ({_errno_name(j.error)})" for j in failed)
        raise ParseError("fio", f"job error: {errs}", notes)
    return FioResult(version=version, jobs=tuple(jobs))


def _fio_bytes(d: dict[str, Any], major: int, what: str) -> int:
    if major >= 3:
        return int(_num("fio", d.get("io_bytes", 0), f"{what}.io_bytes"))
    return int(_num("fio", d.get("io_bytes", 0), f"{what}.io_bytes (KiB)")) * 1024


def _fio_bw(d: dict[str, Any], major: int, what: str) -> float:
    if major >= 3:
        return _num("fio", d.get("bw_bytes", 0), f"{what}.bw_bytes")
    return _num("fio", d.get("bw", 0), f"{what}.bw (KiB/s)") * 1024


def _errno_name(code: int) -> str:
    import os

    try:
        return os.strerror(code)
    except ValueError:
        return "unknown"


# ------------------------------------------------------------------------------------------------ iperf3


@dataclass(frozen=True, slots=True)
class Iperf3Result:
    version: str
    received_bps: float  # end.sum_received.bits_per_second
    sent_bps: float
    retransmits: int
    streams: int
    seconds: float


IPERF3_SUPPORTED = "iperf3 3.x"
IPERF3_MIN_FRACTION = 0.9  # a run shorter than 90 % of the requested -t was cut short


def parse_iperf3(stdout: str, stderr: str = "") -> Iperf3Result:
    """iperf3 -J (client side). A run cut short or one whose receiver got nothing is not a measurement."""
    _require_output("iperf3", stdout, stderr)
    data = _json_object_after("iperf3", stdout, "start")
    if data.get("error"):
        raise ParseError("iperf3", f"the tool reported: {data['error']}")
    start = _obj("iperf3", data.get("start"), "start", stdout)
    version = str(start.get("version", ""))
    if (_version_tuple(version) or (0,))[0] != 3:
        raise ParseError("iperf3", f"unsupported iperf3 version {version or '(none in the JSON)'}; "
                                   f"supported: {IPERF3_SUPPORTED}")
    end = _obj("iperf3", data.get("end"), "end", stdout)
    recv, sent = end.get("sum_received"), end.get("sum_sent")
    if not isinstance(recv, dict) or not isinstance(sent, dict):
        raise ParseError("iperf3", "no end.sum_received/sum_sent (UDP test or an interrupted run?)", stdout[-400:])
    test = _obj("iperf3", start.get("test_start"), "start.test_start", stdout)
    received_bytes = _num("iperf3", recv.get("bytes", 0), "end.sum_received.bytes")
    if received_bytes <= 0:
        raise ParseError("iperf3", "the receiver got 0 bytes (end.sum_received.bytes = 0)")
    seconds = _num("iperf3", recv.get("seconds", 0), "end.sum_received.seconds")
    duration = _num("iperf3", test.get("duration", 0), "start.test_start.duration")
    if duration > 0 and seconds < IPERF3_MIN_FRACTION * duration:
        raise ParseError("iperf3", f"the run was cut short: {seconds:.2f} s of the requested {duration:g} s")
    return Iperf3Result(
        version=version,
        received_bps=_num("iperf3", recv.get("bits_per_second"), "end.sum_received.bits_per_second"),
        sent_bps=_num("iperf3", sent.get("bits_per_second"), "end.sum_sent.bits_per_second"),
        retransmits=int(_num("iperf3", sent.get("retransmits", 0), "end.sum_sent.retransmits")),
        streams=int(_num("iperf3", test.get("num_streams", len(_list("iperf3", end.get("streams"), "end.streams"))),
                         "num_streams")),
        seconds=seconds,
    )


# -------------------------------------------------------------------------------------------------- warp


@dataclass(frozen=True, slots=True)
class WarpOp:
    op: str  # GET, PUT, DELETE, STAT
    bytes_per_s: float
    ops_per_s: float
    requests: int
    errors: int
    concurrency: int
    hosts: int
    skipped: bool


@dataclass(frozen=True, slots=True)
class WarpResult:
    ops: tuple[WarpOp, ...]

    def op(self, name: str) -> WarpOp:
        """The measured operation; any failed request makes the figure unusable (it would count fast failures)."""
        for o in self.ops:
            if o.op == name.upper() and not o.skipped:
                if o.errors:
                    raise ParseError("warp", f"{o.errors} of {o.requests} {o.op} requests failed")
                return o
        have = ", ".join(f"{o.op}{' (skipped: too few samples)' if o.skipped else ''}" for o in self.ops) or "none"
        why = ""
        if any(o.op == name.upper() and o.skipped for o in self.ops):
            why = ("; warp analyses only the time in which every stream was busy, and that window held fewer than two "
                   "analysis segments: the run was too short for the gateway's pace (objectstore.warp.duration_s)")
        raise ParseError("warp", f"no measured {name.upper()} operation in the analysis (have: {have}){why}")


    def skipped(self, name: str) -> WarpOp | None:
        """The operation when warp's analysis skipped it (and measured no other run of it), else None."""
        if any(o.op == name.upper() and not o.skipped for o in self.ops):
            return None
        return next((o for o in self.ops if o.op == name.upper() and o.skipped), None)


@dataclass(frozen=True, slots=True)
class WarpTotal:
    """A warp run's total from its per-operation record (--benchdata): what the run moved, start to end."""

    op: str
    requests: int
    errors: int
    streams: int  # threads that recorded an operation
    bytes: int  # of the successful requests
    seconds: float  # from the first request's start to the last one's end

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds


_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def _rfc3339(text: str) -> float:
    """Go's RFC3339Nano as epoch seconds (Python's fromisoformat stops at microseconds)."""
    m = _RFC3339.match(text.strip())
    if not m:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    whole = dt.datetime.fromisoformat(m.group(1) + zone).timestamp()
    return whole + float(f"0.{m.group(2) or '0'}")


def parse_warp_ops(text: str, op: str) -> WarpTotal:
    """warp v1.0's per-operation record (`zstd -dc <benchdata>.csv.zst`: tab-separated, pkg/bench/ops.go
    Operations.CSV): the total of operation `op` over the whole run."""
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    if not lines or not lines[0].startswith("idx\tthread\top"):
        raise ParseError("warp", "no per-operation record (the header idx, thread, op, ... is missing)", text)
    rows = list(csv.DictReader(lines, delimiter="\t"))
    mine = [r for r in rows if r.get("op") == op.upper()]
    if not mine:
        raise ParseError("warp", f"the per-operation record holds no {op.upper()} request", text)
    try:
        start = min(_rfc3339(r["start"]) for r in mine)
        end = max(_rfc3339(r["end"]) for r in mine)
        done = sum(int(r["bytes"]) for r in mine if not r["error"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ParseError("warp", f"unreadable per-operation record: {exc}", text) from None
    if end <= start:
        raise ParseError("warp", "the per-operation record spans no time", text)
    return WarpTotal(op=op.upper(), requests=len(mine), errors=sum(1 for r in mine if r["error"]),
                     streams=len({r["thread"] for r in mine}), bytes=done, seconds=end - start)


def parse_warp_record(text: str) -> dict[str, WarpTotal]:
    """warp v1.0's per-operation record of a run with several operations (`warp mixed`): the total of each."""
    ops = {ln.split("\t")[2] for ln in text.splitlines()[1:] if ln.count("\t") >= 2 and not ln.startswith("#")}
    return {op: parse_warp_ops(text, op) for op in sorted(ops)}


def parse_warp(stdout: str, stderr: str = "") -> WarpResult:
    """warp <get|put> --json (MinIO warp v1.0.0's aggregate analysis; progress lines around it are skipped)."""
    _require_output("warp", stdout, stderr)
    text = _strip_ansi(stdout)
    try:
        data = _json_object_after("warp", text, "operations")
    except ParseError:
        try:  # warp >= 1.1 prints its live aggregate instead (pkg/aggregate/live.go Realtime: v, total, by_op_type)
            newer = _json_object_after("warp", text, "by_op_type")
        except ParseError:
            newer = None
        if newer is not None:
            version = str(newer.get("warp_version") or f"with data version v={newer.get('v', '?')}")
            raise ParseError("warp", f"the JSON is warp >= 1.1's layout (warp {version}), which this kit does not "
                                     f"read; supported: {WARP_SUPPORTED}") from None
        try:
            both = re.sub(r"(?m)^warp: \{", "{", text + "\n" + _strip_ansi(stderr))
            err = _json_object_after("warp", both, "error")
        except ParseError:
            raise ParseError("warp", "no analysis JSON in the output (was --json given?)", text) from None
        raise ParseError("warp", f"the tool reported: {_warp_error_message(err['error'])}") from None
    ops: list[WarpOp] = []
    for o in _list("warp", data.get("operations"), "operations", text):
        o = _obj("warp", o, "an operations[] entry", text)
        tp = _obj("warp", o.get("throughput"), "throughput", text)
        kind = str(o.get("type", "?"))
        ops.append(WarpOp(
            op=kind,
            bytes_per_s=_num("warp", tp.get("average_bps", 0), f"{kind} throughput.average_bps"),
            ops_per_s=_num("warp", tp.get("average_ops", 0), f"{kind} throughput.average_ops"),
            requests=int(_num("warp", o.get("n", 0), f"{kind} n")),
            errors=int(_num("warp", o.get("errors", 0), f"{kind} errors")),
            concurrency=int(_num("warp", o.get("concurrency", 0), f"{kind} concurrency")),
            hosts=int(_num("warp", o.get("hosts", 0), f"{kind} hosts")),
            skipped=bool(o.get("skipped", False)),
        ))
    if not ops:
        raise ParseError("warp", "the analysis has no operations", text)
    for o in ops:
        if not o.skipped and o.errors and o.requests <= o.errors:
            first = next((x.get("first_errors") for x in data["operations"]
                          if isinstance(x, dict) and x.get("type") == o.op), None)
            raise ParseError("warp", f"every {o.op} request failed ({o.errors} errors): {first}")
    return WarpResult(tuple(ops))


WARP_SUPPORTED = "warp v1.0.x (the version scripts/build-tools.sh pins)"


def parse_warp_version(text: str) -> str:
    """`warp --version` → '1.0.0'; ValueError for another version (warp ≥ 1.1 changed its --json layout)."""
    m = re.search(r"warp version v?(\d+\.\d+\.\d+)", text)
    if not m:
        raise ValueError(f"cannot read the warp version from {text.strip()[:120]!r}; supported: {WARP_SUPPORTED}")
    if _version_tuple(m.group(1))[:2] != (1, 0):
        raise ValueError(f"unsupported warp version {m.group(1)}: its JSON layout differs from v1.0's; "
                         f"supported: {WARP_SUPPORTED}")
    return m.group(1)


def _warp_error_message(err: Any) -> str:
    if isinstance(err, dict):
        cause = err.get("cause") or {}
        if isinstance(cause, dict):
            inner = cause.get("error")
            if isinstance(inner, dict) and inner.get("Code"):
                return f"{inner.get('Code')}: {inner.get('Message', '')}".strip()
            if cause.get("message"):
                return str(cause["message"])
        if err.get("message"):
            return str(err["message"])
    return str(err)


# ---------------------------------------------------------------------------------------------- perftest


@dataclass(frozen=True, slots=True)
class PerftestRow:
    size_bytes: int
    iterations: int
    bw_peak_Bps: float
    bw_avg_Bps: float
    msg_rate_Mpps: float


@dataclass(frozen=True, slots=True)
class PerftestResult:
    test: str  # "RDMA_Write BW Test"
    device: str
    unit: str  # as printed: Gb/sec, MB/sec or MiB/sec
    rows: tuple[PerftestRow, ...]

    @property
    def bw_avg_Bps(self) -> float:
        """BW average of the largest message size (the last row)."""
        return max(self.rows, key=lambda r: r.size_bytes).bw_avg_Bps


# perftest's print_report_bw divides by 0x100000 for MB/sec (so "MB" is MiB) and by 125000000 for Gb/sec.
_PERFTEST_UNITS = {"Gb/sec": 125_000_000.0, "MB/sec": float(MIB), "MiB/sec": float(MIB)}
_PERFTEST_ERRORS = (
    "Couldn't connect", "Unable to open file descriptor", "Failed to", "Couldn't", "No IB devices found",
    "IB device", "Unable to", "error", "Error",
)


def parse_perftest(stdout: str, stderr: str = "") -> PerftestResult:
    """ib_write_bw / ib_read_bw (client side). Units from the header: --report_gbits → Gb/sec, else MB/sec."""
    _require_output("perftest", stdout, stderr)
    text = _strip_ansi(stdout)
    header = re.search(r"#bytes\s+#iterations\s+BW peak\[([A-Za-z/]+)\]\s+BW average\[([A-Za-z/]+)\]", text)
    if not header:
        bad = [ln.strip() for ln in (text + "\n" + stderr).splitlines() if any(e in ln for e in _PERFTEST_ERRORS)]
        if bad:
            raise ParseError("perftest", f"the tool reported: {bad[0]}", text + stderr)
        raise ParseError("perftest", "no '#bytes #iterations BW peak[...] BW average[...]' result table", text)
    unit = header.group(2)
    if unit not in _PERFTEST_UNITS:
        raise ParseError("perftest", f"unknown bandwidth unit {unit!r}", text)
    factor = _PERFTEST_UNITS[unit]
    rows: list[PerftestRow] = []
    closed = False
    for line in text[header.end():].splitlines()[1:]:
        s = line.strip()
        if not s or s.startswith("-"):
            if rows:
                closed = True
                break
            continue
        parts = s.split()
        if re.match(r"(?i)(warning\b|conflicting cpu frequency)", s):
            continue  # perftest prints its clock warnings (get_clock.c) inside the table
        if len(parts) < 5 or not parts[0].isdigit():
            raise ParseError("perftest", f"result row is not numeric: {s!r}", text)
        rows.append(PerftestRow(
            size_bytes=int(parts[0]),
            iterations=int(_num("perftest", parts[1], "#iterations", text)),
            bw_peak_Bps=_num("perftest", parts[2], "BW peak", text) * factor,
            bw_avg_Bps=_num("perftest", parts[3], "BW average", text) * factor,
            msg_rate_Mpps=_num("perftest", parts[4], "MsgRate", text),
        ))
    if not rows:
        raise ParseError("perftest", "the result table has no rows", text)
    if not closed:
        raise ParseError("perftest", "the output is truncated (the result table has no closing line)", text)
    test = re.search(r"^\s*(\S.*?(?:BW|Lat) Test)\s*$", text, re.M)
    dev = re.search(r"Device\s*:\s*(\S+)", text)
    return PerftestResult(test.group(1) if test else "", dev.group(1) if dev else "", unit, tuple(rows))


# ---------------------------------------------------------------------------------------------- lnet_selftest

_LST_BW = re.compile(r"^\[([RW])\]\s+Avg:\s*([0-9.]+)\s*(MiB/s|MB/s)", re.M)
_LST_UNITS = {"MiB/s": 1048576.0, "MB/s": 1e6}


def parse_lst_bw(stdout: str, stderr: str = "") -> tuple[float, float]:
    """`lst stat --bw <group>` (lnet/utils/lst.c lst_print_lnet_stat): the mean of the receive ([R]) and send
    ([W]) 'Avg' lines over all printed intervals, in bytes/s."""
    _require_output("lst", stdout, stderr)
    text = _strip_ansi(stdout)
    if "[LNet Bandwidth of" not in text:
        raise ParseError("lst", "no '[LNet Bandwidth of ...]' block", text + stderr)
    found: dict[str, list[float]] = {"R": [], "W": []}
    for m in _LST_BW.finditer(text):
        found[m.group(1)].append(_num("lst", m.group(2), "Avg", text) * _LST_UNITS[m.group(3)])
    if not found["R"] or not found["W"]:
        raise ParseError("lst", "the bandwidth block has no [R] and [W] Avg lines", text)
    return sum(found["R"]) / len(found["R"]), sum(found["W"]) / len(found["W"])


# -------------------------------------------------------------------------------------------- nccl-tests


@dataclass(frozen=True, slots=True)
class NcclRow:
    size_bytes: int
    count: int
    dtype: str
    redop: str
    oop_time_us: float
    oop_algbw_GBps: float
    oop_busbw_GBps: float
    oop_wrong: int | None  # None when the test ran without data checks (-c 0 prints N/A)
    ip_time_us: float
    ip_algbw_GBps: float
    ip_busbw_GBps: float
    ip_wrong: int | None


@dataclass(frozen=True, slots=True)
class NcclResult:
    rows: tuple[NcclRow, ...]
    avg_busbw_GBps: float
    out_of_bounds: int
    ranks: int

    @property
    def busbw_GBps(self) -> float:
        """Bus bandwidth at the largest message size (the plateau), the better of out-of-place and in-place."""
        big = max(self.rows, key=lambda r: r.size_bytes)
        return max(big.oop_busbw_GBps, big.ip_busbw_GBps)


def _wrong(tool: str, v: str, text: str) -> int | None:
    if v.upper() == "N/A":
        return None
    return int(_num(tool, v, "#wrong", text))


_NCCL_HEADER = re.compile(r"^#\s+size\s+count\s+type\s+redop\s+(root\s+)?time\s+algbw\s+busbw\s+(#wrong|error)\s", re.M)


def parse_nccl_tests(stdout: str, stderr: str = "") -> NcclResult:
    """nccl-tests (all_reduce_perf and friends): the size/count/type/redop[/root]/time/algbw/busbw/#wrong table.

    Current nccl-tests print a root column and an integer #wrong; older ones have no root column and a float
    'error' column (the largest data error, rounding-sized when the data is right). In both, the data check's
    verdict is the 'Out of bounds values' line.
    """
    tool = "nccl-tests"
    _require_output(tool, stdout, stderr)
    text = _strip_ansi(stdout)
    header = _NCCL_HEADER.search(text)
    if not header:
        errs = [ln.strip() for ln in (text + "\n" + stderr).splitlines()
                if not ln.lstrip().startswith("#  ")
                and re.search(r"(NCCL (WARN|failure)|Test failure|CUDA failure|\berror\b|Error)", ln)]
        if errs:
            raise ParseError(tool, f"the tool reported: {errs[0]}", text + stderr)
        raise ParseError(tool, "no 'size count type redop [root] time algbw busbw #wrong' table", text)
    has_root = header.group(1) is not None
    integer_wrong = header.group(2) == "#wrong"
    ncols = 13 if has_root else 12
    off = 1 if has_root else 0
    rows: list[NcclRow] = []
    for line in text[header.end():].splitlines():
        p = line.split()
        if len(p) != ncols or line.lstrip().startswith("#") or not p[0].isdigit():
            continue
        rows.append(NcclRow(
            size_bytes=int(p[0]), count=int(_num(tool, p[1], "count", line)), dtype=p[2], redop=p[3],
            oop_time_us=_num(tool, p[4 + off], "out-of-place time", line),
            oop_algbw_GBps=_num(tool, p[5 + off], "out-of-place algbw", line),
            oop_busbw_GBps=_num(tool, p[6 + off], "out-of-place busbw", line),
            oop_wrong=_wrong(tool, p[7 + off], line) if integer_wrong else None,
            ip_time_us=_num(tool, p[8 + off], "in-place time", line),
            ip_algbw_GBps=_num(tool, p[9 + off], "in-place algbw", line),
            ip_busbw_GBps=_num(tool, p[10 + off], "in-place busbw", line),
            ip_wrong=_wrong(tool, p[11 + off], line) if integer_wrong else None,
        ))
        if not integer_wrong:
            _num(tool, p[7], "out-of-place error", line)
            _num(tool, p[11], "in-place error", line)
    if not rows:
        raise ParseError(tool, "the result table has no rows (did the run abort?)", text + stderr)
    wrong = [r for r in rows if (r.oop_wrong or 0) or (r.ip_wrong or 0)]
    if wrong:
        r = wrong[0]
        raise ParseError(tool, f"data corruption: {len(wrong)} sizes with #wrong > 0 (first at {r.size_bytes} B: "
                               f"out-of-place {r.oop_wrong}, in-place {r.ip_wrong})")
    oob = re.search(r"Out of bounds values\s*:\s*(\d+)", text)
    avg = re.search(r"Avg bus bandwidth\s*:\s*(\S+)", text)
    if not avg:
        raise ParseError(tool, "no '# Avg bus bandwidth' line (the run did not finish)", text)
    out_of_bounds = int(oob.group(1)) if oob else 0
    if out_of_bounds:
        raise ParseError(tool, f"{out_of_bounds} out-of-bounds values (data check failed)")
    ranks = len(re.findall(r"^#\s+Rank\s+\d+", text, re.M))
    return NcclResult(tuple(rows), _num(tool, avg.group(1), "Avg bus bandwidth", text), out_of_bounds, ranks)


# --------------------------------------------------------------------------------------------------- IOR


@dataclass(frozen=True, slots=True)
class IorResult:
    write_Bps: float | None  # max over IOR's own iterations (-i), like IOR's "Max Write"
    read_Bps: float | None
    tasks: int

    def bw(self, op: str) -> float:
        v = self.write_Bps if op == "write" else self.read_Bps
        if v is None:
            raise ParseError("ior", f"no {op} result (was -{op[0]} given?)")
        return v


IOR_SUPPORTED = "IOR 3.x and 4.x (4.0.0 is what roles/bench_tools builds)"


def parse_ior(stdout: str, stderr: str = "") -> IorResult:
    """IOR with -O summaryFormat=JSON (the summary array), or IOR's text 'Summary of all tests:' table."""
    _require_output("ior", stdout, stderr)
    text = _strip_ansi(stdout)
    err = re.search(r"^\s*(?:ior )?ERROR.*$|^.*MPI_ABORT.*$", text + "\n" + stderr, re.M)
    if err:
        raise ParseError("ior", f"the tool reported: {err.group(0).strip()}", text + stderr)
    data: dict[str, Any] | None
    try:
        data = _json_object_after("ior", text, "summary")
    except ParseError:
        data = _ior_json_lenient(text)
    version = str(data.get("Version", "")) if data is not None else ""
    m_ver = re.search(r"^IOR-(\S+):", text, re.M)
    version = version or (m_ver.group(1) if m_ver else "")
    if version and (_version_tuple(version) or (0,))[0] not in (3, 4):
        raise ParseError("ior", f"unsupported IOR version {version}; supported: {IOR_SUPPORTED}")
    if data is not None:
        w: float | None = None
        r: float | None = None
        tasks = 0
        for s in _list("ior", data.get("summary"), "summary", text):
            s = _obj("ior", s, "a summary[] entry", text)
            op = str(s.get("operation", "")).lower()
            bw = _num("ior", s.get("bwMaxMIB"), f"summary {op} bwMaxMIB") * MIB
            tasks = int(_num("ior", s.get("numTasks", 0), "numTasks"))
            if op == "write":
                w = bw
            elif op == "read":
                r = bw
        if w is None and r is None:
            raise ParseError("ior", "the JSON summary has no write or read entry", text)
        return IorResult(w, r, tasks)
    return _ior_text_summary(text)


def _ior_text_summary(text: str) -> IorResult:
    """IOR's text 'Summary of all tests:' table (3.x and 4.x; 4.0 no longer prints 'Max Write:' lines): the
    Max(MiB) and #Tasks columns, found by their header names."""
    m = re.search(r"^Summary of all tests:\s*\n\s*(Operation\s.*)$", text, re.M)
    if not m:
        raise ParseError("ior", "neither a JSON summary nor a 'Summary of all tests:' table", text)
    cols = m.group(1).split()
    if "Max(MiB)" not in cols or "#Tasks" not in cols:
        raise ParseError("ior", f"the summary table has no Max(MiB) or #Tasks column: {m.group(1)[:120]!r}", text)
    found: dict[str, float] = {}
    tasks = 0
    for line in text[m.end():].splitlines()[1:]:
        parts = line.split()
        if len(parts) != len(cols) or parts[0].lower() not in ("write", "read"):
            break
        found[parts[0].lower()] = _num("ior", parts[cols.index("Max(MiB)")], f"{parts[0]} Max(MiB)", text) * MIB
        tasks = int(_num("ior", parts[cols.index("#Tasks")], f"{parts[0]} #Tasks", text))
    if not found:
        raise ParseError("ior", "the 'Summary of all tests:' table has no write or read row", text)
    return IorResult(found.get("write"), found.get("read"), tasks)


def _ior_json_lenient(text: str) -> dict[str, Any] | None:
    """IOR 3.2/3.3 sometimes print trailing commas in JSON; retry with them removed."""
    start = re.search(r"(?m)^\s*\{", text)
    if not start or '"summary"' not in text:
        return None
    body = re.sub(r",(\s*[}\]])", r"\1", text[start.start():])
    try:
        obj, _ = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and "summary" in obj else None


# ------------------------------------------------------------------------------------------------ mdtest


@dataclass(frozen=True, slots=True)
class MdtestRate:
    max: float
    min: float
    mean: float
    stddev: float


@dataclass(frozen=True, slots=True)
class MdtestResult:
    rates: dict[str, MdtestRate]  # "File creation" → ops/s

    def rate(self, operation: str) -> MdtestRate:
        try:
            return self.rates[operation]
        except KeyError:
            raise ParseError("mdtest", f"no {operation!r} row in the SUMMARY rate table "
                                       f"(have: {', '.join(self.rates) or 'none'})") from None


MDTEST_SUPPORTED = "mdtest 4.0.x (IOR 4.0.0, the version roles/bench_tools builds) and 4.1 development builds"
_MDTEST_ERRORS = re.compile(r"^(?:ERROR\b.*|.*MPI_ABORT.*|.*FAILED.*)$", re.M)


def parse_mdtest(stdout: str, stderr: str = "") -> MdtestResult:
    """mdtest's SUMMARY rate table (ops/s).

    mdtest 4.0.0 prints 'SUMMARY rate: (of N iterations)' with rows '   File creation   <max> <min> <mean> <sd>'
    (no colon after the name); IOR's main branch prints 'SUMMARY rate (in ops/sec): (of N iterations)'. The
    'SUMMARY time' table is ignored. Error lines, a missing '-- finished at' line (a truncated run) or another
    mdtest version raise.
    """
    _require_output("mdtest", stdout, stderr)
    text = _strip_ansi(stdout)
    both = text + "\n" + stderr
    err = _MDTEST_ERRORS.search(both)
    if err:
        raise ParseError("mdtest", f"the tool reported: {err.group(0).strip()}", both)
    ver = re.search(r"^mdtest-(\S+) was launched", text, re.M)
    if not ver:
        raise ParseError("mdtest", "no 'mdtest-<version> was launched' line", text)
    if _version_tuple(ver.group(1))[:2] not in ((4, 0), (4, 1)):
        raise ParseError("mdtest", f"unsupported mdtest version {ver.group(1)}; supported: {MDTEST_SUPPORTED}")
    m = re.search(r"^SUMMARY rate(?: \(in ops/sec\))?:.*$", text, re.M)
    if not m:
        raise ParseError("mdtest", "no 'SUMMARY rate:' table", text)
    rates: dict[str, MdtestRate] = {}
    for line in text[m.end():].splitlines():
        if line.startswith(("SUMMARY", "--")) and rates:
            break
        row = re.match(r"^\s+([A-Za-z][A-Za-z ]+?)\s*:?\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$", line)
        if not row or row.group(1).startswith("Operation"):
            continue
        name = row.group(1).strip()
        vals = [_num("mdtest", row.group(i), f"{name} column {i - 1}", line) for i in range(2, 6)]
        rates[name] = MdtestRate(*vals)
    if not rates:
        raise ParseError("mdtest", "the SUMMARY rate table has no rows", text)
    if not re.search(r"^-- finished at ", text, re.M):
        raise ParseError("mdtest", "the output is truncated (no '-- finished at' line)", text)
    return MdtestResult(rates)


# ----------------------------------------------------------------------------------------- GPU copy bandwidth


@dataclass(frozen=True, slots=True)
class GpuCopyResult:
    tool: str  # bandwidthTest or nvbandwidth
    h2d_Bps: float | None
    d2h_Bps: float | None


def parse_bandwidth_test(stdout: str, stderr: str = "") -> GpuCopyResult:
    """CUDA samples bandwidthTest: 'Host to Device Bandwidth' / 'Device to Host Bandwidth' sections."""
    tool = "bandwidthTest"
    _require_output(tool, stdout, stderr)
    text = _strip_ansi(stdout)
    if re.search(r"Result = FAIL|CUDA error|cudaGet\w+ returned|no CUDA-capable device", text + stderr):
        line = next(ln for ln in (text + "\n" + stderr).splitlines()
                    if re.search(r"FAIL|error|returned|no CUDA", ln))
        raise ParseError(tool, f"the tool reported: {line.strip()}", text + stderr)
    out: dict[str, float] = {}
    lines = text.splitlines()
    for section, key in (("Host to Device Bandwidth", "h2d"), ("Device to Host Bandwidth", "d2h")):
        start = next((i for i, ln in enumerate(lines) if section in ln), None)
        if start is None:
            continue
        head = next((i for i in range(start + 1, len(lines)) if "Bandwidth(" in lines[i]), None)
        unit = re.search(r"Bandwidth\((GB|MB)/s\)", lines[head]) if head is not None else None
        if head is None or unit is None:
            raise ParseError(tool, f"the {section} table has no 'Bandwidth(GB/s)' or 'Bandwidth(MB/s)' header", text)
        # "GB/s" (samples 10.1 on) is 10^9 B/s; the older "MB/s" is (1 << 10) * bytes / (ms * 2^20), i.e.
        # 1,024,000 B/s (bandwidthTest.cu, testDeviceToHostTransfer and friends, before 10.1).
        scale = 1e9 if unit.group(1) == "GB" else 1_024_000.0
        rows: list[tuple[int, float]] = []
        for row in lines[head + 1:]:
            parts = row.split()
            if len(parts) != 2 or not parts[0].isdigit():
                break
            rows.append((int(parts[0]), _num(tool, parts[1], f"{section} bandwidth", row)))
        if rows:
            out[key] = max(rows)[1] * scale  # the largest transfer size (range mode prints several)
    if not out:
        raise ParseError(tool, "no 'Host to Device' or 'Device to Host' bandwidth table", text)
    if not re.search(r"^Result = PASS", text, re.M):
        raise ParseError(tool, "the output is truncated (no 'Result = PASS' line)", text)
    return GpuCopyResult(tool, out.get("h2d"), out.get("d2h"))


def parse_nvbandwidth(stdout: str, stderr: str = "") -> GpuCopyResult:
    """nvbandwidth text output: 'SUM host_to_device_memcpy_ce 55.64' lines (GB/s, summed over GPUs)."""
    tool = "nvbandwidth"
    _require_output(tool, stdout, stderr)
    text = _strip_ansi(stdout)
    sums = {m.group(1): _num(tool, m.group(2), f"SUM {m.group(1)}", text)
            for m in re.finditer(r"^SUM\s+(\S+)\s+(\S+)\s*$", text, re.M)}
    if not sums:
        errs = [ln.strip() for ln in (text + "\n" + stderr).splitlines() if re.search(r"ASSERT|error|ERROR|fail", ln)]
        if errs:
            raise ParseError(tool, f"the tool reported: {errs[0]}", text + stderr)
        raise ParseError(tool, "no 'SUM <testcase> <GB/s>' lines", text)

    def pick(*names: str) -> float | None:
        for n in names:
            if n in sums:
                return sums[n] * 1e9
        return None

    return GpuCopyResult(tool, pick("host_to_device_memcpy_ce", "host_to_device_memcpy_sm"),
                         pick("device_to_host_memcpy_ce", "device_to_host_memcpy_sm"))


# ------------------------------------------------------------------------------ inspection (conformance) tools


@dataclass(frozen=True, slots=True)
class LnetNi:
    net: str  # normalized by kiln.lustre.lustre_common.normalize_lnet_net: tcp, o2ib, o2ib1
    nid: str  # normalized: 10.0.0.1@tcp
    status: str
    interfaces: tuple[str, ...]


def parse_lnetctl_net_show(stdout: str, stderr: str = "") -> tuple[LnetNi, ...]:
    """`lnetctl net show` (YAML). The loopback net (lo) is left out."""
    _require_output("lnetctl", stdout, stderr)
    try:
        data = yaml.safe_load(stdout)
    except yaml.YAMLError as exc:
        raise ParseError("lnetctl", f"output is not YAML ({exc})", stdout) from None
    if not isinstance(data, dict) or not isinstance(data.get("net"), list):
        raise ParseError("lnetctl", "no 'net:' list (is LNet configured? try `lnetctl net show`)", stdout)
    out: list[LnetNi] = []
    for net in data["net"]:
        kind = str(net.get("net type", ""))
        if kind == "lo":
            continue
        for ni in net.get("local NI(s)") or []:
            ifaces = ni.get("interfaces") or {}
            out.append(LnetNi(
                net=normalize_lnet_net(kind), nid=normalize_nid(str(ni.get("nid", ""))),
                status=str(ni.get("status", "")),
                interfaces=tuple(str(v) for v in (ifaces.values() if isinstance(ifaces, dict) else ifaces)),
            ))
    return tuple(out)


def parse_ib_rate(text: str) -> float:
    """/sys/class/infiniband/<dev>/ports/<n>/rate, e.g. '400 Gb/sec (4X NDR)' → 400.0 (Gb/s)."""
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s*Gb/sec", text)
    if not m:
        raise ParseError("sysfs", f"not an RDMA port rate: {text.strip()!r}")
    return float(m.group(1))


def parse_ib_state(text: str) -> str:
    """/sys/class/infiniband/<dev>/ports/<n>/state, e.g. '4: ACTIVE' → 'ACTIVE'."""
    m = re.match(r"\s*\d+:\s*(\S+)", text)
    if not m:
        raise ParseError("sysfs", f"not an RDMA port state: {text.strip()!r}")
    return m.group(1)


@dataclass(frozen=True, slots=True)
class GpuSeen:
    index: int
    name: str
    persistence: str  # Enabled / Disabled


# The columns the GPU check queries: nvidia-smi --query-gpu=index,name,persistence_mode --format=csv (with the header).
NVIDIA_SMI_GPU_COLUMNS = ("index", "name", "persistence_mode")


def parse_nvidia_smi_query(stdout: str, need: Iterable[str], stderr: str = "") -> list[dict[str, str]]:
    """nvidia-smi --query-gpu=... --format=csv: one dict per GPU, keyed by the header's column names.

    The first line is the header ("index, name, persistence_mode"; a column with units reads "memory.total [MiB]",
    the unit is dropped from the key); columns other than `need` are ignored, so a wider query reads the same.
    Values are not quoted by nvidia-smi: cells are split on "," and stripped."""
    _require_output("nvidia-smi", stdout, stderr)
    lines = [line for line in stdout.splitlines() if line.strip()]
    header = [re.sub(r"\s*\[[^\]]*\]$", "", c.strip()) for c in lines[0].split(",")]
    missing = [c for c in need if c not in header]
    if missing:
        raise ParseError("nvidia-smi", f"no column {', '.join(missing)} in the first line {lines[0][:160]!r}: not the "
                         "CSV header of nvidia-smi --query-gpu=... --format=csv (NVIDIA-SMI has failed, or the "
                         "query left out the column or asked for noheader)", stdout)
    rows: list[dict[str, str]] = []
    for line in lines[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(header):
            raise ParseError("nvidia-smi", f"a row has {len(cells)} cells, the header {len(header)}: {line[:160]!r}",
                             stdout)
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def parse_nvidia_smi_csv(stdout: str, stderr: str = "") -> tuple[GpuSeen, ...]:
    """The GPUs of nvidia-smi --query-gpu=index,name,persistence_mode --format=csv (any wider query reads the same)."""
    out: list[GpuSeen] = []
    for row in parse_nvidia_smi_query(stdout, NVIDIA_SMI_GPU_COLUMNS, stderr):
        if not row["index"].isdigit():
            raise ParseError("nvidia-smi", f"GPU index is not a number: {row['index']!r}", stdout)
        out.append(GpuSeen(int(row["index"]), row["name"], row["persistence_mode"]))
    return tuple(out)


def parse_env_file(text: str) -> dict[str, str]:
    """/etc/nccl.conf: KEY=VALUE lines; '#' comments and blank lines ignored; later keys win (as NCCL reads)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or "=" not in s:
            continue
        k, _, v = s.partition("=")
        out[k.strip()] = v.strip()
    return out


def split_tokens(values: Iterable[str]) -> list[str]:
    return [t for v in values for t in str(v).split()]
