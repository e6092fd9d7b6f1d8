"""lnet_transaction_timeout: each release's own default, so 2.16 keeps LU-15288's 150 s."""

from __future__ import annotations

from typing import Any

import pytest

from kiln.plan import build_plan
from kiln.spec.loader import validate


@pytest.mark.parametrize(("version", "timeout", "lnd_timeout"), [("2.15", 50, 16), ("2.16", 150, 49)])
def test_transaction_timeout_is_the_release_default(stack: Any, version: str, timeout: int, lnd_timeout: int) -> None:
    data = stack("prod-h100")  # two storage NICs per host on o2ib0: multi-rail
    data["lustre"]["version"] = version
    plan = build_plan(validate(data, "test"), "test")
    t = plan.tunable("lnet.lnet.lnet_transaction_timeout")
    retries = int(plan.tunable("lnet.lnet.lnet_retry_count").value)
    assert t.value == timeout
    # lnet/lnet/api-ni.c lnet_set_lnd_timeout: (transaction timeout - 1) / (retry count + 1)
    assert (int(t.value) - 1) // (retries + 1) == lnd_timeout
    assert "LU-15288" in t.reason
