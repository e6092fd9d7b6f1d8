"""storage.lnet_selftest: the plan's target, the lst output parser and the check against fake hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.verify.checks import REGISTRY
from kiln.verify.checks.check import NotApplicable, Rep
from kiln.verify.parsers import ParseError, parse_lst_bw
from tests.unit.verify.verify_fakes import FakeRemote, context, fake_tool, lab

# Shape of `lst stat --bw` as lnet/utils/lst.c lst_print_lnet_stat prints it (two intervals).
LST_OUT = """[LNet Bandwidth of s]
[R] Avg: 1000.00  MiB/s Min: 990.00   MiB/s Max: 1010.00  MiB/s
[W] Avg: 1.00     MiB/s Min: 0.90     MiB/s Max: 1.10     MiB/s
[LNet Bandwidth of s]
[R] Avg: 1200.00  MiB/s Min: 1190.00  MiB/s Max: 1210.00  MiB/s
[W] Avg: 1.20     MiB/s Min: 1.10     MiB/s Max: 1.30     MiB/s
"""


def test_parser_averages_intervals() -> None:
    received, sent = parse_lst_bw(LST_OUT)
    assert received == pytest.approx(1100 * 1048576) and sent == pytest.approx(1.1 * 1048576)


def test_parser_refuses_output_without_a_bandwidth_block() -> None:
    with pytest.raises(ParseError):
        parse_lst_bw("Can't open LST session\n")


def test_target_from_the_plan() -> None:
    plan, _, _ = lab()
    t = next(t for t in plan.targets if t.check == "storage.lnet_selftest")
    assert t.scope == "pair" and t.requires == ("lustre",) and t.expected > 0
    assert "lnet_tcp" in t.why  # the lab's LNet runs over TCP


def _pair() -> tuple[str, str]:
    plan, _, _ = lab()
    return plan.groups["kiln_lustre_clients"][0], plan.groups["kiln_lustre_oss"][0]


def test_not_applicable_without_the_module() -> None:
    client, server = _pair()
    remotes = {h: FakeRemote(h).on("modprobe lnet_selftest", (1, "", "FATAL: Module lnet_selftest not found")) for h in
               (client, server)}
    ctx = context(remotes)
    check = REGISTRY["storage.lnet_selftest"]
    plan, _, _ = lab()
    t = next(t for t in plan.targets if t.check == "storage.lnet_selftest")
    subject = check.subjects(ctx, t)[0]
    assert subject.hosts == (client, server)
    with pytest.raises(NotApplicable, match="lnet_selftest module not available"):
        check.measure(ctx, t, subject, Rep(1, 1, False))


def test_measures_received_bandwidth(tmp_path: Path) -> None:
    client, server = _pair()
    fake_tool(tmp_path / "bin", "lst", f"""# test double of lst: prints a bandwidth block for `stat`, nothing otherwise
if [ "$1" = stat ]; then cat <<'X'
{LST_OUT}X
fi""")
    remotes = {client: FakeRemote(client, tmp_path / "bin").on("modprobe lnet_selftest", (0, "", "")),
               server: FakeRemote(server).on("modprobe lnet_selftest", (0, "", ""))}
    ctx = context(remotes)
    plan, _, _ = lab()
    t = next(t for t in plan.targets if t.check == "storage.lnet_selftest")
    check = REGISTRY["storage.lnet_selftest"]
    sample = check.measure(ctx, t, check.subjects(ctx, t)[0], Rep(1, 1, False))
    assert sample.value == pytest.approx(1100 * 1048576 / 1e9)
    nid = plan.host(server).nics[-1].nid or ""
    assert sample.info["server_nid"].split("@")[1] == nid.split("@")[1]
    assert any("add_test --batch b" in c for c in remotes[client].commands)
