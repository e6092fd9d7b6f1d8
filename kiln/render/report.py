"""Plan → the readable reports of `kiln plan`: text (kiln/templates/plan-report.txt.j2), Markdown and HTML
(plan-report.md.j2, plan-report.html.j2, with the layer limits as inline SVG bar charts). Each opens with the
one-screen summary (kiln/render/summary.py); `summary_only` renders the summary alone.

`environment()` is the one Jinja2 environment for every kiln template: loaded from the installed package
(kiln/templates/), autoescaping the HTML ones (*.html.j2), plain text and Markdown as is.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import jinja2
from markupsafe import Markup

from kiln.plan.model import Plan
from kiln.plan.serialize import plan_to_dict
from kiln.render.chart import layer_chart
from kiln.render.summary import duration, summary_rows

Format = Literal["text", "md", "html"]
TEMPLATES: dict[str, str] = {"text": "plan-report.txt.j2", "md": "plan-report.md.j2", "html": "plan-report.html.j2"}


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kiln", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False, default=False),
    )
    env.filters["duration"] = duration
    return env


def _context(plan: Plan, fmt: Format, *, summary_only: bool, target_limit: int) -> dict[str, Any]:
    data = plan_to_dict(plan, include_hosts=False)
    ctx: dict[str, Any] = {
        "p": data, "s": data["sizing"], "tunables": data["tunables"], "limit": target_limit,
        "rows": summary_rows(data), "summary_only": summary_only,
    }
    if fmt != "text":
        # The charts are built here from numbers and escaped names: markup the HTML template may insert.
        ctx["charts"] = [Markup(layer_chart(data, op)) for op in ("read", "write")]
    return ctx


def render_plan(plan: Plan, fmt: Format = "text", *, summary_only: bool = False, target_limit: int = 24) -> str:
    """The plan report in `fmt`: the summary, then (unless summary_only) the detailed sections."""
    ctx = _context(plan, fmt, summary_only=summary_only, target_limit=target_limit)
    return environment().get_template(TEMPLATES[fmt]).render(**ctx)


def render_plan_report(plan: Plan, target_limit: int = 24) -> str:
    """The text report (summary and details), as `kiln plan` prints it."""
    return render_plan(plan, "text", target_limit=target_limit)
