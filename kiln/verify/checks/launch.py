"""Multi-node launches (IOR, mdtest, NCCL across nodes) with the site's launcher: mpirun or srun."""

from __future__ import annotations

from kiln.verify.checks.context import Context
from kiln.verify.checks.remote import quote


def launch_command(ctx: Context, hosts: tuple[str, ...] | list[str], per_node: int, command: str,
                   env: dict[str, str] | None = None, gpus_per_node: int = 0) -> str:
    """The command line that starts `command` `per_node` times on each host, from the launcher (hosts[0]).

    mpirun (Open MPI): -np N -H h1:n,h2:n [-x VAR=value ...] plus --option mpirun_args="...".
    srun (Slurm): -N nodes --ntasks-per-node=n -w h1,h2 [--gpus-per-node=g] [--export=ALL,VAR=value] plus
    --option srun_args="..." (partition, account, reservation).
    """
    env = env or {}
    o = ctx.options
    if o.launcher == "srun":
        export = quote("--export=ALL," + ",".join(f"{k}={v}" for k, v in sorted(env.items()))) if env else ""
        gpus = f"--gpus-per-node={gpus_per_node}" if gpus_per_node else ""
        parts = ["srun", f"-N {len(hosts)}", f"--ntasks-per-node={per_node}", f"-w {quote(','.join(hosts))}", gpus,
                 export, o.srun_args, command]
    else:
        xs = " ".join(f"-x {quote(f'{k}={v}')}" for k, v in sorted(env.items()))
        parts = ["mpirun", f"-np {len(hosts) * per_node}", "-H " + quote(",".join(f"{h}:{per_node}" for h in hosts)),
                 "--bind-to none", xs, o.mpirun_args, command]
    return " ".join(p for p in parts if p)
