"""The Python entry point of `kiln verify`: load the stack, reach the hosts, run, write the report.

kiln.verify reads the inventory contract, never the code that renders it: without an inventory directory the
caller hands in the renderer (`inventory_renderer`, kiln.render.inventory.render_inventory for `kiln verify`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kiln.plan import build_plan
from kiln.plan.model import Plan
from kiln.spec import load_stack
from kiln.spec.models import Acceptance
from kiln.verify.checks.options import Options
from kiln.verify.hosts import Remote, build_remotes
from kiln.verify.inventory import Inventory, inventory_from_files, load_inventory
from kiln.verify.report import write_report
from kiln.verify.runner import VerifyRun, execute, select_hosts


def credentials_from_env(options: Options) -> Options:
    """S3 credentials from KILN_S3_ACCESS_KEY / KILN_S3_SECRET_KEY unless already set."""
    import dataclasses

    return dataclasses.replace(
        options,
        s3_access_key=options.s3_access_key or os.environ.get("KILN_S3_ACCESS_KEY") or None,
        s3_secret_key=options.s3_secret_key or os.environ.get("KILN_S3_SECRET_KEY") or None,
    )


@dataclass
class Prepared:
    plan: Plan
    acceptance: Acceptance
    inventory: Inventory
    remotes: dict[str, Remote]
    options: Options


InventoryRenderer = Callable[[Plan], Mapping[str, str]]


def prepare(stack: str, out_dir: Path, options: Options | None = None, inventory_dir: Path | None = None,
            remotes: dict[str, Remote] | None = None, stacks_dir: str | Path | None = None, *,
            inventory_renderer: InventoryRenderer | None = None) -> Prepared:
    """Load the stack and its plan, read (or render) the inventory, select the hosts and reach them.

    Without `inventory_dir` the inventory is rendered from the plan by `inventory_renderer` (the same files
    `kiln inventory` writes) and kept under out_dir/inventory/. `remotes` replaces the testinfra hosts (tests,
    other transports). `stack` is a name or a path, resolved by kiln.spec.stack_path (`stacks_dir` as
    `kiln --stacks-dir`).
    """
    opts = credentials_from_env(options or Options())
    spec = load_stack(stack, stacks_dir)
    plan = build_plan(spec, source=stack)
    inventory: Inventory
    if inventory_dir is not None:
        inventory = load_inventory(Path(inventory_dir))
    elif inventory_renderer is None:
        raise ValueError("no inventory: give an inventory directory (kiln inventory <stack> --out DIR) "
                         "or the renderer of the plan's inventory")
    else:
        files = inventory_renderer(plan)
        inv_dir = out_dir / "inventory"
        for rel, text in files.items():
            p = inv_dir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        inventory = inventory_from_files(files, f"rendered from the plan ({inv_dir})", inv_dir / "hosts.yml")
    hosts = select_hosts(plan, inventory, opts.hosts_pattern)
    if remotes is None:
        remotes = build_remotes(inventory, hosts, opts.backend_template, opts.command_timeout_s)
    else:
        remotes = {h: r for h, r in remotes.items() if h in hosts}
    return Prepared(plan, plan.acceptance, inventory, remotes, opts)


def run_verify(stack: str, out_dir: Path, options: Options | None = None, inventory_dir: Path | None = None,
               progress: Callable[[str], None] | None = None,
               remotes: dict[str, Remote] | None = None, stacks_dir: str | Path | None = None, *,
               inventory_renderer: InventoryRenderer | None = None) -> VerifyRun:
    """Verify a stack's hosts against its plan; writes report.json/.md/.html and raw/ under `out_dir`."""
    p = prepare(
        stack=stack, out_dir=out_dir, options=options, inventory_dir=inventory_dir, remotes=remotes,
        stacks_dir=stacks_dir, inventory_renderer=inventory_renderer,
    )
    run = execute(
        plan=p.plan, acceptance=p.acceptance, inventory=p.inventory, remotes=p.remotes, options=p.options,
        out_dir=out_dir, stack=p.plan.stack, progress=progress,
    )
    write_report(run)
    return run


def run_jobs_verify(stack: str, out_dir: Path, options: Options | None = None,
                    from_dir: Path | None = None, stacks_dir: str | Path | None = None) -> VerifyRun:
    """Judge the in-cluster acceptance Jobs' logs (saved in `from_dir`, else via kubectl) and write the report."""
    from kiln.verify.jobs import verify_jobs

    spec = load_stack(stack, stacks_dir)
    plan = build_plan(spec, source=stack)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = verify_jobs(stack=plan.stack, plan=plan, out_dir=out_dir, options=options or Options(), from_dir=from_dir)
    write_report(run)
    return run
