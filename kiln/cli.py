"""The `kiln` command line. Exit codes: 0 ok, 1 failure, 2 bad spec or usage (nothing written)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from kiln.plan import build_plan
from kiln.plan.model import Plan
from kiln.plan.serialize import plan_to_dict
from kiln.render.inventory import render_inventory
from kiln.render.report import render_plan_report
from kiln.spec import ClusterSpec, SpecError, load_stack

EXIT_OK, EXIT_FAIL, EXIT_SPEC = 0, 1, 2


def load(stack: str) -> tuple[ClusterSpec, Plan]:
    spec = load_stack(stack)
    return spec, build_plan(spec, source=stack)


def cmd_validate(args: argparse.Namespace) -> int:
    _, plan = load(args.stack)
    print(
        f"{args.stack}: spec is valid ({len(plan.hosts)} hosts, {plan.sizing.gpus_total} GPUs, "
        f"{sum(1 for t in plan.targets_map if t.kind == 'ost')} OSTs)"
    )
    for w in plan.warnings:
        print(f"warning: {w.line()}")
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    _, plan = load(args.stack)
    if args.json:
        # Compact by default: the C encoder is used only without indentation (5× faster on 4,096 nodes).
        doc = plan_to_dict(plan, include_hosts=not args.no_hosts)
        sys.stdout.write(json.dumps(doc, indent=args.indent) + "\n")
    else:
        sys.stdout.write(render_plan_report(plan))
    return EXIT_OK


def write_files(out: Path, files: dict[str, str]) -> None:
    """Write rendered files atomically-per-file under `out` (renders fully first, then writes)."""
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)


def cmd_inventory(args: argparse.Namespace) -> int:
    spec, plan = load(args.stack)
    files = render_inventory(plan, spec)
    out = Path(args.out) if args.out else Path("inventory") / plan.stack
    write_files(out, files)
    print(
        f"wrote {len(files)} files to {out}/ "
        f"(ANSIBLE_CONFIG=ansible/ansible.cfg ansible-playbook -i {out}/hosts.yml ansible/site.yml)"
    )
    return EXIT_OK


def _add_stack(p: argparse.ArgumentParser) -> None:
    p.add_argument("stack", help="stack name (prod-h100 → stacks/Pulumi.prod-h100.yaml) or a path to a stack file")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kiln", description="GPU training clusters from one spec per environment.")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="validate a stack's spec (exit 2 with the field path and the fix)")
    _add_stack(p)
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("plan", help="the plan: bottleneck first, then layers, tuning, layouts, targets")
    _add_stack(p)
    p.add_argument("--json", action="store_true", help="machine-readable plan (schema kiln.plan/v1, docs/plan-json.md)")
    p.add_argument("--no-hosts", action="store_true", help="leave the per-host list out of --json")
    p.add_argument("--indent", type=int, default=None, help="indent --json output (default: one line; or pipe to jq)")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("inventory", help="write the Ansible inventory, group_vars and host_vars the roles consume")
    _add_stack(p)
    p.add_argument("--out", help="output directory (default inventory/<stack>)")
    p.set_defaults(func=cmd_inventory)
    for register in _extras():
        register(sub)
    return ap


# Adapters (render, verify, lab) register their own subcommands so the core CLI stays small.
ADAPTER_CLIS = ("kiln.render.cli", "kiln.verify.cli", "kiln.lab.cli")


def _extras() -> list[Callable[[argparse._SubParsersAction], None]]:  # type: ignore[type-arg]
    out = []
    for mod in ADAPTER_CLIS:
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name == mod:
                continue
            raise
        out.append(module.register)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SpecError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_SPEC
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
