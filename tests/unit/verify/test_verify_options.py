"""Run options and the checks' variables: `--option <scope>.<variable>=VALUE` reaches the check, unknown names are
refused with the known ones, the previous release's flat names still work with a warning, no secret is reported."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from pathlib import Path

import pytest

from kiln.cli import verify as cli
from kiln.verify.checks import REGISTRY
from kiln.verify.checks.check import Rep, Subject
from kiln.verify.checks.fabric import PerftestVariables
from kiln.verify.checks.gpu import GpuCopyVariables
from kiln.verify.checks.network import Iperf3Variables
from kiln.verify.checks.objectstore import WarpVariables
from kiln.verify.checks.options import DEPRECATED_NAMES, Options, known_names, registered
from kiln.verify.checks.storage import FioVariables, IorVariables, MdtestVariables
from kiln.verify.report import report_dict
from kiln.verify.runner import VerifyRun
from tests.unit.verify.verify_fakes import FakeRemote, context

ROOT = Path(__file__).resolve().parents[3]


def cli_args(*argv: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    cli.register(ap.add_subparsers())
    return ap.parse_args(["verify", "lab", *argv])


def test_a_variable_set_on_the_command_line_reaches_the_check() -> None:
    opts = cli._options(cli_args("--option", "storage.fio.runtime_s=30", "--option", "storage.local_nvme_path=/scr",
                                 "--option", "workdir=/tmp/kv"))
    assert opts.var(FioVariables).runtime_s == 30 and opts.workdir == "/tmp/kv"
    fio_json = (ROOT / "tests/fixtures/tools/fio/read_2jobs.json").read_text()
    remote = FakeRemote("gpu001").on("MemTotal", (0, "2048000\n", ""))
    remote.on(r"^mkdir -p /tmp/kv && cat .*fio --output-format=json", (0, fio_json, ""))
    check = REGISTRY["storage.fio_local_read"]
    ctx = context({"gpu001": remote}, opts)
    sample = check.measure(ctx, next(t for t in ctx.plan.targets if t.check == check.id),
                           Subject("gpu001", ("gpu001",)), Rep(1, 1, False))
    job = sample.raw["job.fio"]
    assert "runtime=30\n" in job and "directory=/scr/kiln-verify\n" in job


def test_unknown_names_are_refused_with_the_known_ones(caplog: pytest.LogCaptureFixture) -> None:
    args = cli_args("--option", "storage.fio.runtim_s=30")
    assert args.func(args) == 2
    assert "unknown option 'storage.fio.runtim_s'; known: " in caplog.text
    assert "storage.fio.runtime_s" in caplog.text and "objectstore.warp.duration_s" in caplog.text


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param({"nope": "1"}, "unknown option 'nope'", id="unknown name"),
        # the secret comes from the environment only
        pytest.param({"s3_secret_key": "x"}, "unknown option 's3_secret_key'", id="the S3 secret"),
        pytest.param({"gpu.tool": "nvbw"}, r"option gpu.tool='nvbw': one of auto, nvbandwidth, bandwidthTest",
                     id="a choice outside the choices"),
        pytest.param({"network.iperf3.seconds": "ten"}, r"option network.iperf3.seconds='ten': not a number",
                     id="a number that is not one"),
    ],
)
def test_option_values_refused(values: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Options().with_values(values)


def test_a_deprecated_flat_name_still_works_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        o = Options().with_values({"fio_runtime_s": "30", "ior_procs_per_node": "4", "workers": "2"})
    assert o.var(FioVariables).runtime_s == 30
    assert o.var(IorVariables).procs_per_node == 4 and o.var(MdtestVariables).procs_per_node == 4
    assert o.workers == 2  # a run-wide option, not renamed
    assert "option fio_runtime_s is deprecated and will be removed; write storage.fio.runtime_s=…" in caplog.text
    assert "write storage.ior.procs_per_node=… and storage.mdtest.procs_per_node=…" in caplog.text
    assert "workers" not in caplog.text


def test_every_deprecated_name_leads_to_known_names_and_every_name_is_documented() -> None:
    known = set(known_names())
    assert all(set(new) <= known for new in DEPRECATED_NAMES.values())
    assert not set(DEPRECATED_NAMES) & known
    doc = (ROOT / "docs" / "acceptance.md").read_text()
    for name in [*known, *DEPRECATED_NAMES]:
        assert f"`{name}`" in doc, f"docs/acceptance.md does not name the option {name}"
    assert all(f.metadata.get("doc") for cls in registered().values() for f in dataclasses.fields(cls))


def test_every_variable_set_is_read_by_a_registered_check() -> None:
    used = {v for c in REGISTRY.values() for v in c.variables}
    assert set(registered().values()) == used


def test_quick_shortens_the_benchmarks_and_never_lengthens_fio() -> None:
    o = cli._options(cli_args("--quick"))
    assert o.var(FioVariables).runtime_s == 10 and o.var(Iperf3Variables).seconds == 5
    assert o.var(WarpVariables).duration_s == 10 and o.var(PerftestVariables).seconds == 3
    o = cli._options(cli_args("--quick", "--option", "storage.fio.runtime_s=4"))
    assert o.var(FioVariables).runtime_s == 4


def test_the_report_lists_the_values_used_and_never_the_secret(tmp_path: Path) -> None:
    ctx = context({})
    opts = Options(s3_secret_key="hunter2-secret").with_values({"objectstore.warp.duration_s": "7", "workers": "2"})
    run = VerifyRun("lab", ctx.plan, ctx.acceptance, opts, [], [], "test", 0.0, 1.0, tmp_path)
    reported = report_dict(run)["options"]
    assert "hunter2-secret" not in json.dumps(report_dict(run))
    assert reported["s3_secret_key_set"] is True and "s3_secret_key" not in reported
    assert reported["objectstore.warp.duration_s"] == 7 and reported["workers"] == 2
    assert reported["storage.fio.runtime_s"] == 60 and reported["gpu.tool"] == GpuCopyVariables().tool
    assert reported["conformance.objectstore_services.units"][0] == "seaweedfs-master"
