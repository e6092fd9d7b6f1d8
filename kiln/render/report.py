"""Plan → the readable report of `kiln plan` (kiln/templates/plan-report.txt.j2), through the one Jinja2
environment of kiln's templates (kiln/templating.py)."""

from __future__ import annotations

from kiln.plan.model import Plan
from kiln.plan.serialize import plan_to_dict
from kiln.templating import environment


def render_plan_report(plan: Plan, target_limit: int = 24) -> str:
    data = plan_to_dict(plan, include_hosts=False)
    tmpl = environment().get_template("plan-report.txt.j2")
    return tmpl.render(p=data, s=data["sizing"], tunables=data["tunables"], limit=target_limit)
