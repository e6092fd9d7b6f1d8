"""`kiln render <stack> --out DIR`: the Kubernetes manifests of a stack, one multi-document YAML file per
component, for GitOps (Flux, Argo CD) or `kubectl apply -f DIR`. Same objects the Pulumi program creates.
`kiln monitoring <stack>`: the stack's Prometheus, Alertmanager and Grafana files."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from kiln.cli.common import EXIT_FAIL, EXIT_OK, add_stack, load, result, write_files
from kiln.policy.enforce import PolicyViolation, enforce
from kiln.render.manifests import policy_config, render_manifests
from kiln.render.monitoring import render_monitoring

log = logging.getLogger(__name__)


def cmd_render(args: argparse.Namespace) -> int:
    # SpecError → EXIT_SPEC in kiln.cli.main, before anything is written
    _, plan = load(args.stack, args.stacks_dir)
    try:
        enforce(plan)  # the policy pack, as `pulumi preview --policy-pack policy` runs it
    except PolicyViolation as exc:
        log.error("render %s: nothing written; %s", plan.stack, exc)
        return EXIT_FAIL
    files = render_manifests(plan)
    out = Path(args.out) if args.out else Path("rendered") / plan.stack
    write_files(out, files)
    result(f"wrote {len(files)} files to {out}/ ({', '.join(sorted(files))})")
    if args.policy_config:
        path = Path(args.policy_config)
        write_files(path.parent, {path.name: json.dumps(policy_config(plan), indent=2) + "\n"})
        result(f"wrote {path} (pulumi preview --policy-pack policy --policy-pack-config {path})")
    return EXIT_OK


def cmd_monitoring(args: argparse.Namespace) -> int:
    _, plan = load(args.stack, args.stacks_dir)
    files = render_monitoring(plan)
    out = Path(args.out) if args.out else Path("rendered") / f"{plan.stack}-monitoring"
    write_files(out, files)
    m = plan.monitoring
    result(f"wrote {len(files)} files to {out}/: {len(m.scrape_targets)} scrape targets, {len(m.rules)} alert rules "
           f"with promtool tests, Alertmanager config, {sum(k.startswith('grafana/') for k in files)} dashboards")
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser],
             parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    p = sub.add_parser(
        "render", parents=list(parents),
        help="write the stack's Kubernetes manifests (one YAML file per component) for GitOps",
    )
    add_stack(p)
    p.add_argument("--out", help="output directory (default rendered/<stack>)")
    p.add_argument("--policy-config", metavar="FILE",
                   help="also write the policy pack's config for this stack (keep it outside --out)")
    p.set_defaults(func=cmd_render)

    m = sub.add_parser(
        "monitoring", parents=list(parents),
        help="write the stack's Prometheus config, alert rules (with promtool tests), Alertmanager config "
        "and Grafana dashboards",
    )
    add_stack(m)
    m.add_argument("--out", help="output directory (default rendered/<stack>-monitoring)")
    m.set_defaults(func=cmd_monitoring)
