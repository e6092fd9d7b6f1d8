"""objectstore.rolling_restart: the master's volume list read right, when the roll applies, a roll that stops at
the first server that does not come back, and an upgrade refused before anything restarts (the real three-node run,
an upgrade from one release to the next: tests/acceptance/test_objectstore_rolling.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import validate
from kiln.verify.checks import REGISTRY
from kiln.verify.checks.check import CheckError, Rep, Subject
from kiln.verify.checks.context import Context
from kiln.verify.checks.objectstore_rolling import RollingVariables, parse_volume_list, weed_release
from kiln.verify.checks.options import Options
from kiln.verify.inventory import inventory_from_files
from kiln.verify.parsers import parse_warp_record
from tests.unit.verify.verify_fakes import FakeRemote, context

CHECK = "objectstore.rolling_restart"
ROOT = Path(__file__).resolve().parents[3]

# weed shell `volume.list` of SeaweedFS 3.39 (three volume servers, replication 001), trimmed: each node's block
# ends with its own "DataNode ... total size" line, which must not restart the node's count.
LISTING = """\
Topology volumeSizeLimit:256 MB hdd(volume:6/1878 active:6 free:1872 remote:0)
  DataCenter DefaultDataCenter hdd(volume:6/1878 active:6 free:1872 remote:0)
    Rack DefaultRack hdd(volume:6/1878 active:6 free:1872 remote:0)
      DataNode 10.89.20.11:8080 hdd(volume:2/939 active:2 free:937 remote:0)
        Disk hdd(volume:2/939 active:2 free:937 remote:0)
          volume id:1  size:1048  collection:"roll"  file_count:3  replica_placement:1  version:3
          volume id:2  size:2048  collection:"roll"  file_count:5  replica_placement:1  version:3
        Disk hdd total size:3096 file_count:8
      DataNode 10.89.20.11:8080 total size:3096 file_count:8
      DataNode 10.89.20.12:8080 hdd(volume:2/939 active:2 free:937 remote:0)
        Disk hdd(volume:2/939 active:2 free:937 remote:0)
          volume id:1  size:1048  collection:"roll"  file_count:3  replica_placement:1  version:3
          volume id:3  size:8  collection:"roll"  replica_placement:1  version:3
        Disk hdd total size:1056 file_count:3
      DataNode 10.89.20.12:8080 total size:1056 file_count:3
      DataNode 10.89.20.13:8080 hdd(volume:2/939 active:2 free:937 remote:0)
        Disk hdd(volume:2/939 active:2 free:937 remote:0)
          volume id:2  size:2048  collection:"roll"  file_count:5  replica_placement:1  version:3
          volume id:3  size:8  collection:"roll"  replica_placement:1  version:3
        Disk hdd total size:2056 file_count:5
      DataNode 10.89.20.13:8080 total size:2056 file_count:5
"""


def test_volume_list_counts_each_servers_volumes_and_each_volumes_copies() -> None:
    topo = parse_volume_list(LISTING)
    assert topo.nodes == {"10.89.20.11:8080": 2, "10.89.20.12:8080": 2, "10.89.20.13:8080": 2}
    assert topo.copies == {1: (2, 2), 2: (2, 2), 3: (2, 2)} and topo.short() == []
    # one server gone from the list: the volumes it held are short of a copy
    gone = LISTING.split("      DataNode 10.89.20.13:8080 hdd")[0]
    assert parse_volume_list(gone).short() == ["volume 2: 1 of 2 copies", "volume 3: 1 of 2 copies"]
    # replication 000: no replica_placement field, one copy wanted
    single = "DataNode 10.0.0.1:8080 hdd(volume:1/8)\n  volume id:7  size:8  collection:\"a\"  version:3\n"
    assert parse_volume_list(single).copies == {7: (1, 1)}
    with pytest.raises(CheckError, match="no volume server"):
        parse_volume_list("error: no master")


def three_node_context(remotes: dict[str, FakeRemote], restart: bool = True, nodes: int = 3,
                       upgrade: str = "") -> Context:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.lab.yaml").read_text())["config"]["kiln:cluster"]
    doc["objectstore"].update(nodes=nodes, replication="001")
    plan = build_plan(validate(doc, "rolling"), "rolling")
    inv = inventory_from_files(render_inventory(plan), "test")
    opts = Options(s3_secret_key="s" * 20, variables=(RollingVariables(restart=restart, lead_s=0, per_server_s=3,
                                                                      upgrade_binary=upgrade),))
    return Context(plan, plan.acceptance, inv, dict(remotes), opts)  # type: ignore[arg-type]


def target(ctx: Context) -> Any:
    return next(t for t in ctx.plan.targets if t.check == CHECK)


def test_the_roll_applies_only_with_two_copies_a_spare_server_and_the_option() -> None:
    check = REGISTRY[CHECK]
    lab_ctx = context({})
    assert not [t for t in lab_ctx.plan.targets if t.check == CHECK]  # replication 000: nothing planned
    ctx = three_node_context({})
    t = target(ctx)
    assert "2 copies (replication 001)" in t.why and t.expected == 0 and not t.higher_is_better
    subject = Subject("s3-01 → 3 S3 gateways", ("s3-01", "s3-02", "s3-03"))
    assert check.not_applicable(ctx, t, subject) is None
    assert "objectstore.rolling.restart=true" in (check.not_applicable(three_node_context({}, restart=False), t,
                                                                     subject) or "")
    two = three_node_context({}, nodes=2)
    assert not [x for x in two.plan.targets if x.check == CHECK]
    assert "at least 3" in (check.not_applicable(two, t, subject) or "")


def test_a_server_that_does_not_come_back_stops_the_roll_there() -> None:
    remotes = {h: FakeRemote(h).on(".", (0, "", "")) for h in ("s3-01", "s3-02", "s3-03")}
    ctx = three_node_context(remotes)
    addresses = {h: ctx.inventory.storage_addresses(h)[0] for h in remotes}
    listing = LISTING
    for h, old in zip(remotes, ("10.89.20.11", "10.89.20.12", "10.89.20.13"), strict=True):
        listing = listing.replace(old + ":8080", addresses[h] + ":8080")
    first = remotes["s3-01"]
    first.on("command -v warp", (0, "/usr/local/bin/warp\n", ""))
    first.on("--version", (0, "warp version v1.0.0 - b3452c34f08a\n", ""))
    first.on("volume.list", (0, listing, ""))
    # s3-02's volume server never comes back: the master no longer lists it
    remotes["s3-02"].on("systemctl restart", lambda _c: (first.on("volume.list", (0, listing.split(
        f"      DataNode {addresses['s3-02']}:8080 hdd")[0], "")), (0, "", ""))[1])
    check = REGISTRY[CHECK]
    subject = Subject("s3-01 → 3 S3 gateways", ("s3-01", "s3-02", "s3-03"))
    check.prepare(ctx, target(ctx), subject)
    with pytest.raises(CheckError, match=r"s3-02: the volume server did not rejoin within 3 s of the restart"):
        check.measure(ctx, target(ctx), subject, Rep(1, 1, False))
    assert any("systemctl restart seaweedfs-volume" in c for c in first.commands)  # s3-01 rolled and came back
    assert not any("systemctl restart" in c for c in remotes["s3-03"].commands)  # never reached
    assert any(c.startswith("pkill -f") for c in first.commands)  # the load ended with the roll
    assert not any("s" * 20 in c for r in remotes.values() for c in r.commands)  # the secret only in a file


def test_warp_record_totals_every_operation() -> None:
    record = (ROOT / "tests" / "fixtures" / "tools" / "warp" / "put_short.ops.tsv").read_text()
    totals = parse_warp_record(record)
    assert set(totals) == {"PUT"} and totals["PUT"].requests == record.count("\tPUT\t")
    mixed = record + record.replace("\tPUT\t", "\tGET\t").split("\n", 1)[1]
    assert set(parse_warp_record(mixed)) == {"GET", "PUT"}


def test_weed_version_gives_the_build_s_offset_kind_and_the_release() -> None:
    assert weed_release("version 30GB 3.39 51d4a4b2 linux amd64\n") == ("30GB", "3.39")
    assert weed_release("For enterprise users ...\nversion 8000GB 4.31 pypi linux amd64\n") == ("8000GB", "4.31")
    with pytest.raises(CheckError, match="no release"):
        weed_release("bash: weed: command not found")


STAGED = "/usr/local/lib/kiln-objectstore/weed"


def upgrade_remotes(installed: str, staged: dict[str, str]) -> dict[str, FakeRemote]:
    remotes = {h: FakeRemote(h).on(".", (0, "", "")) for h in ("s3-01", "s3-02", "s3-03")}
    for h, r in remotes.items():
        r.on("version", (0, f"version {installed} linux amd64\n---\nversion {staged[h]} linux amd64\n", ""))
    first = remotes["s3-01"]
    first.on("command -v warp", (0, "/usr/local/bin/warp\n", ""))
    first.on("--version", (0, "warp version v1.0.0 - b3452c34f08a\n", ""))
    return remotes


@pytest.mark.parametrize(("staged", "refusal"), [
    ({"s3-01": "30GB 3.40 x", "s3-02": "8000GB 3.40 x", "s3-03": "30GB 3.40 x"}, "run different releases"),
    ({h: "8000GB 4.31 pypi" for h in ("s3-01", "s3-02", "s3-03")}, "8000GB build and the store runs a 30GB build"),
])
def test_an_upgrade_that_cannot_read_the_volumes_or_is_mixed_is_refused_before_any_restart(
        staged: dict[str, str], refusal: str) -> None:
    remotes = upgrade_remotes("30GB 3.39 51d4a4b2", staged)
    ctx = three_node_context(remotes, upgrade=STAGED)
    subject = Subject("s3-01 → 3 S3 gateways", ("s3-01", "s3-02", "s3-03"))
    with pytest.raises(CheckError, match=refusal):
        REGISTRY[CHECK].prepare(ctx, target(ctx), subject)
    assert not any("systemctl" in c or "ln -f" in c for r in remotes.values() for c in r.commands)


def test_an_upgrade_switches_each_volume_server_s_binary_before_its_restart() -> None:
    remotes = upgrade_remotes("30GB 3.39 51d4a4b2", {h: "30GB 3.40 abc" for h in ("s3-01", "s3-02", "s3-03")})
    ctx = three_node_context(remotes, upgrade=STAGED)
    addresses = {h: ctx.inventory.storage_addresses(h)[0] for h in remotes}
    listing = LISTING
    for h, old in zip(remotes, ("10.89.20.11", "10.89.20.12", "10.89.20.13"), strict=True):
        listing = listing.replace(old + ":8080", addresses[h] + ":8080")
    remotes["s3-01"].on("volume.list", (0, listing, ""))
    for r in remotes.values():  # the restarted volume server still runs the old inode
        r.on("MainPID", (0, "seaweedfs-volume stale\n", ""))
    check = REGISTRY[CHECK]
    subject = Subject("s3-01 → 3 S3 gateways", ("s3-01", "s3-02", "s3-03"))
    check.prepare(ctx, target(ctx), subject)
    with pytest.raises(CheckError, match="s3-01: the volume server rejoined but does not run /usr/local/bin/weed"):
        check.measure(ctx, target(ctx), subject, Rep(1, 1, False))
    cmds = remotes["s3-01"].commands
    switch = next(i for i, c in enumerate(cmds) if c.startswith(f"ln -f {STAGED} "))
    restart = next(i for i, c in enumerate(cmds) if c == "systemctl restart seaweedfs-volume")
    assert switch < restart and "mv -f /usr/local/bin/weed.kiln-new /usr/local/bin/weed" in cmds[switch]
    assert not any("ln -f" in c or "systemctl restart" in c for c in remotes["s3-02"].commands)
