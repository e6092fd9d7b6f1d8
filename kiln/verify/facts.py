"""What the report records about each host, so a sign-off can be audited later and a measurement reused only while
nothing it depends on changed: the kernel, the OS, the GPU driver and firmware, the HCA firmware, the Lustre
version, a digest of the configuration files the roles write, the boot, and the versions of the tools the checks
run. One shell command per host (read-only, well under a second); what a host lacks is recorded with the reason
("not applicable: …"), never guessed.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

# Each line: "fact|tool|absent <TAB> name <TAB> value". POSIX sh: it runs on any host the suite reaches.
FACTS_SCRIPT = r"""
p() { printf '%s\t%s\t%s\n' "$1" "$2" "$(printf '%s' "$3" | tr '\t\n' '  ' | cut -c1-200)"; }
p fact kernel "$(uname -r)"
p fact os "$(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}")"
p fact boot "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
cfg=$(ls -d /etc/kiln /etc/kiln-datamover /etc/seaweedfs /etc/prometheus /etc/nccl.conf /etc/lnet.conf \
  /etc/sysctl.d/*kiln* /etc/modprobe.d/kiln-* /etc/security/limits.d/*kiln* /etc/systemd/system/kiln-* \
  /etc/systemd/system/seaweedfs-* 2>/dev/null)
if [ -n "$cfg" ]; then
  p fact config "$(find $cfg -type f 2>/dev/null | LC_ALL=C sort | xargs -r cat 2>/dev/null | sha256sum | cut -c1-16)"
else p absent config "none of the files the kit's roles write is here"; fi
if command -v nvidia-smi >/dev/null 2>&1; then
  p fact driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | sort -u | tr '\n' ' ')"
  p fact gpu_firmware "$(nvidia-smi --query-gpu=vbios_version --format=csv,noheader 2>&1 | sort -u | tr '\n' ' ')"
else
  p absent driver "no NVIDIA GPU (nvidia-smi not found)"
  p absent gpu_firmware "no NVIDIA GPU (nvidia-smi not found)"
fi
fw=$(for d in /sys/class/infiniband/*; do [ -r "$d/fw_ver" ] && printf '%s %s, ' "${d##*/}" "$(cat "$d/fw_ver")"; done)
if [ -n "$fw" ]; then p fact hca_firmware "${fw%, }"
else p absent hca_firmware "no RDMA device (/sys/class/infiniband)"; fi
if command -v lctl >/dev/null 2>&1 && [ -d /sys/fs/lustre ]; then p fact lustre "$(lctl get_param -n version 2>&1)"
else p absent lustre "no Lustre (lctl missing or the lustre module not loaded)"; fi
t() { n=$1; shift; if command -v "$1" >/dev/null 2>&1; then p tool "$n" "$("$@" 2>&1 | grep -m1 .)"; fi; }
t fio fio --version
t iperf3 iperf3 --version
t perftest ib_write_bw --version
t mpirun mpirun --version
t warp warp --version
t weed weed version
t python3 python3 --version
t nvidia-smi nvidia-smi --version
w="$KILN_WORKDIR/bin/warp"; [ -x "$w" ] && p tool warp "$("$w" --version 2>&1 | head -n1)"
rec=$(ls /opt/kiln-datamover/lib/python3*/site-packages/kiln-*.dist-info/RECORD 2>/dev/null | head -n1)
[ -n "$rec" ] && p tool kiln-datamover "${rec##*/site-packages/} sha256 $(sha256sum "$rec" | cut -c1-16)"
exit 0
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class HostFacts:
    host: str
    facts: dict[str, str] = field(default_factory=dict)  # kernel, os, boot, config, driver, firmware, lustre
    tools: dict[str, str] = field(default_factory=dict)  # tool → its version line
    absent: dict[str, str] = field(default_factory=dict)  # fact → why the host has none
    error: str = ""  # the host could not be read (then facts are empty and nothing on it is reused)

    def as_dict(self) -> dict[str, Any]:
        return {"facts": dict(self.facts), "tools": dict(self.tools), "absent": dict(self.absent),
                "error": self.error or None}

    @classmethod
    def from_dict(cls, host: str, d: dict[str, Any]) -> HostFacts:
        return cls(host=host, facts=dict(d.get("facts") or {}), tools=dict(d.get("tools") or {}),
                   absent=dict(d.get("absent") or {}), error=str(d.get("error") or ""))


def facts_command(workdir: str) -> str:
    """The facts script for a run whose scratch directory on the hosts is `workdir` (where warp may be pushed)."""
    return f"KILN_WORKDIR={shlex.quote(workdir)}\n{FACTS_SCRIPT}"


def parse_facts(host: str, text: str) -> HostFacts:
    """The facts script's output as HostFacts (unknown or malformed lines are ignored)."""
    out: dict[str, dict[str, str]] = {"fact": {}, "tool": {}, "absent": {}}
    for line in text.splitlines():
        kind, _, rest = line.partition("\t")
        name, _, value = rest.partition("\t")
        if kind in out and name:
            out[kind][name] = value.strip()
    return HostFacts(host=host, facts=out["fact"], tools=out["tool"], absent=out["absent"])


Runner = Callable[[str, str], tuple[int, str, str]]  # (host, command) → (rc, stdout, stderr)


def gather(hosts: list[str], run: Runner, workdir: str, workers: int = 4) -> dict[str, HostFacts]:
    """Every host's facts, read at once on up to `workers` hosts."""
    command = facts_command(workdir)

    def one(host: str) -> HostFacts:
        try:
            rc, stdout, stderr = run(host, command)
        except Exception as exc:  # an unreachable host is recorded, and nothing measured on it is reused
            return HostFacts(host=host, error=f"{type(exc).__name__}: {exc}"[:300])
        facts = parse_facts(host, stdout)
        if rc != 0 or "kernel" not in facts.facts:
            return HostFacts(host=host, error=f"facts not readable (rc {rc}): {(stderr or stdout).strip()[-200:]}")
        return facts

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="kiln-facts") as pool:
        return dict(zip(hosts, pool.map(one, hosts), strict=True))
