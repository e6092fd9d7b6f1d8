"""The policy pack's checks (kiln/policy/checks.py; Pulumi gets them through policy/kiln_policies.py)
on the `kiln render` path: the same checks Pulumi runs in
`pulumi preview --policy-pack policy`, run over the rendered objects before any file is written."""

from __future__ import annotations

from typing import Any

from kiln.plan.model import Plan
from kiln.policy.checks import CHECKS


class PolicyViolation(Exception):
    """Rendered objects break the policy pack; `violations` lists them (file, object, policy, message)."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = violations
        super().__init__(f"{len(violations)} policy violation(s):\n" + "\n".join(f"  - {v}" for v in violations))


def type_token(obj: dict[str, Any]) -> str:
    """The Pulumi type token of a Kubernetes object (what the policies see under `pulumi preview`)."""
    api = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    return f"kubernetes:{api}:{obj['kind']}"


def violations(plan: Plan) -> list[str]:
    """Every policy violation of the stack's rendered objects, as 'file: Kind namespace/name: [policy] why'."""
    from kiln.render.manifests import build_manifests, policy_config

    config = policy_config(plan)
    out: list[str] = []
    for comp in build_manifests(plan):
        for obj in comp.objects:
            meta = obj.get("metadata", {})
            where = f"{comp.kind.file}: {obj['kind']} {meta.get('namespace', '-')}/{meta.get('name')}"
            for name, check in CHECKS.items():
                out.extend(f"{where}: [{name}] {msg}" for msg in check(type_token(obj), obj, config.get(name, {})))
    return out


def enforce(plan: Plan) -> None:
    """PolicyViolation when any rendered object breaks a policy."""
    found = violations(plan)
    if found:
        raise PolicyViolation(found)
