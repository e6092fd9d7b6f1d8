"""Glue between pytest (+ pytest-xdist) and kiln.verify for the user-facing testinfra suites.

One pytest item per (check, subject) of the plan: conformance and host-independent benchmarks spread over the
xdist workers; benchmarks through a shared resource (Lustre, network pairs, the object store, multi-node
launches) share the xdist group "kiln-shared" so that `--dist loadgroup` runs them one after another on one
worker. Each worker pickles its rows under <out>/rows/; the controller merges them into the same report
`kiln verify` writes.
"""

from __future__ import annotations

import os
import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kiln.plan.model import AcceptanceTarget
from kiln.render.inventory import render_inventory
from kiln.verify.api import Prepared, prepare
from kiln.verify.checks import REGISTRY
from kiln.verify.checks.check import Check, Subject
from kiln.verify.checks.options import Options
from kiln.verify.runner import ProgressPrinter, Result, Runner, VerifyRun, select_targets

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SuiteConfig:
    stack: str | None
    inventory: str | None
    hosts: str | None
    only: tuple[str, ...]
    strict: bool
    out: Path
    options: dict[str, str]


def suite_config(config: pytest.Config) -> SuiteConfig:
    def opt(name: str, env: str) -> Any:
        v = config.getoption(name, default=None)
        return v if v not in (None, [], False) else os.environ.get(env) or None

    stack = opt("kiln_stack", "KILN_VERIFY_STACK")
    only = opt("kiln_only", "KILN_VERIFY_ONLY")
    raw_opts = config.getoption("kiln_option", default=None) or [
        x for x in (os.environ.get("KILN_VERIFY_OPTIONS") or "").split(",") if x]
    out = opt("kiln_out", "KILN_VERIFY_OUT") or str(ROOT / "reports" / f"pytest-{stack or 'none'}")
    return SuiteConfig(
        stack=stack, inventory=opt("kiln_inventory", "KILN_VERIFY_INVENTORY"),
        hosts=opt("kiln_hosts", "KILN_VERIFY_HOSTS"),
        only=tuple(x for x in (only or "").replace(",", " ").split() if x),
        strict=bool(config.getoption("kiln_strict", default=False) or os.environ.get("KILN_VERIFY_STRICT") == "1"),
        out=Path(out), options=dict(x.split("=", 1) for x in raw_opts if "=" in x))


_PREPARED: dict[str, Prepared] = {}


def prepared(sc: SuiteConfig) -> Prepared:
    """Plan, inventory and testinfra hosts, once per process (xdist workers build their own)."""
    assert sc.stack
    if sc.stack not in _PREPARED:
        opts = Options(strict=sc.strict, only=sc.only, hosts_pattern=sc.hosts).with_values(sc.options)
        _PREPARED[sc.stack] = prepare(sc.stack, sc.out, opts, Path(sc.inventory) if sc.inventory else None,
                                      inventory_renderer=render_inventory)
    return _PREPARED[sc.stack]


@dataclass(frozen=True)
class Item:
    target: AcceptanceTarget
    check: Check | None
    subject: Subject | None
    why: str

    @property
    def id(self) -> str:
        return f"{self.target.check}@{self.subject.label if self.subject else '-'}"


def items(sc: SuiteConfig) -> list[Item]:
    p = prepared(sc)
    from kiln.verify.checks.context import Context

    ctx = Context(p.plan, p.acceptance, p.inventory, p.remotes, p.options)
    out: list[Item] = []
    for t, check, subjects, why in Runner(ctx, sc.out).items(select_targets(p.plan, p.options.only)):
        if check is None or not subjects:
            out.append(Item(t, check, None, why))
        out += [Item(t, check, s, "") for s in subjects]
    return out


def run_item(sc: SuiteConfig, item: Item, worker: str) -> Result:
    p = prepared(sc)
    from kiln.verify.checks.context import Context

    ctx = Context(p.plan, p.acceptance, p.inventory, p.remotes, p.options, ProgressPrinter())
    runner = Runner(ctx, sc.out, secrets=(p.options.s3_secret_key or "",))
    if item.check is None or item.subject is None:
        res = runner.empty_row(item.target, item.check, item.why)
    else:
        res = runner.run_one(item.target, item.check, item.subject)
    rows = sc.out / "rows"
    rows.mkdir(parents=True, exist_ok=True)
    (rows / f"{worker}-{time.monotonic_ns()}.pkl").write_bytes(pickle.dumps(res))
    return res


def write_merged_report(config: pytest.Config) -> None:
    sc = suite_config(config)
    rows_dir = sc.out / "rows"
    if not sc.stack or not rows_dir.is_dir():
        return
    from kiln.verify.report import write_report

    results: list[Result] = [pickle.loads(f.read_bytes()) for f in sorted(rows_dir.glob("*.pkl"))]
    if not results:
        return
    order = {(t.check): i for i, t in enumerate(prepared(sc).plan.targets)}
    results.sort(key=lambda r: (order.get(r.check, 999), r.subject.label))
    p = prepared(sc)
    run = VerifyRun(p.plan.stack, p.plan, p.acceptance, p.options, results, list(p.remotes), p.inventory.source,
                    min((f.stat().st_mtime for f in rows_dir.glob("*.pkl")), default=time.time()), time.time(), sc.out)
    write_report(run)
    for f in rows_dir.glob("*.pkl"):
        f.unlink()
    rows_dir.rmdir()
    print(f"\nkiln acceptance report: {sc.out / 'report.html'}")


def shared_resource(item: Item) -> bool:
    return item.check is not None and item.check.kind != "conformance" and not item.check.parallel_hosts


__all__ = ["REGISTRY", "Item", "SuiteConfig", "items", "run_item", "shared_resource", "suite_config"]
