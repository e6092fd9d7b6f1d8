"""The one Jinja2 environment for every template kiln ships (kiln/templates/).

Loaded from the installed package, autoescaping the HTML templates (*.html.j2), plain text as is. The plan report
(kiln.render.report) and the acceptance report (kiln.verify.report) both use it, so neither imports the other.
"""

from __future__ import annotations

import functools

import jinja2


@functools.cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("kiln", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False, default=False),
    )
