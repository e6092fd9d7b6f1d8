"""After the refused converge (twice: converge + idempotence), the ext4 data must be intact."""

import json

DEVICE = "/var/lib/kiln-test-devices/ost0.img"


def calls(host, prog):
    lines = host.file("/var/lib/kiln-test-doubles/calls.jsonl").content_string.splitlines()
    return [c["argv"] for c in map(json.loads, lines) if c["prog"] == prog]


def test_ext4_still_there(host):
    # real blkid (util-linux), not a double
    assert host.check_output("blkid -p -o value -s TYPE %s", DEVICE) == "ext4"
    assert host.check_output("blkid -p -o value -s LABEL %s", DEVICE) == "precious"


def test_file_in_the_filesystem_is_intact(host):
    content = host.check_output("debugfs -R 'cat /precious.txt' %s 2>/dev/null", DEVICE)
    assert content == "checkpoint step 41000 - do not lose"


def test_mkfs_lustre_never_touched_the_device(host):
    assert [argv for argv in calls(host, "mkfs.lustre") if argv[-1] == DEVICE] == []
    assert DEVICE not in json.loads(host.file("/var/lib/kiln-test-doubles/state.json").content_string)["targets"]


def test_other_target_was_formatted_once(host):
    mgt = [argv for argv in calls(host, "mkfs.lustre") if argv[-1].endswith("mgt0.img")]
    assert len(mgt) == 1
