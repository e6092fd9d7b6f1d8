"""The Lustre parameter registry (lustre_params.yaml): names, sides and accepted ranges per Lustre version.

The planner names every Lustre/LNet tunable through `variant()` and checks every value with `check()`;
docs/tuning.md is generated from `load()`.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kiln import yamlio

Side = Literal["client", "mds", "oss", "mgs", "lnet"]
Apply = Literal["set_param", "set_param_persistent", "module_param", "module_option", "mount"]
Backend = Literal["ldiskfs", "zfs"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Model):
    file: str
    function: str

    def cite(self, tag: str) -> str:
        return f"lustre-release {tag} {self.file} {self.function}"


class Variant(_Model):
    """One parameter as a set of Lustre versions (and backends) knows it."""

    versions: tuple[str, ...]
    backends: tuple[Backend, ...] = ("ldiskfs", "zfs")
    name: str
    apply: Apply | None = None  # overrides the parameter's apply for these versions
    min: float | None = None
    max: float | None = None
    max_exclusive: bool = False
    max_ram_fraction: float | None = None
    values: tuple[str, ...] = ()
    max_length: int | None = None
    relation: str = ""
    source: Source

    def range_text(self) -> str:
        parts = []
        if self.values:
            parts.append("one or more of " + ", ".join(self.values))
        if self.max_length is not None:
            parts.append(f"text of 1..{self.max_length} characters")
        if self.min is not None or self.max is not None:
            lo = "" if self.min is None else f"{self.min:g}"
            hi = "" if self.max is None else f"{self.max:g}"
            parts.append(f"{lo}..{hi}" + (" (upper bound excluded)" if self.max_exclusive else ""))
        if self.max_ram_fraction is not None:
            parts.append(f"≤ MemTotal × {self.max_ram_fraction:g} (the kernel's totalram pages)")
        if self.relation:
            parts.append(self.relation)
        return "; ".join(parts) or "any"


class Param(_Model):
    side: Side
    apply: Apply
    type: Literal["int", "size_MiB", "bool", "options", "text"]
    unit: str = ""
    change: Literal["immediate", "reconnect", "module_reload"]
    change_note: str = ""
    planned: str = "always"
    variants: tuple[Variant, ...] = Field(min_length=1)


class LayoutLimit(_Model):
    value: int
    reason: str = ""
    source: Source


class Versions(_Model):
    supported: tuple[str, ...]
    default: str
    tags: dict[str, str]
    notes: dict[str, str]


class Registry(_Model):
    schema_: int = Field(alias="schema")
    versions: Versions
    params: dict[str, Param]
    layout_limits: dict[str, LayoutLimit]
    mkfs_limits: dict[str, LayoutLimit]

    def variant(self, pid: str, version: str, backend: str) -> Variant | None:
        """The variant of `pid` that `version` with `backend` has, or None if it lacks the parameter."""
        for v in self.params[pid].variants:
            if version in v.versions and backend in v.backends:
                return v
        return None

    def apply_of(self, pid: str, variant: Variant) -> str:
        return variant.apply or self.params[pid].apply

    def cite(self, variant: Variant, version: str) -> str:
        return variant.source.cite(self.versions.tags[version])


def to_number(value: int | float | str, kind: str) -> float | None:
    """The number a value stands for (MiB for size_MiB: "16M", "1G", 16), or None if it is not one."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    text = value.strip().upper()
    if kind == "size_MiB" and text[-1:] in ("K", "M", "G") and text[:-1].isdigit():
        return int(text[:-1]) * {"K": 1 / 1024, "M": 1.0, "G": 1024.0}[text[-1]]
    return float(text) if text.isdigit() else None


def check(registry: Registry, pid: str, variant: Variant, value: int | float | str, ram_MiB: int | None) -> str:
    """'' if the kernel accepts `value`, else what is wrong with it (the accepted range and its source)."""
    param = registry.params[pid]
    if param.type == "text":
        ok = 0 < len(str(value)) <= (variant.max_length or 4096) and not any(c.isspace() for c in str(value))
        return "" if ok else f"outside the accepted range {variant.range_text()} (no spaces)"
    if param.type == "options":
        bad = [o for o in str(value).split(",") if o.split("=")[0] not in variant.values]
        return f"unknown option(s) {', '.join(bad)}" if bad else ""
    number = to_number(value, param.type)
    if number is None:
        return "not a number" + (" or a size like 16M" if param.type == "size_MiB" else "")
    too_high = variant.max is not None and (number >= variant.max if variant.max_exclusive else number > variant.max)
    too_low = variant.min is not None and number < variant.min
    # The kernel refuses more than MemTotal × fraction, and MemTotal is always below the installed RAM (the kernel
    # image alone is reserved), so the installed RAM's share itself is refused too.
    too_much_ram = (
        variant.max_ram_fraction is not None and ram_MiB is not None and number >= ram_MiB * variant.max_ram_fraction
    )
    if too_low or too_high or too_much_ram:
        # A value below the installed RAM's share may still be refused on the node: the lustre_param module compares
        # it with MemTotal there (kiln.lustre.lustre_param.ram_limit_refusal).
        ram = f" (ram_GiB is {ram_MiB} MiB, and MemTotal is less)" if too_much_ram else ""
        return f"outside the accepted range {variant.range_text()}{ram}"
    return ""


@cache
def load() -> Registry:
    text = resources.files(__package__).joinpath("lustre_params.yaml").read_text(encoding="utf-8")
    return Registry.model_validate(yamlio.load(text))
