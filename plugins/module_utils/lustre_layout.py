"""Lustre directory layouts: lfs getstripe -d, lfs setstripe.

One of the five files of kiln's Lustre library (docs/architecture.md, "Lustre library"):
``lustre_common`` (sizes, NIDs, parameter values), ``lustre_target``, ``lustre_param`` and
``lustre_layout``. The files live once, in the ``kiln.cluster`` collection's
``plugins/module_utils``, and import each other relatively, so the same files are
``ansible_collections.kiln.cluster.plugins.module_utils.*`` for the modules (AnsiballZ ships
them to managed nodes) and ``kiln.lustre.*`` for ``kiln verify`` (the wheel packages them).

Everything here is a pure function of its arguments: no command runs, no file is touched.
The module side runs on managed nodes, so the library keeps to Python 3.9 at runtime
(builtin generics only in annotations) and to the standard library.

Format parsed here: ``lfs getstripe -d [--yaml] DIR``, printed by
llapi_lov_dump_user_lmm() in lustre/utils/liblustreapi.c: lov_dump_user_lmm_header()
writes the stripe keys (``lmm_`` prefix only for files; one line for a plain directory
layout in text mode, one key per line with ``--yaml``), lov_dump_comp_v1_header() the
``lcm_*`` lines and lov_dump_comp_v1_entry() each component's ``lcme_*`` lines (with
``--yaml``: under ``components:`` as a list in 2.16, as ``componentN:`` keys in 2.15,
each with a ``sub_layout:`` key). Fixtures: tests/fixtures/tools/lustre/getstripe_*.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from .lustre_common import KIB, format_size, parse_size

# --------------------------------------------------------------------------
# Layouts: lfs getstripe -d, lfs setstripe
# --------------------------------------------------------------------------

STRIPE_SIZE_GRANULE = 64 * KIB
_GETSTRIPE_TOKEN = re.compile(r"([A-Za-z_][\w.]*):[ \t]*(\S*)")
_STRIPE_KEYS = ("stripe_count", "stripe_size", "pattern", "pool", "stripe_offset")


@dataclass
class LayoutComponent:
    """One component of a directory default layout. ``extent_end`` None means EOF."""

    extent_end: int | None
    stripe_count: int | None = None
    stripe_size: int | None = None
    overstripe_count: int | None = None
    pool: str | None = None
    dom: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["extent_end"] = "EOF" if self.extent_end is None else format_size(self.extent_end)
        data["stripe_size"] = None if self.stripe_size is None else format_size(self.stripe_size)
        return data


def _parse_extent_end(value: Any) -> int | None:
    if isinstance(value, str) and value.strip().lower() in ("eof", "-1"):
        return None
    if value == -1:
        return None
    return parse_size(value)


def _optional_int(raw: dict[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{key} must be an integer, not {value!r}")
    return int(value)


def layout_from_spec(raw: list[dict[str, Any]]) -> list[LayoutComponent]:
    """The module's ``layout`` argument -> components (sizes in bytes, EOF as None).

    The planner's inventory repeats an overstriped component's count in ``stripe_count``;
    an equal ``stripe_count`` is dropped so only ``overstripe_count`` remains.
    """
    components = []
    for entry in raw:
        size = entry.get("stripe_size")
        count = _optional_int(entry, "stripe_count")
        over = _optional_int(entry, "overstripe_count")
        components.append(
            LayoutComponent(
                extent_end=_parse_extent_end(entry.get("extent_end", "EOF")),
                stripe_count=None if over is not None and count == over else count,
                stripe_size=None if size in (None, "") else parse_size(size),
                overstripe_count=over,
                pool=entry.get("pool") or None,
                dom=bool(entry.get("dom", False)),
            )
        )
    return components


def validate_layout(components: list[LayoutComponent]) -> list[str]:
    """Problems with a wanted layout, as sentences; empty when ``lfs setstripe`` can take it."""
    if not components:
        return ["layout needs at least one component"]
    errors: list[str] = []
    previous_end = 0
    for position, comp in enumerate(components):
        label = f"component {position}"
        last = position == len(components) - 1
        if last and comp.extent_end is not None:
            errors.append(f"{label}: the last component must end at EOF")
        if not last and comp.extent_end is None:
            errors.append(f"{label}: only the last component may end at EOF")
        if comp.extent_end is not None:
            if comp.extent_end <= previous_end:
                errors.append(f"{label}: extent_end {format_size(comp.extent_end)} must grow")
            if comp.extent_end % STRIPE_SIZE_GRANULE:
                errors.append(f"{label}: extent_end must be a multiple of 64K")
            previous_end = comp.extent_end
        errors.extend(_validate_component(label, position, comp))
    return errors


def _validate_component(label: str, position: int, comp: LayoutComponent) -> list[str]:
    if comp.dom:
        errors = [] if position == 0 else [f"{label}: only the first component can be Data-on-MDT"]
        if comp.stripe_count not in (None, 0) or comp.overstripe_count is not None or comp.pool:
            errors.append(f"{label}: a Data-on-MDT component takes no stripe_count, overstripe_count or pool")
        if comp.stripe_size is not None and comp.stripe_size != comp.extent_end:
            errors.append(f"{label}: a Data-on-MDT component's size is its extent_end; leave stripe_size unset")
        return errors
    errors = []
    if comp.stripe_count is not None and comp.overstripe_count is not None:
        errors.append(f"{label}: give stripe_count or overstripe_count, not both")
    if comp.stripe_count is not None and comp.stripe_count < -1:
        errors.append(f"{label}: stripe_count must be -1 (all OSTs) or more")
    if comp.overstripe_count is not None and (comp.overstripe_count == 0 or comp.overstripe_count < -1):
        errors.append(f"{label}: overstripe_count must be -1 or at least 1")
    if comp.stripe_size is not None:
        if comp.stripe_size <= 0 or comp.stripe_size % STRIPE_SIZE_GRANULE:
            errors.append(f"{label}: stripe_size must be a positive multiple of 64K")
        elif comp.extent_end is not None and comp.extent_end % comp.stripe_size:
            errors.append(f"{label}: extent_end must be a multiple of its stripe_size")
    return errors


def build_setstripe_args(components: list[LayoutComponent]) -> list[str]:
    """``lfs setstripe`` options for a layout (without the path).

    One EOF component without DoM is a plain layout (no ``-E``); anything else
    is composite: ``-E 64M -c 1 -S 1M -E -1 -c -1 -S 4M``, DoM ``-E 1M -L mdt``,
    overstriping ``-C n``, pool ``-p name``.
    """
    plain = len(components) == 1 and components[0].extent_end is None and not components[0].dom
    args: list[str] = []
    for comp in components:
        if not plain:
            args += ["-E", "-1" if comp.extent_end is None else format_size(comp.extent_end)]
        if comp.dom:
            args += ["-L", "mdt"]
            continue
        if comp.overstripe_count is not None:
            args += ["-C", str(comp.overstripe_count)]
        elif comp.stripe_count is not None:
            args += ["-c", str(comp.stripe_count)]
        if comp.stripe_size is not None:
            args += ["-S", format_size(comp.stripe_size)]
        if comp.pool:
            args += ["-p", comp.pool]
    return args


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens = []
    for key, value in _GETSTRIPE_TOKEN.findall(text):
        tokens.append((key[4:] if key.startswith("lmm_") else key, value))
    return tokens


def _component_from_fields(fields: dict[str, str], extent_end: int | None) -> LayoutComponent:
    pattern = fields.get("pattern", "raid0")
    count = int(fields["stripe_count"]) if "stripe_count" in fields else None
    size = int(fields["stripe_size"]) if "stripe_size" in fields else None
    if pattern.startswith("mdt"):
        return LayoutComponent(extent_end=extent_end, stripe_size=size, dom=True)
    overstriped = "overstriped" in pattern.split(",")
    return LayoutComponent(
        extent_end=extent_end,
        stripe_count=None if overstriped else count,
        stripe_size=size,
        overstripe_count=count if overstriped else None,
        pool=fields.get("pool") or None,
    )


def parse_getstripe(text: str) -> list[LayoutComponent] | None:
    """``lfs getstripe -d [--yaml] DIR`` -> components, or None when no default layout is shown.

    Reads the three documented shapes with one tokenizer: the one-line plain form
    (``stripe_count:  1 stripe_size:   1048576 pattern:       raid0 stripe_offset: -1``),
    the composite text form (``lcm_layout_gen:`` ... ``lcme_extent.e_end:``) and the
    ``--yaml`` form (``component0:`` ... ``sub_layout:``). A component runs from one
    ``lcme_extent.e_start`` to the next.
    """
    tokens = _tokens(text)
    keys = {key for key, _value in tokens}
    if keys.isdisjoint(_STRIPE_KEYS[:3]):
        return None
    if "lcme_extent.e_start" not in keys:
        fields: dict[str, str] = {}
        for key, value in tokens:
            if key in _STRIPE_KEYS:
                fields.setdefault(key, value)
        return [_component_from_fields(fields, None)]
    return _parse_composite(tokens)


def _parse_composite(tokens: list[tuple[str, str]]) -> list[LayoutComponent]:
    components: list[LayoutComponent] = []
    fields: dict[str, str] | None = None
    end: int | None = None
    for key, value in tokens:
        if key == "lcme_extent.e_start":
            if fields is not None:
                components.append(_component_from_fields(fields, end))
            fields, end = {}, None
        elif key == "lcme_extent.e_end" and fields is not None:
            end = None if value == "EOF" else int(value)
        elif key in _STRIPE_KEYS and fields is not None:
            fields.setdefault(key, value)
    if fields is not None:
        components.append(_component_from_fields(fields, end))
    return components


def _component_drift(position: int, have: LayoutComponent, want: LayoutComponent) -> list[dict[str, Any]]:
    drift: list[dict[str, Any]] = []

    def add(field_name: str, current: Any, wanted: Any) -> None:
        drift.append({"component": position, "field": field_name, "current": current, "wanted": wanted})

    if have.extent_end != want.extent_end:
        add("extent_end", have.to_dict()["extent_end"], want.to_dict()["extent_end"])
    if have.dom != want.dom:
        add("dom", have.dom, want.dom)
    if want.dom or have.dom:
        return drift
    if have.overstripe_count != want.overstripe_count and (
        want.overstripe_count is not None or have.overstripe_count is not None
    ):
        add("overstripe_count", have.overstripe_count, want.overstripe_count)
    # stripe_count 0 is lfs's "filesystem default": the read-back shows the default, so skip it.
    count_wanted = want.overstripe_count is None and want.stripe_count not in (None, 0)
    if count_wanted and have.stripe_count != want.stripe_count:
        add("stripe_count", have.stripe_count, want.stripe_count)
    if want.stripe_size is not None and have.stripe_size != want.stripe_size:
        add("stripe_size", have.to_dict()["stripe_size"], want.to_dict()["stripe_size"])
    if (have.pool or None) != (want.pool or None):
        add("pool", have.pool, want.pool)
    return drift


def layout_drift(current: list[LayoutComponent] | None, wanted: list[LayoutComponent]) -> list[dict[str, Any]]:
    """What differs between the directory's default layout and the wanted one.

    Each entry is {component, field, current, wanted}. A wanted field left
    unset (stripe_count, stripe_size) is not compared, nor is stripe_count 0 (the
    filesystem default); pool unset means "no pool".
    """
    if current is None:
        return [{"component": None, "field": "layout", "current": None, "wanted": render_layout(wanted)}]
    drift: list[dict[str, Any]] = []
    if len(current) != len(wanted):
        drift.append({"component": None, "field": "components", "current": len(current), "wanted": len(wanted)})
    for position in range(min(len(current), len(wanted))):
        drift.extend(_component_drift(position, current[position], wanted[position]))
    return drift


def render_layout(components: list[LayoutComponent] | None) -> str:
    """One line per component, for --diff: ``[1M, EOF) raid0 count=-1 size=4M pool=flash``."""
    if components is None:
        return "(no default layout)\n"
    lines = []
    start = "0"
    for comp in components:
        end = "EOF" if comp.extent_end is None else format_size(comp.extent_end)
        lines.append(f"[{start}, {end}) {_render_component(comp)}")
        start = end
    return "\n".join(lines) + "\n"


def _render_component(comp: LayoutComponent) -> str:
    if comp.dom:
        return "mdt (Data-on-MDT)"
    parts = ["raid0,overstriped" if comp.overstripe_count is not None else "raid0"]
    count = comp.overstripe_count if comp.overstripe_count is not None else comp.stripe_count
    if count is not None:
        parts.append(f"count={count}")
    if comp.stripe_size is not None:
        parts.append(f"size={format_size(comp.stripe_size)}")
    if comp.pool:
        parts.append(f"pool={comp.pool}")
    return " ".join(parts)


# --------------------------------------------------------------------------
# Default directory layouts (DNE): lfs getdirstripe -D, lfs setdirstripe -D
# --------------------------------------------------------------------------
# Format parsed here: ``lfs getdirstripe -D [--yaml] DIR``, printed by lmv_dump_user_lmm() in
# lustre/utils/liblustreapi.c (2.15 and 2.16): ``lmv_stripe_count:``, ``lmv_stripe_offset:``,
# ``lmv_hash_type:``, ``lmv_max_inherit:`` and, when the offset is -1, ``lmv_max_inherit_rr:``; one line
# in text mode, one key per line with --yaml (2.16 pads the values). A directory without a default
# directory layout prints no ``lmv_stripe_count``. Fixtures: tests/fixtures/tools/lustre/getdirstripe_*.

DIR_MAX_INHERIT = 250  # LMV_INHERIT_MAX (lustre_user.h), checked by lfs_setdirstripe in lustre/utils/lfs.c
_DIRSTRIPE_TOKEN = re.compile(r"(lmv_[a-z_]+):[ \t]*(-?\w[\w,]*)")


@dataclass
class DirDefault:
    """A directory's default directory layout: what new subdirectories get. None fields are not compared."""

    mdt_count: int
    mdt_index: int = -1
    max_inherit: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def dir_default_from_spec(raw: dict[str, Any]) -> DirDefault:
    """The module's ``dir_default`` argument -> DirDefault."""
    count = _optional_int(raw, "mdt_count")
    if count is None:
        raise ValueError("mdt_count is required")
    index = _optional_int(raw, "mdt_index")
    inherit = _optional_int(raw, "max_inherit")
    return DirDefault(mdt_count=count, mdt_index=-1 if index is None else index, max_inherit=inherit)


def validate_dir_default(want: DirDefault, mdts: int | None = None) -> list[str]:
    """Problems with a wanted default directory layout, as sentences (the ranges lfs_setdirstripe accepts)."""
    errors = []
    if want.mdt_count == 0 or want.mdt_count < -1:
        errors.append(f"mdt_count {want.mdt_count}: must be -1 (all MDTs) or at least 1")
    if mdts is not None and want.mdt_count > mdts:
        errors.append(f"mdt_count {want.mdt_count}: the filesystem has {mdts} MDT(s)")
    if want.mdt_index < -1:
        errors.append(f"mdt_index {want.mdt_index}: must be -1 (the MDS picks) or an MDT index")
    if want.max_inherit is not None and not -1 <= want.max_inherit <= DIR_MAX_INHERIT:
        errors.append(f"max_inherit {want.max_inherit}: must be -1 (all levels), 0 or 1..{DIR_MAX_INHERIT}")
    return errors


def build_setdirstripe_args(want: DirDefault) -> list[str]:
    """``lfs setdirstripe`` options for a default directory layout (without the path): ``-D -c 4 -i -1 -X 3``."""
    args = ["-D", "-c", str(want.mdt_count), "-i", str(want.mdt_index)]
    if want.max_inherit is not None:
        args += ["-X", str(want.max_inherit)]
    return args


def parse_getdirstripe(text: str) -> DirDefault | None:
    """``lfs getdirstripe -D [--yaml] DIR`` -> DirDefault, or None when the directory has no default."""
    fields = dict(_DIRSTRIPE_TOKEN.findall(text))
    if "lmv_stripe_count" not in fields:
        return None
    inherit = fields.get("lmv_max_inherit")
    return DirDefault(
        mdt_count=int(fields["lmv_stripe_count"]),
        mdt_index=int(fields.get("lmv_stripe_offset", "-1")),
        max_inherit=None if inherit is None else int(inherit),
    )


def dir_default_drift(current: DirDefault | None, wanted: DirDefault) -> list[dict[str, Any]]:
    """Fields of the default directory layout that differ, each {component: "dir_default", field, current, wanted}.

    max_inherit unset in ``wanted`` is not compared.
    """
    if current is None:
        return [{"component": "dir_default", "field": "dir_default", "current": None, "wanted": wanted.to_dict()}]
    drift = []
    for name in ("mdt_count", "mdt_index", "max_inherit"):
        want = getattr(wanted, name)
        have = getattr(current, name)
        if want is not None and have != want:
            drift.append({"component": "dir_default", "field": name, "current": have, "wanted": want})
    return drift


def render_dir_default(value: DirDefault | None) -> str:
    """One line for --diff: ``subdirectories: -D -c 4 -i -1 -X 3``."""
    if value is None:
        return "subdirectories: (no default directory layout)\n"
    return "subdirectories: " + " ".join(build_setdirstripe_args(value)) + "\n"
