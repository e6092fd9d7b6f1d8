"""The failover drills (kiln/verify/checks/ha.py) against a TEST DOUBLE of Pacemaker's view: crm_mon's XML
(Pacemaker 2.1 `crm_mon --output-as=xml`: nodes with online=, resources with role/active and the node they run on)
answered by FakeRemote from a small state machine."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from kiln.plan import build_plan
from kiln.plan.model import AcceptanceTarget
from kiln.spec import load_stack
from kiln.verify.checks.check import Rep, Subject
from kiln.verify.checks.context import Context
from kiln.verify.checks.ha import LnetLoss, PartnerLoss, parse_crm_mon
from kiln.verify.checks.options import Options
from tests.unit.verify.verify_fakes import FakeRemote, context

TARGETS = ("lab-OST0000", "lab-OST0001", "lab-OST0002", "lab-OST0003")
HOME = {"lab-OST0000": "oss01", "lab-OST0001": "oss01", "lab-OST0002": "oss02", "lab-OST0003": "oss02"}


def crm_mon(where: dict[str, str], online: set[str]) -> str:
    nodes = "".join(f'<node name="{n}" id="{i}" online="{str(n in online).lower()}" standby="false"/>'
                    for i, n in enumerate(("oss01", "oss02"), 1))
    res = "".join(f'<resource id="{r}" resource_agent="ocf:lustre:Lustre" role="Started" active="true" '
                  f'nodes_running_on="1"><node name="{n}" id="1" cached="true"/></resource>' for r, n in where.items())
    return (f'<pacemaker-result api-version="2.25"><nodes>{nodes}</nodes><resources>{res}</resources>'
            f'<node_attributes><node name="oss01"><attribute name="lnet_eth1" value="3"/></node></node_attributes>'
            f'<status code="0" message="OK"/></pacemaker-result>')


class Cluster:
    """TEST DOUBLE: Pacemaker as the drills see it; a few polls after an event, the targets move. A crash
    starts when the drill's crash command has created `crashed` (polls before it are the drill settling)."""

    def __init__(self, crashed: Path | None = None) -> None:
        self.where = dict(HOME)
        self.online = {"oss01", "oss02"}
        self.polls = 0
        self.event: str | None = None
        self.crashed = crashed

    def answer(self, command: str) -> tuple[int, str, str]:
        if self.event == "crash" and self.crashed is not None and not self.crashed.exists():
            return 0, crm_mon(self.where, self.online), ""
        self.polls += 1
        if self.event == "crash" and self.polls > 3:  # fenced and taken over
            self.where = dict.fromkeys(TARGETS, "oss01")
            self.event = "back" if self.polls > 5 else "crash"
        elif self.event == "back":
            self.online = {"oss01", "oss02"}
        elif self.event == "lnet" and self.polls > 2:
            self.where = {**self.where, "lab-OST0000": "oss02", "lab-OST0001": "oss02"}
            self.event = None
        return 0, crm_mon(self.where, self.online), ""

    def link(self, command: str) -> tuple[int, str, str]:
        if command.endswith("down"):
            self.event, self.polls = "lnet", 0
        return 0, "", ""

    def move(self, command: str) -> tuple[int, str, str]:
        _, _, _, rid, node, *_ = command.split()
        if rid not in self.where:  # pcs refuses to move a resource that is not running
            return 1, "", f"Error: It is not possible to move resource '{rid}' as it is not running at the moment"
        self.where[rid] = node
        return 0, "", ""

    def cleanup(self, command: str) -> tuple[int, str, str]:
        rid = command.split()[-1]  # a cleaned-up resource is started again where it may run
        self.where.setdefault(rid, "oss01")
        return 0, "", ""


def drill_ctx(tmp_path: Path, cluster: Cluster, **opts: str) -> tuple[Context, dict[str, FakeRemote]]:
    remotes = {h: FakeRemote(h).on(r"crm_mon -1", cluster.answer).on(r"^pcs resource move", cluster.move)
                                .on(r"ip link set", cluster.link).on(r"^pcs resource cleanup", cluster.cleanup)
                                .on(r"^crm_resource --wait", (0, "", ""))
               for h in ("oss01", "oss02")}
    options = Options().with_values({"ha.drill": "true", **opts})
    return context(remotes, options), remotes


def target(check: str) -> AcceptanceTarget:
    plan = build_plan(load_stack("lab"))
    return next(t for t in plan.targets if t.check == check)


def test_parse_crm_mon_reads_placement_and_online_nodes() -> None:
    where, online = parse_crm_mon(crm_mon(HOME, {"oss01"}), set(TARGETS))
    assert where == HOME and online == {"oss01"}


def test_not_applicable_without_pairs_or_without_the_drill_option(tmp_path: Path) -> None:
    ctx = context({"oss01": FakeRemote("oss01"), "oss02": FakeRemote("oss02")})
    t = target("ha.partner_loss")
    subject = PartnerLoss().subjects(ctx, t)[0]
    assert "ha.drill=true" in (PartnerLoss().not_applicable(ctx, t, subject) or "")
    ctx_drill = context(ctx.remotes, Options().with_values({"ha.drill": "true"}))  # type: ignore[arg-type]
    assert "ha.crash_command" in (PartnerLoss().not_applicable(ctx_drill, t, subject) or "")
    dev = Context(build_plan(load_stack("dev")), ctx.acceptance, ctx.inventory, ctx.remotes, ctx.options)
    sub = PartnerLoss().subjects(dev, t)[0]
    assert "no failover pairs" in (PartnerLoss().not_applicable(dev, t, sub) or "")


def test_partner_loss_measures_the_takeover_and_restores_the_pair(tmp_path: Path) -> None:
    crashed = tmp_path / "crashed"
    cluster = Cluster(tmp_path / "crashed-oss02")
    ctx, remotes = drill_ctx(tmp_path, cluster, **{"ha.crash_command": f"touch {crashed}-{{host}}"})
    cluster.event = "crash"
    t = target("ha.partner_loss")
    sample = PartnerLoss().measure(ctx, t, Subject("pair", ("oss01", "oss02")), Rep(1, 1, False))
    assert (tmp_path / "crashed-oss02").exists()  # the second node is the one lost
    assert 0 <= sample.value < t.fail
    assert any("ran throughout" in d for d in sample.details)
    moves = [c for c in remotes["oss01"].commands if c.startswith("pcs resource move")]
    assert sorted(m.split()[3] for m in moves) == ["lab-OST0002", "lab-OST0003"]
    assert cluster.where == HOME


def test_a_target_left_stopped_after_the_crash_is_cleaned_up_before_moving_back(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "crashed")
    ctx, remotes = drill_ctx(tmp_path, cluster, **{"ha.crash_command": f"touch {tmp_path}/crashed"})
    cluster.event = "crash"
    original = cluster.answer

    def lose_one(command: str) -> tuple[int, str, str]:  # the partner returns, one target failed to start
        rc, _, err = original(command)
        if cluster.event == "back" and "lab-OST0002" in cluster.where and cluster.polls == 6:
            del cluster.where["lab-OST0002"]
        return rc, crm_mon(cluster.where, cluster.online), err

    remotes["oss01"].on(r"crm_mon -1", lose_one)
    sample = PartnerLoss().measure(ctx, target("ha.partner_loss"), Subject("pair", ("oss01", "oss02")),
                                   Rep(1, 1, False))
    cmds = remotes["oss01"].commands
    assert "pcs resource cleanup lab-OST0002" in cmds
    assert cmds.index("pcs resource cleanup lab-OST0002") < cmds.index(next(c for c in cmds if "move lab-OST0002" in c))
    assert any("cleaned up" in d for d in sample.details)
    assert cluster.where == HOME


def test_lnet_loss_takes_the_link_down_and_up_and_moves_targets_back(tmp_path: Path) -> None:
    cluster = Cluster()
    ctx, remotes = drill_ctx(tmp_path, cluster)
    # a short stability window (2 × (monitor + dampen) = 2 s) for a unit test
    ha = replace(ctx.plan.ha, timing=replace(ctx.plan.ha.timing, lnet_monitor_s=0, lnet_dampen_s=1))
    ctx = Context(replace(ctx.plan, ha=ha), ctx.acceptance, ctx.inventory, ctx.remotes, ctx.options)
    sample = LnetLoss().measure(ctx, target("ha.lnet_loss"), Subject("pair", ("oss01", "oss02")), Rep(1, 1, False))
    links = [c for c in remotes["oss01"].commands if "ip link set" in c]
    assert links == ["ip link set dev eth1 down", "ip link set dev eth1 up"]
    assert sample.value >= 0 and any("no target moved" in d for d in sample.details)
    assert cluster.where == HOME


def test_a_takeover_is_timed_when_the_poll_that_sees_it_returns(tmp_path: Path) -> None:
    """A poll that takes seconds (a partner still joining after its reboot) and already shows the targets moved
    counts those seconds: the takeover is never reported as faster than it was observed."""
    cluster = Cluster()
    slow = {"first": True}

    def answer(command: str) -> tuple[int, str, str]:
        if cluster.event == "lnet" and slow.pop("first", False):
            cluster.where = {**cluster.where, "lab-OST0000": "oss02", "lab-OST0001": "oss02"}
            cluster.event = None
            time.sleep(0.3)  # the poll's answer arrives 0.3 s after it was asked
        return cluster.answer(command)

    ctx, _ = drill_ctx(tmp_path, cluster)
    for r in ctx.remotes.values():
        assert isinstance(r, FakeRemote)
        r.on(r"crm_mon -1", answer)
    ha = replace(ctx.plan.ha, timing=replace(ctx.plan.ha.timing, lnet_monitor_s=0, lnet_dampen_s=1))
    ctx = Context(replace(ctx.plan, ha=ha), ctx.acceptance, ctx.inventory, ctx.remotes, ctx.options)
    sample = LnetLoss().measure(ctx, target("ha.lnet_loss"), Subject("pair", ("oss01", "oss02")), Rep(1, 1, False))
    assert sample.value >= 0.3, sample.details
