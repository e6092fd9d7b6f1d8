"""The fio job the storage checks run: file per process, direct I/O, large sequential blocks.

One job text for both the acceptance check and bench/fio_harness (so the harness compares like with like):
`python -m kiln.verify.fiojob --op write --dir /scratch/kiln-verify --size 256M --jobs 4` prints it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

GiB = 1 << 30
MiB = 1 << 20
LAB_SIZE_PER_JOB = 256 * MiB  # acceptance.fio_size_factor = 0: a small fixed size (lab, smoke runs)


@dataclass(frozen=True, slots=True)
class FioJobSpec:
    op: str  # read | write
    directory: str
    size_per_job: int  # bytes
    numjobs: int = 4
    runtime_s: int = 60  # cap per pass; fio stops at the size or at this time, whichever comes first
    block_size: str = "1M"
    iodepth: int = 16
    ioengine: str = "libaio"
    direct: bool = True

    def text(self) -> str:
        if self.op not in ("read", "write"):
            raise ValueError(f"op must be read or write, not {self.op!r}")
        return "\n".join([
            "; kiln acceptance fio job (kiln/verify/fiojob.py): file per process, direct I/O, sequential",
            "[global]",
            f"ioengine={self.ioengine}",
            f"direct={1 if self.direct else 0}",
            f"bs={self.block_size}",
            f"iodepth={self.iodepth}",
            f"size={self.size_per_job}",
            f"numjobs={self.numjobs}",
            f"directory={self.directory}",
            "filename_format=kiln-fio.$jobnum",  # one file per job (process), reused by the read pass
            f"runtime={self.runtime_s}",
            "fallocate=none",
            "end_fsync=1" if self.op == "write" else "invalidate=1",
            f"[kiln-{self.op}]",
            f"rw={self.op}",
            "",
        ])


def size_per_job(fio_size_factor: float, ram_bytes: int, jobs: int = 1) -> int:
    """fio_size_factor × RAM per host, split over the jobs (the page cache cannot hold the data);
    0 → LAB_SIZE_PER_JOB."""
    if fio_size_factor <= 0:
        return LAB_SIZE_PER_JOB
    return max(int(fio_size_factor * ram_bytes / max(jobs, 1)) // MiB * MiB, MiB)


def main(argv: list[str] | None = None) -> int:
    from kiln.lustre.lustre_common import parse_size

    ap = argparse.ArgumentParser(prog="python -m kiln.verify.fiojob", description=__doc__)
    ap.add_argument("--op", choices=("read", "write"), required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--size", default="256M", help="size per job (K/M/G suffixes)")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--runtime", type=int, default=60)
    ap.add_argument("--bs", default="1M")
    ap.add_argument("--iodepth", type=int, default=16)
    a = ap.parse_args(argv)
    spec = FioJobSpec(
        op=a.op, directory=a.dir, size_per_job=parse_size(a.size), numjobs=a.jobs, runtime_s=a.runtime, block_size=a.bs,
        iodepth=a.iodepth,
    )
    print(spec.text(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
