"""Run the Pulumi program under Pulumi's mocks and record every resource registration.

TEST DOUBLE: RecordingMocks/RecordingMonitor stand in for the Pulumi engine (pulumi.runtime.set_mocks);
they record what the program asks for and never back a performance or hardware claim.

Each run starts from a fresh root stack and fresh config, and calls the program's entry point
(kiln.infra.program.main) instead of importing __main__.py, so nothing leaks between stacks through
module caching.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest
from pulumi.runtime import rpc, settings
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks

from kiln.infra import program, resources
from tests.conftest import STACKS, stack_data

SECRET = "kiln-test-Z3cr3tS3KeyV4lue-do-not-leak"  # the s3SecretKey the mocked stacks are given
JWT_SECRET = "kiln-test-jwt-master-key-0123456789abcdef-do-not-leak"  # the seaweedfsJwtKey they are given


@dataclass(frozen=True, slots=True)
class Record:
    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    dependencies: tuple[str, ...]
    inputs: dict[str, Any]  # as the engine receives them: secrets still wrapped (rpc.is_rpc_secret)


class RecordingMocks(Mocks):
    """Echo inputs back as outputs (secret wrappers included, so secretness survives)."""

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class RecordingMonitor(MockMonitor):
    """MockMonitor that also keeps each registration's parent, dependencies and wrapped inputs."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.records: list[Record] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.records.append(Record(
                type=request.type, name=request.name, urn=response.urn, parent=request.parent,
                custom=bool(request.custom), dependencies=tuple(request.dependencies),
                inputs=rpc.deserialize_properties(request.object),
            ))
        return response


@dataclass
class Run:
    stack: str
    records: list[Record]
    result: program.Program | None = None
    secret_flags: dict[str, bool] = field(default_factory=dict)
    error: BaseException | None = None

    def by_parent(self, urn: str) -> list[Record]:
        return [r for r in self.records if r.parent == urn]

    def component(self, token: str) -> Record:
        found = [r for r in self.records if r.type == token]
        assert len(found) == 1, f"{token}: {len(found)} registrations"
        return found[0]


def run_program(stack: str, cluster: dict[str, Any], secret: str = SECRET, extra_config: dict[str, str] | None = None,
                ) -> Run:
    """Run kiln.infra.program.main() for one stack under mocks; collect registrations and secretness."""
    settings.ROOT.set(None)  # a fresh root stack resource for this run
    _stub_chart_checkouts()
    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="kiln", stack=stack, preview=False, monitor=monitor)
    config = {"kiln:cluster": json.dumps(cluster), "kiln:s3SecretKey": secret, "kiln:seaweedfsJwtKey": JWT_SECRET,
              **(extra_config or {})}
    pulumi.runtime.set_all_config(config, secret_keys=["kiln:s3SecretKey", "kiln:seaweedfsJwtKey"])
    run = Run(stack, monitor.records)

    @pulumi.runtime.test
    def body() -> Any:
        result = program.main()
        run.result = result

        async def secrecy() -> None:
            for comp in result.components.values():
                for role, res in comp.resources.items():
                    if isinstance(res, pulumi.CustomResource) and role.startswith("secret-"):
                        run.secret_flags[role] = await res.string_data.is_secret()  # type: ignore[attr-defined]

        return pulumi.Output.from_input(secrecy())

    try:
        body()
    except Exception as exc:  # the program's own errors (bad spec) are part of what tests look at
        run.error = exc
    return run


def _stub_chart_checkouts() -> None:
    """TEST DOUBLE: an empty `.git` in a temporary chart cache stands in for the clones of the git-published
    charts, so the program under mocks resolves their local paths without reaching the network."""
    import tempfile
    from pathlib import Path

    from kiln.knowledge.kubernetes import kubernetes
    from kiln.render.manifests import HelmChart

    if not str(resources.CHART_CACHE).startswith(tempfile.gettempdir()):
        resources.CHART_CACHE = Path(tempfile.mkdtemp(prefix="kiln-charts-"))
    for git in kubernetes().git_repositories.values():
        chart = HelmChart("", "", "", None, None, {}, git_url=git.url, git_tag=git.tag)
        (resources.chart_checkout_dir(chart) / ".git").mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="session")
def runs() -> Iterator[dict[str, Run]]:
    """Every stack in stacks/, run once under mocks."""
    yield {s: run_program(s, stack_data(s)) for s in STACKS}


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any, bool]]:
    """(path, leaf, inside_a_secret) for every leaf of a registration's inputs."""
    yield from _walk(value, path, False)


def _walk(value: Any, path: str, secret: bool) -> Iterator[tuple[str, Any, bool]]:
    if rpc.is_rpc_secret(value):
        yield from _walk(rpc.unwrap_rpc_secret(value), path, True)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k), secret)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]", secret)
    else:
        yield path, value, secret
