"""Cross-field rules of the dataflow section: links and checkpoints under planned directories, buckets the plan
creates, no two of them owning the same files or keys, schedules a systemd timer can run, pools that exist."""

from __future__ import annotations

from collections.abc import Iterator

from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec, Dataflow, DataLink, DataModels
from kiln.spec.schedule import systemd_calendar


def under(path: str, parent: str) -> bool:
    """`path` is `parent` or lies below it (both canonical, as the spec's path types make them)."""
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _overlap(a: str, b: str) -> bool:
    return under(a, b) or under(b, a)


def _prefix_overlap(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)


def check_dataflow(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """Every problem of the dataflow section, links first, then checkpoints, models and movers."""
    df = spec.dataflow
    if df is None:
        return
    for i, link in enumerate(df.links):
        yield from _link(spec, df, i, link)
    yield from _checkpoints(spec, df)
    for i, m in enumerate(df.models):
        yield from _model(spec, f"dataflow.models[{i}]", m)
    pools = {p.name: p for p in spec.compute.pools}
    for i, name in enumerate(df.movers.pools):
        if name not in pools:
            yield SpecIssue(
                f"dataflow.movers.pools[{i}]", name, "no such compute pool", f"use one of {', '.join(pools)}"
            )


def _placed(spec: ClusterSpec, path: str, value: str) -> Iterator[SpecIssue]:
    """A path the mover fills lies under a planned directory, so its layout is set before data lands."""
    dirs = [d.path for d in spec.lustre.directories]
    if not any(under(value, d) for d in dirs):
        yield SpecIssue(
            path,
            value,
            f"not under a planned directory ({', '.join(dirs) or 'lustre.directories is empty'}), so no "
            "layout would be set before data lands",
            "put it under one of lustre.directories[].path, or add a directory entry for it",
        )


def _bucket(spec: ClusterSpec, path: str, value: str) -> Iterator[SpecIssue]:
    buckets = [b.name for b in spec.objectstore.buckets]
    if value not in buckets:
        yield SpecIssue(
            path,
            value,
            f"the plan does not create this bucket (objectstore.buckets: {', '.join(buckets)})",
            "use one of those buckets, or add it to objectstore.buckets",
        )


def _prefix(path: str, value: str) -> Iterator[SpecIssue]:
    if value and not value.endswith("/"):
        yield SpecIssue(
            path, value, "a prefix maps to a directory, so it must be '' or end with '/'", f"write {value}/"
        )


def _schedule(p: str, link: DataLink) -> Iterator[SpecIssue]:
    """A schedule goes with import_trigger schedule, and systemd can run it as a timer."""
    if link.schedule is not None:
        try:
            systemd_calendar(link.schedule)
        except ValueError as exc:
            yield SpecIssue(
                f"{p}.schedule",
                link.schedule,
                f"the datamover role runs it as a systemd timer, and {exc}",
                "restrict either the day of month or the day of week (leave the other '*'), "
                "without a step in the day of week",
            )
    if (link.import_trigger == "schedule") != (link.schedule is not None):
        yield SpecIssue(
            f"{p}.schedule",
            link.schedule,
            "a schedule is needed exactly when import_trigger is schedule",
            "set import_trigger: schedule with a cron schedule, or drop schedule",
        )


def _link(spec: ClusterSpec, df: Dataflow, i: int, link: DataLink) -> Iterator[SpecIssue]:
    """One link: its own fields, then what it shares with the links before it."""
    p = f"dataflow.links[{i}]"
    yield from _placed(spec, f"{p}.path", link.path)
    yield from _bucket(spec, f"{p}.bucket", link.bucket)
    yield from _prefix(f"{p}.prefix", link.prefix)
    yield from _schedule(p, link)
    for j, other in enumerate(df.links[:i]):
        if other.name == link.name:
            yield SpecIssue(f"{p}.name", link.name, f"also the name of links[{j}]", "give it a new name")
        if _overlap(link.path, other.path):
            yield SpecIssue(
                f"{p}.path",
                link.path,
                f"overlaps links[{j}].path ({other.path}): two links would own the same files",
                "give each link its own directory, neither inside the other",
            )
        if link.bucket == other.bucket and _prefix_overlap(link.prefix, other.prefix):
            yield SpecIssue(
                f"{p}.prefix",
                link.prefix,
                f"overlaps links[{j}] ({other.bucket}/{other.prefix}): two links would own the same keys",
                "give each link its own key prefix, neither a prefix of the other",
            )


def _checkpoints(spec: ClusterSpec, df: Dataflow) -> Iterator[SpecIssue]:
    """The checkpoint directory and prefix: planned, and shared with no link."""
    ck = df.checkpoints
    if ck is None:
        return
    yield from _placed(spec, "dataflow.checkpoints.path", ck.path)
    yield from _bucket(spec, "dataflow.checkpoints.bucket", ck.bucket)
    yield from _prefix("dataflow.checkpoints.prefix", ck.prefix)
    for j, link in enumerate(df.links):
        if _overlap(ck.path, link.path):
            yield SpecIssue(
                "dataflow.checkpoints.path",
                ck.path,
                f"overlaps links[{j}].path ({link.path})",
                "keep checkpoints in a directory of their own",
            )
        if ck.bucket == link.bucket and _prefix_overlap(ck.prefix, link.prefix):
            yield SpecIssue(
                "dataflow.checkpoints.prefix",
                ck.prefix,
                f"overlaps links[{j}] ({link.bucket}/{link.prefix})",
                "give checkpoints a key prefix of their own",
            )


def _model(spec: ClusterSpec, p: str, m: DataModels) -> Iterator[SpecIssue]:
    """One model distribution entry: bucket, prefix, pool and fast tier, and the filer subscription."""
    yield from _bucket(spec, f"{p}.bucket", m.bucket)
    yield from _prefix(f"{p}.prefix", m.prefix)
    pools = {pool.name: pool for pool in spec.compute.pools}
    pool = pools.get(m.pool)
    if pool is None:
        yield SpecIssue(f"{p}.pool", m.pool, "no such compute pool", f"use one of {', '.join(pools)}")
    elif m.target is None and pool.local_nvme is None:
        yield SpecIssue(
            f"{p}.target",
            None,
            f"pool {m.pool} has no local_nvme, so there is no default fast tier",
            "set target to a directory on the nodes, or give the pool local_nvme",
        )
    if m.filer_access and m.events != "filer-subscribe":
        yield SpecIssue(
            f"{p}.filer_access",
            m.filer_access,
            f"opens the filer to the receivers, but events is {m.events}, which needs no filer",
            "remove filer_access (or use events: filer-subscribe)",
        )
    if m.events == "filer-subscribe" and spec.objectstore.backend != "seaweedfs":
        yield SpecIssue(
            f"{p}.events",
            m.events,
            "filer metadata subscription needs the SeaweedFS filer kiln deploys; this lake is external",
            "use events: poll",
        )
