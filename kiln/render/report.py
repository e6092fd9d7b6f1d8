"""Plan → the readable report of `kiln plan` (kiln/templates/plan-report.txt.j2).

`environment()` is the one Jinja2 environment for every kiln template: loaded from the installed package
(kiln/templates/), autoescaping the HTML ones (*.html.j2), plain text as is.
"""

from __future__ import annotations

import functools

import jinja2

from kiln.plan.model import Plan
from kiln.plan.serialize import plan_to_dict


@functools.cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("kiln", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False, default=False),
    )


def render_plan_report(plan: Plan, target_limit: int = 24) -> str:
    data = plan_to_dict(plan, include_hosts=False)
    tmpl = environment().get_template("plan-report.txt.j2")
    return tmpl.render(p=data, s=data["sizing"], tunables=data["tunables"], limit=target_limit)
