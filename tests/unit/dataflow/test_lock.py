"""One mover per link (kiln/dataflow/lock.py): a second waits, or gives up naming the holder."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kiln.dataflow.lock import LockBusy, hold


def test_a_second_mover_is_told_who_holds_the_link(tmp_path: Path) -> None:
    path = tmp_path / "corpus.link.lock"
    with hold(path, "corpus.link", 0):
        with pytest.raises(LockBusy) as exc, hold(path, "corpus.link", 0.2):
            pass
        assert "corpus.link is being moved by" in str(exc.value) and " pid " in str(exc.value)
        assert "fix: wait for that pass to end" in str(exc.value)


def test_a_second_mover_waits_its_turn(tmp_path: Path) -> None:
    path, order = tmp_path / "x.lock", []

    def first() -> None:
        with hold(path, "x", None):
            order.append("first in")
            time.sleep(0.3)
            order.append("first out")

    t = threading.Thread(target=first)
    t.start()
    time.sleep(0.1)
    with hold(path, "x", 5):
        order.append("second in")
    t.join()
    assert order == ["first in", "first out", "second in"]
