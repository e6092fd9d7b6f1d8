"""dataflow.model_distribution (kiln/verify/checks/dataflow_models.py) against FakeRemote test doubles: the check
PUTs a model, waits for the receivers without asking the mover, judges the object-store host's transmit counters,
and fails with the unit to look at when a receiver is missing or shows a partial copy."""

from __future__ import annotations

import itertools
import json
import shlex

import pytest

from kiln.verify.checks import REGISTRY
from kiln.verify.checks.check import CheckError, Rep
from kiln.verify.checks.dataflow import DataflowVariables
from kiln.verify.checks.dataflow_models import tx_bytes
from kiln.verify.checks.options import Options
from tests.unit.verify.verify_fakes import FakeRemote, context, lab

SECRET = "s3cr3t-for-the-test-only"
MODEL = 32 << 20
NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed
    lo: 999999999 10 0 0 0 0 0 0 {lo} 10 0 0 0 0 0 0
  eth0: 100 1 0 0 0 0 0 0 {eth0} 1 0 0 0 0 0 0
  eth1: 100 1 0 0 0 0 0 0 {eth1} 1 0 0 0 0 0 0
"""


def store(sent: int) -> FakeRemote:
    """s3-01 whose interfaces have sent `sent` more bytes at each read (loopback counts far more, ignored)."""
    reads = itertools.count()

    def answer(_: str) -> tuple[int, str, str]:
        n = next(reads)
        return 0, NET_DEV.format(lo=n * 10**12, eth0=1000 + n * sent, eth1=5), ""

    return FakeRemote("s3-01").on(r"^cat /proc/net/dev$", answer)


def receiver(arrived: bool = True, bad: bool = False) -> FakeRemote:
    def wait(cmd: str) -> tuple[int, str, str]:
        paths = json.loads(shlex.split(cmd)[3])
        out = {"arrived": {p: 1.5 + i for i, p in enumerate(paths)} if arrived else {},
               "bad": {paths[0]: "1024 bytes under the final name, expected 33554432"} if bad else {}}
        return 0, json.dumps(out) + "\n", ""

    status = [{"link": "models0", "direction": "import", "bytes_done": MODEL}, {"link": "corpus", "bytes_done": 7}]
    return (FakeRemote("gpu001")
            .on(r".", (0, "", ""))
            .on(r"put_object", (0, json.dumps({"md5": "ab" * 16, "bytes": MODEL, "put_done": 1000.0}) + "\n", ""))
            .on(r"getsize", wait)
            .on(r"read_all", (0, json.dumps(status) + "\n", "")))


def run(remotes: dict[str, FakeRemote]):  # type: ignore[no-untyped-def]
    ctx = context(remotes, Options(s3_secret_key=SECRET, variables=(
        DataflowVariables(fast_tier="/srv/kiln-fast", shard_MiB=32),)))
    plan, _, _ = lab()
    target = next(t for t in plan.targets if t.check == "dataflow.model_distribution")
    (subject,) = REGISTRY["dataflow.model_distribution"].subjects(ctx, target)
    return subject, REGISTRY["dataflow.model_distribution"].measure(ctx, target, subject, Rep(1, 3, False))


def test_the_lab_plans_three_receivers_on_one_host_with_the_filer_open_to_it_only() -> None:
    plan, _, _ = lab()
    (m,) = plan.dataflow.models  # type: ignore[union-attr]
    assert m.hosts == ("gpu001",) and m.receivers == 3 and m.filer_access
    assert plan.dataflow.filer_subscribers == ("gpu001",)  # type: ignore[union-attr]


def test_a_model_put_reaches_every_receiver_and_the_lake_sends_its_bytes_once() -> None:
    gpu = receiver()
    subject, s = run({"gpu001": gpu, "s3-01": store(int(MODEL * 1.03))})
    assert subject.hosts == ("gpu001",)
    assert s.value == pytest.approx(1.03, abs=1e-6)
    assert s.info["receivers"] == 3 and s.info["mover_pulled_bytes"] == MODEL and s.info["arrival_last_s"] == 3.5
    assert "3/3 receivers got the 33.6 MB model unasked" in s.details[0]
    puts = [c for c in gpu.commands if "put_object" in c]
    assert len(puts) == 1 and " datasets models/kiln-verify-rep1-" in puts[0]
    # Nothing asks the mover to move anything: no `kiln data` and no distribute() on the host.
    assert not [c for c in gpu.commands if "kiln data" in c or "distribute" in c]
    waits = [c for c in gpu.commands if "getsize" in c]
    assert all(f"/mnt/local-nvme/models/receiver-{i}/kiln-verify-rep1-" in waits[0] for i in (1, 2, 3))
    assert [c for c in gpu.commands if "delete_object" in c]
    (rm,) = [c for c in gpu.commands if c.startswith("rm -f /mnt")]
    assert "/srv/kiln-fast/.kiln-models-relay/kiln-verify-rep1-" in rm
    assert not [c for c in gpu.commands if SECRET in c]
    assert any(SECRET in content for content, _ in gpu.secret_files.values())


def test_a_receiver_that_never_gets_the_model_is_an_error_naming_the_service() -> None:
    gpu = receiver(arrived=False)
    with pytest.raises(CheckError, match=r"0/3 receivers got datasets/models/kiln-verify-rep1-.*within 30 s.*"
                                         r"journalctl -u kiln-datamover-models@0 on gpu001"):
        run({"gpu001": gpu, "s3-01": store(MODEL)})
    assert [c for c in gpu.commands if "delete_object" in c]  # the object is deleted all the same


def test_a_partial_copy_under_the_final_name_is_an_error() -> None:
    with pytest.raises(CheckError, match=r"exposed a wrong copy under the final name: .*1024 bytes"):
        run({"gpu001": receiver(bad=True), "s3-01": store(MODEL)})


def test_tx_bytes_sums_every_interface_but_loopback() -> None:
    ctx = context({"s3-01": FakeRemote("s3-01").on(r".", (0, NET_DEV.format(lo=10**9, eth0=300, eth1=40), ""))})
    assert tx_bytes(ctx, "s3-01") == 340
