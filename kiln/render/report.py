"""Plan → the readable reports of `kiln plan`: text (kiln/templates/plan-report.txt.j2), Markdown and HTML
(plan-report.md.j2, plan-report.html.j2, with the layer limits as inline SVG bar charts), through the one Jinja2
environment of kiln's templates (kiln/templating.py). Each opens with the one-screen summary
(kiln/render/summary.py); `summary_only` renders the summary alone.
"""

from __future__ import annotations

from typing import Any, Literal

from markupsafe import Markup

from kiln.plan.model import Plan
from kiln.plan.serialize import plan_to_dict
from kiln.render.chart import layer_chart
from kiln.render.summary import duration, summary_rows
from kiln.templating import environment

Format = Literal["text", "md", "html"]
TEMPLATES: dict[str, str] = {"text": "plan-report.txt.j2", "md": "plan-report.md.j2", "html": "plan-report.html.j2"}


def _context(plan: Plan, fmt: Format, *, summary_only: bool, target_limit: int) -> dict[str, Any]:
    data = plan_to_dict(plan, include_hosts=False)
    ctx: dict[str, Any] = {
        "p": data, "s": data["sizing"], "tunables": data["tunables"], "limit": target_limit,
        "rows": summary_rows(data), "summary_only": summary_only, "duration": duration,
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
