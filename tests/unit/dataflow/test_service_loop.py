"""The service loop (kiln/dataflow/service.py): a failed pass never ends it, a busy link waits a cycle, and a run of
failed cycles backs off."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.dataflow import service
from kiln.dataflow.lock import LockBusy


def test_backoff_doubles_while_cycles_fail_and_is_bounded() -> None:
    assert [service.backoff_s(60, n) for n in range(6)] == [60, 120, 240, 480, 480, 480]


def test_whatever_a_pass_raises_is_a_failed_pass_not_a_dead_loop() -> None:
    class EndpointConnectionError(Exception):
        pass

    def outage() -> bool:
        raise EndpointConnectionError("Could not connect")

    def busy() -> bool:
        raise LockBusy("corpus.link is being moved by gpu001 pid 7")

    assert service._guarded("corpus import", outage) == 1
    assert service._guarded("corpus import", busy) == 0  # another mover has it: not a failure
    assert service._guarded("corpus import", lambda: True) == 0
    assert service._guarded("corpus import", lambda: False) == 1
    with pytest.raises(KeyboardInterrupt):  # a stop is a stop
        service._guarded("corpus import", lambda: (_ for _ in ()).throw(KeyboardInterrupt()))


def test_sigterm_ends_a_pass_with_a_terminal_status(tmp_path: Path) -> None:
    import json
    import os
    import signal

    from kiln.cli.data import _stop_on_sigterm
    from kiln.dataflow.lake import Credentials
    from kiln.dataflow.mover import Mover

    old = signal.getsignal(signal.SIGTERM)
    try:
        _stop_on_sigterm()
        mover = Mover(Credentials("http://127.0.0.1:9", "k", "s-not-contacted"), tmp_path)
        with pytest.raises(SystemExit), mover.status("corpus", "import"):
            os.kill(os.getpid(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, old)
    status = json.loads((tmp_path / "corpus.import.status.json").read_text())
    assert status["state"] == "failed" and status["error_class"] == "SystemExit"
