"""Plan → the readable report of `kiln plan` (templates/plan-report.txt.j2)."""

from __future__ import annotations

from pathlib import Path

import jinja2

from kiln.plan.model import Plan
from kiln.plan.serialize import plan_to_dict

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # plain-text report, never HTML
    )


def render_plan_report(plan: Plan, target_limit: int = 24) -> str:
    data = plan_to_dict(plan, include_hosts=False)
    tmpl = environment().get_template("plan-report.txt.j2")
    return tmpl.render(p=data, s=data["sizing"], tunables=data["tunables"], limit=target_limit)
