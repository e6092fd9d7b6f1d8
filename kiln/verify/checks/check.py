"""What an acceptance check is: where it runs (subjects), what one run gives (a Sample), what stops it
(NotApplicable, CheckError), the variables it reads, the conformance kind and the registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks.options import Variables, declare

if TYPE_CHECKING:
    from kiln.verify.checks.context import Context


@dataclass(frozen=True, slots=True)
class Subject:
    """What one result row is about: a host, a host pair (+ rail), or a group measured together."""

    label: str
    hosts: tuple[str, ...]  # hosts[0] runs the tool (client / launcher)
    extra: tuple[tuple[str, str], ...] = ()

    def get(self, key: str, default: str = "") -> str:
        return dict(self.extra).get(key, default)


@dataclass(slots=True)
class Sample:
    value: float
    details: list[str] = field(default_factory=list)
    raw: dict[str, str] = field(default_factory=dict)  # file name → content, kept beside the report
    info: dict[str, Any] = field(default_factory=dict)  # extra figures (per-job bandwidth, retransmits, ...)


class NotApplicable(Exception):
    """Raised by a check when it finds at run time that it cannot apply (reason in the message)."""


class NothingPlanned(NotApplicable):
    """The plan expects nothing of this kind on the subject (no NCCL environment for its pool, no RDMA device on the
    host, no default quotas): the row is NOT APPLICABLE, and for the sign-off it is no missing evidence, since the
    plan asks for none (kiln/verify/verdict.py)."""


class CheckError(RuntimeError):
    """The check could not produce a measurement (tool missing, command failed, bad configuration)."""


@dataclass(frozen=True, slots=True)
class Rep:
    index: int  # 1-based within its phase
    total: int
    warmup: bool

    @property
    def label(self) -> str:
        return f"warmup{self.index}" if self.warmup else f"rep{self.index}"


class Check(ABC):
    """One acceptance check (a target's `check` id). Subclasses say where it runs and how to measure."""

    id: ClassVar[str]
    kind: ClassVar[Literal["conformance", "benchmark"]] = "benchmark"
    runbook: ClassVar[str] = ""  # docs/runbooks/acceptance-<area>.md
    parallel_hosts: ClassVar[bool] = False  # subjects may run at the same time (no shared resource)
    single_run: ClassVar[bool] = False  # one run per subject whatever acceptance.repetitions says (faults)
    tools: ClassVar[tuple[str, ...]] = ()  # what the report names as the tool(s)
    variables: ClassVar[tuple[type[Variables], ...]] = ()  # the variable sets it reads (ctx.var), set by --option

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        """Default by scope: host/node → one per host; pair → a ring of host pairs; aggregate → one."""
        hosts = ctx.group_hosts(target.group)
        if target.scope in ("host", "node"):
            return [Subject(h, (h,)) for h in hosts]
        if target.scope == "pair":
            return ring_pairs(hosts)
        if not hosts:
            return []
        launcher = ctx.options.launcher_host if ctx.options.launcher_host in hosts else hosts[0]
        ordered = (launcher, *[h for h in hosts if h != launcher])
        return [Subject(f"{target.group} ({len(hosts)} hosts, from {launcher})", ordered)]

    def not_applicable(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> str | None:
        """The reason the subject's hosts lack what the target requires, or None. Raises NothingPlanned where the plan
        gives a host none of it (a storage-only pool's host in a GPU check's group)."""
        self.planned_for(ctx, target, subject)
        for req in target.requires:
            for h in subject.hosts:
                reason = ctx.probe(h, req)
                if reason:
                    return reason if len(subject.hosts) == 1 else f"{h}: {reason}"
        return None

    @staticmethod
    def planned_for(ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:
        """NothingPlanned when the plan gives one of the subject's hosts none of what the target requires."""
        for req in target.requires:
            for h in subject.hosts:
                lack = ctx.plan_lacks(h, req)
                if lack:
                    raise NothingPlanned(lack if len(subject.hosts) == 1 else f"{h}: {lack}")

    def prepare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:  # noqa: B027 - optional hook
        """Once before the runs of a subject (push binaries, lay out files)."""

    def cleanup(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> None:  # noqa: B027 - optional hook
        """Once after the runs of a subject, also after errors."""

    @abstractmethod
    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        """One run. Raise NotApplicable, CheckError or ParseError when there is no value."""


@dataclass(slots=True)
class Findings:
    """What a conformance check found on one subject: each mismatch as "<what>: planned <x>, found <y>" and each
    note (counted as none) in the order found, the read-backs kept beside the report, extra figures."""

    details: list[str] = field(default_factory=list)
    raw: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def mismatch(self, text: str) -> None:
        self.details.append(text)

    def note(self, text: str) -> None:
        self.details.append(f"note: {text}")

    def sample(self) -> Sample:
        """The conformance figure: the number of mismatches (the target is 0)."""
        mismatches = sum(1 for d in self.details if not d.startswith("note:"))
        return Sample(float(mismatches), details=self.details, raw=self.raw, info=self.info)


class Conformance(Check):
    """A check of the hosts' state against the plan: `compare` lists what differs, the base counts it. It runs once
    per subject, and on many subjects at once."""

    kind = "conformance"
    runbook = "docs/runbooks/acceptance-conformance.md"
    parallel_hosts = True

    def measure(self, ctx: Context, target: AcceptanceTarget, subject: Subject, rep: Rep) -> Sample:
        return self.compare(ctx, target, subject).sample()

    @abstractmethod
    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        """Read the state back on the subject and list every mismatch. Raise NotApplicable or CheckError
        when there is nothing to compare."""


def ring_pairs(hosts: list[str]) -> list[Subject]:
    """Each host once as client and once as server: h0→h1, h1→h2, …, hN→h0 (two hosts: both directions)."""
    if len(hosts) < 2:
        return []
    return [Subject(f"{a}→{b}", (a, b)) for a, b in zip(hosts, hosts[1:] + hosts[:1], strict=True)]


REGISTRY: dict[str, Check] = {}


def register(cls: type[Check]) -> type[Check]:
    """Add a check to the registry, and its variable sets to those --option knows."""
    for variables in cls.variables:
        declare(variables)
    REGISTRY[cls.id] = cls()
    return cls
