"""Directory layouts (PFL, wide striping, overstriping, Data-on-MDT) from OST count and purpose."""

from __future__ import annotations

import posixpath

from kiln import knowledge
from kiln.knowledge import lustre_params
from kiln.plan.model import DirStripe, Layout, LayoutComponent
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, Directory


def _k() -> knowledge.Layouts:
    return knowledge.load().tuning.layouts


def _limit(name: str) -> int:
    return lustre_params.load().layout_limits[name].value


def max_stripes(spec: ClusterSpec) -> int:
    """LOV_MAX_STRIPE_COUNT: ZFS MDTs and ldiskfs MDTs with ea_inode (mkfs.lustre's default since 2.13)."""
    return _limit("stripe_count_max")


def _bytes(size: str) -> int | None:
    n = lustre_params.to_number(size, "size_MiB")
    return None if n is None else int(n * 1024 * 1024)


def layout_issues(spec: ClusterSpec, layouts: tuple[Layout, ...]) -> list[SpecIssue]:
    """Each component checked against `lfs setstripe`'s limits (stripe size, extents, stripe count)."""
    reg = lustre_params.load()
    unit = _limit("stripe_size_multiple_KiB") * 1024
    issues: list[SpecIssue] = []
    for i, lay in enumerate(layouts):
        path = f"lustre.directories[{i}]"
        for c in lay.components:
            size = _bytes(c.stripe_size)
            if size is None or size % unit or size > _limit("stripe_size_max_bytes"):
                src = reg.layout_limits["stripe_size_multiple_KiB"].source
                issues.append(
                    SpecIssue(
                        f"{path}.stripe_size",
                        c.stripe_size,
                        f"lfs setstripe needs a multiple of 64 KiB below 4 GiB ({src.file} {src.function})",
                        "use a size like 1M or 4M",
                    )
                )
            end = None if c.extent_end == "EOF" else _bytes(c.extent_end)
            if c.extent_end != "EOF" and (end is None or end % unit):
                issues.append(
                    SpecIssue(
                        f"{path}.extent_end",
                        c.extent_end,
                        "component ends must be multiples of 64 KiB",
                        "use a size like 64M or 4G",
                    )
                )
            if not c.dom and not (c.stripe_count == -1 or 1 <= c.stripe_count <= max_stripes(spec)):
                src = reg.layout_limits["stripe_count_max"].source
                issues.append(
                    SpecIssue(
                        f"{path}.stripe_count",
                        c.stripe_count,
                        f"outside 1..{max_stripes(spec)} or -1 ({src.file} {src.function})",
                        f"use -1 (all OSTs) or 1..{max_stripes(spec)}",
                    )
                )
    issues += _dirstripe_issues(spec)
    return issues


def total_mdts(spec: ClusterSpec) -> int:
    return spec.lustre.mds.nodes * spec.lustre.mds.mdts.per_node


def _dirstripe_issues(spec: ClusterSpec) -> list[SpecIssue]:
    """A directory's mdt_count override must fit the filesystem: -1, 0 or 1..MDT count."""
    mdts = total_mdts(spec)
    src = lustre_params.load().layout_limits["dir_stripe_count_max"].source
    return [
        SpecIssue(
            f"lustre.directories[{i}].mdt_count",
            d.mdt_count,
            f"a default directory stripe count above the filesystem's {mdts} MDT(s) cannot be met "
            f"(lfs setdirstripe -c; {src.file} {src.function})",
            f"use -1 (all {mdts} MDTs), 1..{mdts}, or 0 for no default; or add MDTs (lustre.mds)",
        )
        for i, d in enumerate(spec.lustre.directories)
        if d.mdt_count is not None and d.mdt_count > mdts
    ]


def _dirstripe(spec: ClusterSpec, d: Directory) -> tuple[DirStripe | None, str]:
    """The default directory layout of a planned directory, from the MDT count and its purpose.

    lfs-setdirstripe(1) (lustre/doc/lfs-setdirstripe.1, -D): striping every directory over all MDTs costs
    more RPCs per directory; a striped default pays off only for parents of large directories
    (file-per-process output), and `-c 1 -i -1` balances subdirectories over the MDTs.
    """
    mdts = total_mdts(spec)
    striped_inherit = lustre_params.load().layout_limits["dir_max_inherit_striped"].value
    if d.mdt_count is not None:
        if d.mdt_count == 0:
            return None, "No default directory layout (the spec's mdt_count 0): subdirectories inherit."
        count = mdts if d.mdt_count == -1 else min(d.mdt_count, mdts)
        inherit = striped_inherit if count > 1 else -1
        return DirStripe(mdt_count=count, mdt_index=-1, max_inherit=inherit), (
            f"The spec's mdt_count: new subdirectories over {count} of {mdts} MDTs."
        )
    if mdts == 1:
        return None, "One MDT: nothing to spread; subdirectories inherit."
    if d.purpose == "checkpoints" and spec.workload.checkpoint.sharded:
        return DirStripe(mdt_count=mdts, mdt_index=-1, max_inherit=striped_inherit), (
            f"File-per-rank checkpoint steps: each new step directory is striped over all {mdts} MDTs so the "
            f"ranks' creates spread over every MDS; -X {striped_inherit} is the inheritance depth lfs gives a striped "
            "default itself (LMV_INHERIT_DEFAULT_STRIPED)."
        )
    if d.purpose == "smallfiles":
        return DirStripe(mdt_count=1, mdt_index=-1, max_inherit=-1), (
            f"Metadata-heavy trees: each new subdirectory on one MDT, picked round-robin while the {mdts} MDTs "
            "are balanced and by free space after (-c 1 -i -1), inherited all the way down (-X -1)."
        )
    return None, (
        f"Not metadata-heavy: no default set here; subdirectories inherit their parent's (the filesystem root's "
        f"unless one is set on a parent), rather than paying remote-directory RPCs over the {mdts} MDTs."
    )


def setstripe_args(components: tuple[LayoutComponent, ...]) -> str:
    """`lfs setstripe` arguments for a layout (one component without an extent = plain layout)."""
    parts: list[str] = []
    composite = len(components) > 1 or components[0].dom
    for c in components:
        if composite:
            parts += ["-E", "-1" if c.extent_end == "EOF" else c.extent_end]
        if c.dom:
            parts += ["-L", "mdt"]
            continue
        parts += ["-C" if c.overstripe else "-c", str(c.stripe_count), "-S", c.stripe_size]
        if c.pool:
            parts += ["-p", c.pool]
    return " ".join(parts)


def _layout(spec: ClusterSpec, d: Directory, width: int, total_gpus: int, writers_per_file: int) -> Layout:
    pool = d.pool
    wide = min(width, max_stripes(spec))
    big = _k().stripe_size_large.value
    small = _k().stripe_size_small.value
    comps: tuple[LayoutComponent, ...]
    if d.purpose == "datasets":
        last = d.stripe_count if d.stripe_count is not None else wide
        if width == 1:
            kind, comps = "plain", (LayoutComponent(extent_end="EOF", stripe_count=1, stripe_size=big, pool=pool),)
            reason = "One OST: a plain single-stripe layout; nothing to spread over."
        else:
            mid = min(_k().dataset_middle_stripes.value, width)
            comps = (
                LayoutComponent(
                    extent_end=_k().dataset_first_extent.value, stripe_count=1, stripe_size=small, pool=pool,
                ),
                LayoutComponent(
                    extent_end=_k().dataset_middle_extent.value, stripe_count=mid, stripe_size=big, pool=pool,
                ),
                LayoutComponent(extent_end="EOF", stripe_count=last, stripe_size=big, pool=pool),
            )
            kind = "pfl"
            reason = (
                f"PFL: small files on one OST, medium files on {mid}, large shards across {last} of {width} OSTs "
                f"with {big} stripes, so many readers of one shard hit many OSS."
            )
    elif d.purpose == "checkpoints" and spec.workload.checkpoint.sharded:
        n = d.stripe_count if d.stripe_count is not None else min(_k().checkpoint_shard_stripes.value, width)
        comps = (
            LayoutComponent(
                extent_end=_k().checkpoint_shard_first_extent.value, stripe_count=1, stripe_size=small, pool=pool,
            ),
            LayoutComponent(extent_end="EOF", stripe_count=n, stripe_size=big, pool=pool),
        )
        kind = "pfl"
        reason = (
            f"Sharded checkpoints (one file per rank): each shard on few OSTs ({n}); the ranks together "
            "spread the load without lock contention on one file."
        )
    elif d.purpose == "checkpoints":
        size = _k().stripe_size_checkpoint_single.value
        if writers_per_file > wide:
            count = min(writers_per_file, max_stripes(spec))
            comps = (
                LayoutComponent(extent_end="EOF", stripe_count=count, stripe_size=size, overstripe=True, pool=pool),
            )
            kind = "overstripe"
            reason = (
                f"One checkpoint file written by {writers_per_file} ranks over {width} OSTs: overstriping "
                f"({count} stripes) gives each writer its own stripe and avoids lock ping-pong."
            )
        else:
            count = d.stripe_count if d.stripe_count is not None else -1
            comps = (LayoutComponent(extent_end="EOF", stripe_count=count, stripe_size=size, pool=pool),)
            kind = "wide"
            reason = f"One multi-GB checkpoint file: stripe across all OSTs with {size} stripes."
    elif d.purpose == "smallfiles":
        n = d.stripe_count if d.stripe_count is not None else _k().smallfile_stripes.value
        comps = (
            LayoutComponent(
                extent_end=_k().dom_size.value, stripe_count=0, stripe_size=_k().dom_size.value, dom=True,
            ),
            LayoutComponent(extent_end="EOF", stripe_count=n, stripe_size=big, pool=pool),
        )
        kind = "dom"
        reason = "Data-on-MDT: files up to 1 MiB live on the MDT, keeping small random I/O off the OSTs."
    else:
        n = d.stripe_count if d.stripe_count is not None else 1
        comps = (LayoutComponent(extent_end="EOF", stripe_count=n, stripe_size=small, pool=pool),)
        kind = "plain"
        reason = "Scratch: Lustre's default single stripe."
    mount_path = posixpath.join(spec.lustre.mount_point, d.path.lstrip("/"))
    dirstripe, dir_reason = _dirstripe(spec, d)
    return Layout(
        path=d.path, mount_path=mount_path, purpose=d.purpose, kind=kind,  # type: ignore[arg-type]
        components=comps, setstripe=setstripe_args(comps), reason=reason, dirstripe=dirstripe,
        dirstripe_reason=dir_reason,
    )


def build_layouts(spec: ClusterSpec) -> tuple[tuple[Layout, ...], list[SpecIssue]]:
    """Every planned directory's layout, and what the stack's Lustre version refuses in them (layout_issues)."""
    total_osts = spec.lustre.oss.nodes * spec.lustre.oss.osts.per_node
    pools = {p.name: len(p.osts) for p in spec.lustre.pools}
    total_gpus = sum(p.nodes * p.gpus_per_node for p in spec.compute.pools)
    # A single checkpoint file is written by every rank of one model replica; the plan takes all GPUs.
    writers = total_gpus
    layouts = tuple(
        _layout(spec, d, pools.get(d.pool or "", total_osts), total_gpus, writers) for d in spec.lustre.directories
    )
    return layouts, layout_issues(spec, layouts)
