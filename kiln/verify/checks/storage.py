"""Storage benchmarks: fio on local NVMe and on Lustre (one client alone), IOR easy and mdtest (all clients)."""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass

from kiln import knowledge
from kiln.lustre.lustre_common import parse_size
from kiln.plan.groups import LUSTRE_OSS
from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks.check import Check, CheckError, NotApplicable, Rep, Sample, Subject, register
from kiln.verify.checks.context import Context, host_probe
from kiln.verify.checks.launch import launch_command
from kiln.verify.checks.options import Variables, var
from kiln.verify.checks.remote import need_tool, quote, run_tool
from kiln.verify.fiojob import FioJobSpec, size_per_job
from kiln.verify.parsers import parse_fio, parse_ior, parse_lst_bw, parse_mdtest

RUNBOOK = "docs/runbooks/acceptance-storage.md"
GB = 1e9
MIN_FIO_JOBS = 4  # the job count before it was planned; local NVMe checks keep it


@dataclass(frozen=True, slots=True)
class StorageVariables(Variables):
    scope = "storage"
    local_nvme_path: str | None = var(None, "the local NVMe scratch directory (local fio); default: host var "
                                      "kiln_local_nvme_mount, else /mnt/local-nvme")
    lustre_dir: str | None = var(None, "the Lustre directory of fio, IOR and mdtest; default: the plan's scratch "
                                 "layout directory (or mount point) + /kiln-verify")


@dataclass(frozen=True, slots=True)
class FioVariables(Variables):
    scope = "storage.fio"
    jobs: int | None = var(None, "fio processes (numjobs), one file each; default: enough for the figure the check "
                           "expects (expected ÷ reader.stream_process_GBps), at least 4")
    size_per_job: str | None = var(None, "size of each job's file, e.g. 4G; default: acceptance.fio_size_factor "
                                   "× the host's RAM, split over the jobs")
    runtime_s: int = var(60, "cap of each pass in seconds (fio stops at the size or at this time)")
    iodepth: int = var(16, "I/O depth of each job (libaio)")
    block_size: str = var("1M", "block size (bs)")


@dataclass(frozen=True, slots=True)
class IorVariables(Variables):
    scope = "storage.ior"
    path: str = var("ior", "the IOR binary on the launcher")
    procs_per_node: int = var(8, "IOR processes per client node")
    block: str = var("4g", "bytes each process writes and reads (-b)")


@dataclass(frozen=True, slots=True)
class MdtestVariables(Variables):
    scope = "storage.mdtest"
    path: str = var("mdtest", "the mdtest binary on the launcher")
    procs_per_node: int = var(8, "mdtest processes per client node")
    files_per_proc: int = var(1000, "files each process creates (-n)")


def local_nvme_path(ctx: Context, host: str) -> str:
    planned = ctx.hostvars(host).get("kiln_local_nvme_mount")
    return str(ctx.var(StorageVariables).local_nvme_path or planned or "/mnt/local-nvme")


@host_probe("nvme")
def _probe_nvme(ctx: Context, host: str) -> str | None:
    path = local_nvme_path(ctx, host)
    r = ctx.run(host, f"test -d {quote(path)} && echo ok", 30)
    if r.stdout.strip() != "ok":
        return (f"no local NVMe scratch directory {path} on this host "
                "(set host var kiln_local_nvme_mount or --option storage.local_nvme_path=DIR)")
    return None


def planned_jobs(expected_GBps: float) -> int:
    """fio processes for a check that expects `expected_GBps`: one per reader.stream_process_GBps (what one
    direct-I/O process moves), at least MIN_FIO_JOBS, so the process count does not cap the figure measured."""
    per_process = knowledge.load().workload.reader.stream_process_GBps.value
    return max(MIN_FIO_JOBS, math.ceil(expected_GBps / per_process))


def host_ram_bytes(ctx: Context, host: str) -> int:
    r = ctx.run(host, "awk '/^MemTotal:/ {print $2}' /proc/meminfo", 30)
    if r.ok and r.stdout.strip().isdigit():
        return int(r.stdout.strip()) * 1024
    ph = ctx.plan_host(host)
    if ph and ph.ram_GiB:
        return ph.ram_GiB << 30
    raise CheckError(f"{host}: cannot read MemTotal from /proc/meminfo and the plan has no RAM figure")


class FioCheck(Check):
    op: str = "read"
    runbook = RUNBOOK
    tools = ("fio",)
    variables = (StorageVariables, FioVariables)

    @abstractmethod
    def directory(self, ctx: Context, host: str) -> str:
        """Where the fio job files go on the host (local NVMe or a Lustre directory)."""

    def job(self, ctx: Context, host: str, target: AcceptanceTarget) -> FioJobSpec:
        v = ctx.var(FioVariables)
        jobs = v.jobs or planned_jobs(target.expected)
        if v.size_per_job:
            size = parse_size(v.size_per_job)
        else:
            size = size_per_job(ctx.acceptance.fio_size_factor, host_ram_bytes(ctx, host), jobs)
        return FioJobSpec(op=self.op, directory=self.directory(ctx, host), size_per_job=size, numjobs=jobs,
                          runtime_s=v.runtime_s, block_size=v.block_size, iodepth=v.iodepth)

    def prepare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:
        host = subject.hosts[0]
        need_tool(ctx, host, "fio", "install the fio package; roles/bench_tools does")
        d = self.directory(ctx, host)
        ctx.must(host, f"mkdir -p {quote(d)}", 60, what=f"creating {d}")

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        host = subject.hosts[0]
        job = self.job(ctx, host, target)
        jobfile = ctx.workdir(f"{self.id}.fio")
        timeout = job.runtime_s * 3 + 600 + job.size_per_job * job.numjobs / 50e6  # layout of read files included
        cmd = (f"mkdir -p {quote(ctx.options.workdir)} && cat > {quote(jobfile)} <<'EOF'\n{job.text()}EOF\n"
               f"fio --output-format=json {quote(jobfile)}")
        res, r = run_tool(
            ctx, host, tool="fio", command=cmd, timeout=timeout,
            parse=parse_fio,
        )
        bw = res.aggregate_Bps(self.op)
        return Sample(bw / GB, raw={"fio.json": r.stdout, "job.fio": job.text()},
                      info={"per_job_GBps": [round(x / GB, 4) for x in res.per_job_Bps(self.op)],
                            "numjobs": job.numjobs, "size_per_job_bytes": job.size_per_job, "fio": res.version})

    def cleanup(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:
        host = subject.hosts[0]  # each check lays out its own files (fio does it unmeasured) and removes them
        ctx.run(host, f"rm -f {quote(self.directory(ctx, host))}/kiln-fio.*", 300)


class LocalFio(FioCheck):
    parallel_hosts = True  # each host's own drives

    def directory(self, ctx: Context, host: str) -> str:
        return local_nvme_path(ctx, host).rstrip("/") + "/kiln-verify"


@register
class FioLocalWrite(LocalFio):
    id = "storage.fio_local_write"
    op = "write"


@register
class FioLocalRead(LocalFio):
    id = "storage.fio_local_read"
    op = "read"


def lustre_dir(ctx: Context) -> str:
    configured = ctx.var(StorageVariables).lustre_dir
    if configured:
        return configured.rstrip("/")
    scratch = next((lay.mount_path for lay in ctx.plan.layouts if lay.purpose == "scratch"), ctx.plan.mount_point)
    return scratch.rstrip("/") + "/kiln-verify"


class LustreFio(FioCheck):
    parallel_hosts = False  # "one client alone": clients take turns on the shared filesystem

    def directory(self, ctx: Context, host: str) -> str:
        return f"{lustre_dir(ctx)}/{host}"


@register
class FioLustreWrite(LustreFio):
    id = "storage.fio_lustre_write"
    op = "write"


@register
class FioLustreRead(LustreFio):
    id = "storage.fio_lustre_read"
    op = "read"


class IorEasy(Check):
    op = "write"
    runbook = RUNBOOK
    tools = ("ior", "mpirun/srun")
    variables = (StorageVariables, IorVariables)

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        o, v = ctx.options, ctx.var(IorVariables)
        launcher = subject.hosts[0]
        need_tool(ctx, launcher, v.path, "build IOR (github.com/hpc/ior) with MPI on every client")
        d = f"{lustre_dir(ctx)}/ior_easy"
        ctx.must(launcher, f"mkdir -p {quote(d)}", 60)
        # easy: file per process (-F), 1 MiB transfers, fsync (-e), neighbour reads (-C) against the page cache
        flags = "-w -k" if self.op == "write" else "-r -E"
        if self.op == "read":
            exists = ctx.run(launcher, f"ls {quote(d)}/file.* >/dev/null 2>&1", 60)
            if not exists.ok:  # the write check did not leave files: write them (not measured)
                write = f"{v.path} -a POSIX -F -e -t 1m -b {v.block} -w -k -o {quote(d + '/file')}"
                prep = launch_command(ctx, subject.hosts, v.procs_per_node, write)
                ctx.must(launcher, prep, o.command_timeout_s, what="IOR write pass before the read test")
        ior = (f"{v.path} -a POSIX -F -e -C -t 1m -b {v.block} {flags} -i 1 -o {quote(d + '/file')} "
               "-O summaryFormat=JSON")
        cmd = launch_command(ctx, subject.hosts, v.procs_per_node, ior)
        res, r = run_tool(
            ctx, launcher, tool="ior", command=cmd, timeout=o.command_timeout_s,
            parse=parse_ior,
        )
        return Sample(res.bw(self.op) / GB, raw={"ior.json": r.stdout, "command.txt": cmd},
                      info={"tasks": res.tasks})

    def cleanup(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:
        if self.op == "read":
            ctx.run(subject.hosts[0], f"rm -rf {quote(lustre_dir(ctx))}/ior_easy", 600)


@register
class IorEasyWrite(IorEasy):
    id = "storage.ior_easy_write"
    op = "write"


@register
class IorEasyRead(IorEasy):
    id = "storage.ior_easy_read"
    op = "read"


@register
class MdtestCreate(Check):
    id = "storage.mdtest_create"
    runbook = RUNBOOK
    tools = ("mdtest", "mpirun/srun")
    variables = (StorageVariables, MdtestVariables)

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        v = ctx.var(MdtestVariables)
        launcher = subject.hosts[0]
        need_tool(ctx, launcher, v.path, "mdtest is built with IOR (github.com/hpc/ior)")
        d = f"{lustre_dir(ctx)}/mdtest"
        ctx.must(launcher, f"mkdir -p {quote(d)}", 60)
        md = f"{v.path} -n {v.files_per_proc} -F -C -T -r -u -d {quote(d)}"
        cmd = launch_command(ctx, subject.hosts, v.procs_per_node, md)
        res, r = run_tool(
            ctx, launcher, tool="mdtest", command=cmd, timeout=ctx.options.command_timeout_s,
            parse=parse_mdtest,
        )
        return Sample(res.rate("File creation").mean, raw={"mdtest.txt": r.stdout, "command.txt": cmd},
                      info={"file_stat_ops": res.rates["File stat"].mean if "File stat" in res.rates else None})


@register
class LnetSelftest(Check):
    """lnet_selftest between a client and an OSS: `lst` bulk writes from the client's NID to the server's,
    run from the client as the console. Each OSS is paired with a client (round robin)."""

    id = "storage.lnet_selftest"
    runbook = RUNBOOK
    tools = ("lst (lnet_selftest)",)
    seconds = 20

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        clients = ctx.group_hosts(target.group)
        servers = ctx.group_hosts(LUSTRE_OSS)
        if not clients or not servers:
            return []
        return [Subject(f"{clients[i % len(clients)]}→{s}", (clients[i % len(clients)], s))
                for i, s in enumerate(servers)]

    def _nid(self, ctx: Context, host: str) -> str:
        ph = ctx.plan_host(host)
        nids = [n.nid for n in (ph.nics if ph else ()) if n.nid]
        if not nids:
            raise CheckError(f"{host}: the plan gives it no LNet NID")
        return nids[0]

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        client, server = subject.hosts
        for h in (client, server):
            r = ctx.run(h, "modprobe lnet_selftest", 60)
            if not r.ok:
                raise NotApplicable(f"{h}: lnet_selftest module not available ({(r.stderr or r.stdout).strip()[:160]})")
        need_tool(ctx, client, "lst", "lst comes with the Lustre client utilities (lustre-client package)")
        c, s = self._nid(ctx, client), self._nid(ctx, server)
        script = (
            f"export LST_SESSION=$$; lst new_session --timeout 120 kiln_{rep.index} >/dev/null && "
            f"lst add_group c {quote(c)} >/dev/null && lst add_group s {quote(s)} >/dev/null && "
            "lst add_batch b >/dev/null && "
            "lst add_test --batch b --concurrency 8 --from c --to s brw write size=1M >/dev/null && "
            f"lst run b >/dev/null && sleep 5 && lst stat --bw --delay 5 --count {self.seconds // 5} s; "
            "rc=$?; lst end_session >/dev/null 2>&1; exit $rc"
        )
        r = ctx.run(client, f"sh -c {quote(script)}", self.seconds + 120)
        if not r.ok:
            raise CheckError(f"lst {c}→{s} failed with rc {r.rc}: {(r.stderr or r.stdout).strip()[-300:]}")
        received, _sent = parse_lst_bw(r.stdout, r.stderr)
        return Sample(received / GB, raw={"lst.txt": r.stdout}, info={"client_nid": c, "server_nid": s})
