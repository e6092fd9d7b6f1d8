"""The options of a `kiln verify` run: the run-wide record and the variables each check declares.

Run-wide options (which checks and hosts, how to reach the hosts, the multi-node launcher, the S3 endpoint and
credentials) are the fields of `Options`. A tool's knobs live on the checks that run it, ReFrame-style: a frozen
dataclass of `Variables` (name, type, default and doc, declared with `var()`) under a scope, listed by each check
that reads it (`Check.variables`). The scope is a check id for one check's knobs
(`conformance.objectstore_services`), an area and a tool for a family of checks (`storage.fio` for every
`storage.fio_*` check) or an area for what its checks share (`storage`).

Both kinds are set as KEY=VALUE strings (`kiln verify --option`, `Options.with_values`): run-wide options by
their name (`workdir`), variables as `<scope>.<variable>` (`storage.fio.runtime_s`). The flat names of the
previous release are deprecated aliases (DEPRECATED_NAMES): they still work and log a warning naming the new one.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Variables:
    """Base of a variable set: subclasses are frozen dataclasses whose fields, declared with var(), are the
    variables of the checks that list the set in `Check.variables`."""

    scope: ClassVar[str]  # the NAME prefix: a check id, `<area>.<tool>` or `<area>`


V = TypeVar("V", bound=Variables)

# scope → its variable set, declared by kiln.verify.checks.check.register() for every check's `variables`
VARIABLES: dict[str, type[Variables]] = {}

# The flat names of the previous release → the names that replace them (one release, then removed).
DEPRECATED_NAMES: dict[str, tuple[str, ...]] = {
    "local_nvme_path": ("storage.local_nvme_path",),
    "lustre_dir": ("storage.lustre_dir",),
    "fio_jobs": ("storage.fio.jobs",),
    "fio_size_per_job": ("storage.fio.size_per_job",),
    "fio_runtime_s": ("storage.fio.runtime_s",),
    "fio_iodepth": ("storage.fio.iodepth",),
    "fio_block_size": ("storage.fio.block_size",),
    "ior_path": ("storage.ior.path",),
    "ior_procs_per_node": ("storage.ior.procs_per_node", "storage.mdtest.procs_per_node"),
    "ior_block": ("storage.ior.block",),
    "mdtest_path": ("storage.mdtest.path",),
    "mdtest_files_per_proc": ("storage.mdtest.files_per_proc",),
    "dataflow_python": ("dataflow.python",),
    "dataflow_fast_tier": ("dataflow.fast_tier",),
    "dataflow_shard_MiB": ("dataflow.shard_MiB",),
    "iperf3_seconds": ("network.iperf3.seconds",),
    "iperf3_streams": ("network.iperf3.streams",),
    "perftest_seconds": ("fabric.perftest.seconds",),
    "perftest_size": ("fabric.perftest.size",),
    "perftest_qps": ("fabric.perftest.qps",),
    "all_reduce_perf": ("fabric.nccl.all_reduce_perf",),
    "nccl_max_bytes": ("fabric.nccl.max_bytes",),
    "gpu_tool": ("gpu.tool",),
    "nvbandwidth_path": ("gpu.nvbandwidth_path",),
    "bandwidth_test_path": ("gpu.bandwidth_test_path",),
    "warp_binary": ("objectstore.warp.binary",),
    "warp_duration_s": ("objectstore.warp.duration_s",),
    "warp_obj_size": ("objectstore.warp.obj_size",),
    "warp_concurrent": ("objectstore.warp.concurrent",),
    "warp_objects": ("objectstore.warp.objects",),
    "warp_bucket": ("objectstore.warp.bucket",),
    "objectstore_units": ("conformance.objectstore_services.units",),
}

_NOT_SET_BY_NAME = ("s3_secret_key", "variables")  # the secret comes from the environment only


def var(default: T, doc: str) -> T:
    """One variable of a check: its default and what it sets (the type is the field's annotation)."""
    return field(default=default, metadata={"doc": doc})


def declare(variables: type[Variables]) -> None:
    """Make a variable set known under its scope (kiln.verify.checks.check.register() calls it)."""
    known = VARIABLES.setdefault(variables.scope, variables)
    if known is not variables:
        raise ValueError(f"two variable sets for scope {variables.scope}: {known.__name__}, {variables.__name__}")


def registered() -> dict[str, type[Variables]]:
    """Every check's variable sets by scope (importing the checks package registers the checks)."""
    import kiln.verify.checks  # noqa: F401

    return dict(VARIABLES)


@dataclass(frozen=True, slots=True)
class Options:
    """Run-wide options, and the values of the checks' variables this run sets (the others keep their defaults).

    The CLI sets the common ones by flag and any of them with --option KEY=VALUE (with_values)."""

    strict: bool = False
    only: tuple[str, ...] = ()
    hosts_pattern: str | None = None
    workers: int = 4
    # benchmarks whose hosts share nothing (local fio, GPU copies) run on this many hosts at once; 0: as `workers`;
    # 1 where the hosts share one machine (the podman lab), so that no two bandwidth figures split a disk or a core
    benchmark_workers: int = 0
    backend_template: str | None = None
    command_timeout_s: float = 900.0
    workdir: str = "/tmp/kiln-verify"  # scratch directory on the hosts (tool output, pushed binaries)
    # multi-node launcher (IOR, mdtest, NCCL across nodes)
    launcher: Literal["mpirun", "srun"] = "mpirun"
    launcher_host: str | None = None
    mpirun_args: str = ""
    srun_args: str = ""
    # ports the benchmark servers listen on
    # object store
    s3_endpoint: str | None = None  # default: every object-store host's storage address:s3_port
    s3_access_key: str | None = None  # default: the plan's access key id
    s3_secret_key: str | None = field(default=None, repr=False)  # from KILN_S3_SECRET_KEY; never reported
    # re-verification: reuse an earlier report's still-valid measurements (kiln/verify/reuse.py) unless `full`
    full: bool = False
    reuse_from: str | None = None  # an earlier report (directory or report.json); default: the --out directory's
    reuse_max_age_h: float = 24.0  # a measurement older than this is taken again
    variables: tuple[Variables, ...] = ()  # the variable sets this run sets; var() gives the defaults of others

    def var(self, variables: type[V]) -> V:
        """This run's values of a variable set (its defaults where nothing set them)."""
        for v in self.variables:
            if isinstance(v, variables):
                return v
        return variables()

    def value(self, name: str) -> Any:
        """The value of a run-wide option or of a variable by its `<scope>.<variable>` name."""
        if "." not in name:
            return getattr(self, name)
        scope, _, variable = name.rpartition(".")
        return getattr(self.var(registered()[scope]), variable)

    def with_values(self, pairs: dict[str, str]) -> Options:
        """Options with KEY=VALUE strings converted to each option's type; ValueError names an unknown name (with
        the known ones) or a bad value. A deprecated flat name sets the names that replace it, with a warning."""
        run: dict[str, Any] = {}
        sets: dict[type[Variables], dict[str, Any]] = {}
        for given, raw in pairs.items():
            for name in _resolve(given):
                if "." in name:
                    scope, _, variable = name.rpartition(".")
                    cls = registered()[scope]
                    sets.setdefault(cls, {})[variable] = _convert(name, typing.get_type_hints(cls)[variable], raw)
                else:
                    run[name] = _convert(name, typing.get_type_hints(Options)[name], raw)
        chosen = {type(v): v for v in self.variables}
        for cls, values in sets.items():
            chosen[cls] = dataclasses.replace(self.var(cls), **values)
        return dataclasses.replace(self, **run, variables=tuple(chosen.values()))

    def public(self) -> dict[str, Any]:
        """For the report: every run-wide option except the secret (only whether one is set), then every check
        variable by its `<scope>.<variable>` name, with the value this run used."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _NOT_SET_BY_NAME}
        out["s3_secret_key_set"] = bool(self.s3_secret_key)
        for scope, cls in sorted(registered().items()):
            values = self.var(cls)
            out.update({f"{scope}.{f.name}": getattr(values, f.name) for f in dataclasses.fields(values)})
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def known_names() -> list[str]:
    """Every name --option accepts (deprecated names aside): run-wide options, then `<scope>.<variable>`."""
    run = [f.name for f in dataclasses.fields(Options) if f.name not in _NOT_SET_BY_NAME]
    checks = sorted(f"{scope}.{f.name}" for scope, cls in registered().items() for f in dataclasses.fields(cls))
    return run + checks


def _resolve(name: str) -> tuple[str, ...]:
    if name in DEPRECATED_NAMES:
        new = DEPRECATED_NAMES[name]
        log.warning("option %s is deprecated and will be removed; write %s", name,
                    " and ".join(f"{n}=…" for n in new))
        return new
    known = known_names()
    if name not in known:
        raise ValueError(f"unknown option {name!r}; known: {', '.join(known)}")
    return (name,)


def _convert(name: str, hint: Any, raw: str) -> Any:
    """A KEY=VALUE string as the option's declared type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    try:
        if hint is bool:
            return raw.lower() in ("1", "true", "yes", "on")
        if hint in (int, float):
            return hint(raw)
    except ValueError:
        raise ValueError(f"option {name}={raw!r}: not a number ({hint.__name__})") from None
    if origin is tuple:
        return tuple(x for x in re.split(r"[,\s]+", raw) if x)
    if origin is Literal:
        if raw not in args:
            raise ValueError(f"option {name}={raw!r}: one of {', '.join(map(str, args))}")
        return raw
    if origin in (typing.Union, types.UnionType):  # str | None, int | None: empty means unset
        inner = [a for a in args if a is not type(None)]
        return _convert(name, inner[0], raw) if raw and len(inner) == 1 else raw or None
    return raw
