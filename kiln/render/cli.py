"""`kiln render <stack> --out DIR`: the Kubernetes manifests of a stack, one multi-document YAML file per
component, for GitOps (Flux, Argo CD) or `kubectl apply -f DIR`. Same objects the Pulumi program creates."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kiln.policy.enforce import PolicyViolation, enforce
from kiln.render.manifests import policy_config, render_manifests
from kiln.render.monitoring import render_monitoring


def cmd_render(args: argparse.Namespace) -> int:
    from kiln.cli import EXIT_FAIL, EXIT_OK, load, write_files  # kiln.cli loads this module; import at call time

    # SpecError → exit 2 in kiln.cli.main, before anything is written
    _, plan = load(args.stack, getattr(args, "stacks_dir", None))
    try:
        enforce(plan)  # the policy pack, as `pulumi preview --policy-pack policy` runs it
    except PolicyViolation as exc:
        print(f"kiln render {plan.stack}: nothing written; {exc}", file=sys.stderr)
        return EXIT_FAIL
    files = render_manifests(plan)
    out = Path(args.out) if args.out else Path("rendered") / plan.stack
    write_files(out, files)
    print(f"wrote {len(files)} files to {out}/ ({', '.join(sorted(files))})")
    if args.policy_config:
        path = Path(args.policy_config)
        write_files(path.parent, {path.name: json.dumps(policy_config(plan), indent=2) + "\n"})
        print(f"wrote {path} (pulumi preview --policy-pack policy --policy-pack-config {path})")
    return EXIT_OK


def cmd_monitoring(args: argparse.Namespace) -> int:
    from kiln.cli import EXIT_OK, load, write_files

    _, plan = load(args.stack, getattr(args, "stacks_dir", None))
    files = render_monitoring(plan)
    out = Path(args.out) if args.out else Path("rendered") / f"{plan.stack}-monitoring"
    write_files(out, files)
    m = plan.monitoring
    print(f"wrote {len(files)} files to {out}/: {len(m.scrape_targets)} scrape targets, {len(m.rules)} alert rules "
          f"with promtool tests, Alertmanager config, {sum(k.startswith('grafana/') for k in files)} dashboards")
    return EXIT_OK


def register(subparsers: argparse._SubParsersAction, parents: Sequence[argparse.ArgumentParser] = ()) -> None:  # type: ignore[type-arg]
    from kiln.cli import add_stack

    p = subparsers.add_parser(
        "render", parents=list(parents),
        help="write the stack's Kubernetes manifests (one YAML file per component) for GitOps",
    )
    add_stack(p)
    p.add_argument("--out", help="output directory (default rendered/<stack>)")
    p.add_argument("--policy-config", metavar="FILE",
                   help="also write the policy pack's config for this stack (keep it outside --out)")
    p.set_defaults(func=cmd_render)

    m = subparsers.add_parser(
        "monitoring", parents=list(parents),
        help="write the stack's Prometheus config, alert rules (with promtool tests), Alertmanager config "
        "and Grafana dashboards",
    )
    add_stack(m)
    m.add_argument("--out", help="output directory (default rendered/<stack>-monitoring)")
    m.set_defaults(func=cmd_monitoring)
