"""The in-cluster acceptance Jobs as a contract: which checks of the plan run as Jobs, their names, the Job whose log
holds the output and the tool that printed it, and the lines that frame fio's passes in its log.

The manifests that run the Jobs (kiln/render/manifests/acceptance.py) and the judge that reads their logs
(kiln/verify/jobs.py) both read this module, so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kiln.plan.groups import LUSTRE_CLIENTS, pool_group
from kiln.plan.model import AcceptanceTarget, Plan
from kiln.spec.types import dns_name

# Lines that frame each fio pass's JSON in the fio Job's log (the Job runs a write pass, then a read pass).
FIO_BEGIN = "kiln: begin fio-{op}"
FIO_END = "kiln: end fio-{op}"

Tool = Literal["nccl-tests", "fio-write", "fio-read", "warp-put", "warp-get"]


@dataclass(frozen=True, slots=True)
class JobCheck:
    """One check an acceptance Job measures: which Job's log holds the output, and which tool printed it."""

    job: str  # the Job (or MPIJob) as rendered
    log_job: str  # the batch Job whose pod log holds the output (`kubectl logs job/<log_job>`)
    check: str
    group: str | None
    tool: Tool


def acceptance_target(plan: Plan, check: str, group: str | None = None) -> AcceptanceTarget | None:
    """The plan's target for a check (and target group), if it has one."""
    return next((t for t in plan.targets if t.check == check and (group is None or t.group == group)), None)


def nccl_intra_name(pool: str) -> str:
    return f"kiln-nccl-intra-{dns_name(pool)}"


def nccl_inter_name(pool: str) -> str:
    return f"kiln-nccl-inter-{dns_name(pool)}"


FIO_JOB = "kiln-fio-lustre"


def warp_job_name(op: str) -> str:
    return f"kiln-s3-{op}"


def acceptance_jobs(plan: Plan) -> list[JobCheck]:
    """Every check the acceptance Jobs of this plan measure, in render order."""
    out: list[JobCheck] = []
    for pool in plan.compute_pools:
        group = pool_group(pool.name)
        intra = acceptance_target(plan, "fabric.nccl_allreduce_intra", group)
        if intra is not None and pool.gpus_per_node > 1:
            name = nccl_intra_name(pool.name)
            out.append(JobCheck(name, name, intra.check, intra.group, "nccl-tests"))
        inter = acceptance_target(plan, "fabric.nccl_allreduce_inter", group)
        if inter is not None and pool.nodes > 1:
            name = nccl_inter_name(pool.name)
            # NOTE: MPI Operator v2beta1 runs the launcher as a batch Job named <MPIJob>-launcher.
            out.append(JobCheck(name, f"{name}-launcher", inter.check, inter.group, "nccl-tests"))
    write = acceptance_target(plan, "storage.fio_lustre_write", LUSTRE_CLIENTS)
    read = acceptance_target(plan, "storage.fio_lustre_read", LUSTRE_CLIENTS)
    if write is not None and read is not None:
        out.append(JobCheck(FIO_JOB, FIO_JOB, write.check, write.group, "fio-write"))
        out.append(JobCheck(FIO_JOB, FIO_JOB, read.check, read.group, "fio-read"))
    for op, check in (("put", "objectstore.s3_put"), ("get", "objectstore.s3_get")):
        t = acceptance_target(plan, check)
        if t is not None:
            tool: Tool = "warp-put" if op == "put" else "warp-get"
            out.append(JobCheck(warp_job_name(op), warp_job_name(op), t.check, t.group, tool))
    return out
