"""Testinfra checks for lustre_layout; `host` is the converged container.

lfs and lctl are TEST DOUBLES (prepare.yml): they keep layouts and pools in
/var/lib/kiln-test-doubles/state.json and log calls to calls.jsonl. /lustre is a plain directory.
"""

import json


def calls(host, prog):
    lines = host.file("/var/lib/kiln-test-doubles/calls.jsonl").content_string.splitlines()
    return [c["argv"] for c in map(json.loads, lines) if c["prog"] == prog]


def state(host):
    return json.loads(host.file("/var/lib/kiln-test-doubles/state.json").content_string)


def test_directories_created(host):
    for path in ("/lustre/datasets", "/lustre/checkpoints", "/lustre/code", "/lustre/scratch", "/lustre/shared"):
        assert host.file(path).is_directory


def test_each_directory_set_once_with_the_plans_options(host):
    sets = {argv[-1]: argv[1:-1] for argv in calls(host, "lfs") if argv[0] == "setstripe"}
    assert len([a for a in calls(host, "lfs") if a[0] == "setstripe"]) == 5  # converge only, not idempotence
    assert sets["/lustre/datasets"] == ["-E", "64M", "-c", "1", "-S", "1M", "-E", "4G", "-c", "4", "-S", "4M",
                                        "-E", "-1", "-c", "4", "-S", "4M"]
    assert sets["/lustre/code"] == ["-E", "1M", "-L", "mdt", "-E", "-1", "-c", "1", "-S", "4M"]
    assert sets["/lustre/scratch"] == ["-c", "1", "-S", "1M"]
    assert sets["/lustre/shared"] == ["-C", "8", "-S", "4M", "-p", "flash"]


def test_layouts_read_back_as_planned(host):
    out = host.check_output("lfs getstripe -d /lustre/checkpoints")
    assert "lcme_extent.e_end:   268435456" in out and "stripe_size:   4194304" in out
    scratch = state(host)["layouts"]["/lustre/scratch"]["components"][0]
    assert (scratch["count"], scratch["size"]) == (1, 1048576)  # the seeded drift (2 x 4M) was corrected


def test_pool_completed_on_the_mgs(host):
    assert state(host)["pools"]["lab.flash"] == ["lab-OST0000", "lab-OST0001", "lab-OST0002", "lab-OST0003"]
    adds = [argv for argv in calls(host, "lctl") if argv[0] == "pool_add"]
    assert adds == [["pool_add", "lab.flash", "lab-OST0001", "lab-OST0002", "lab-OST0003"]]
    assert not [argv for argv in calls(host, "lctl") if argv[0] == "pool_new"]  # it existed


def test_default_directory_layouts_set_once_where_planned(host):
    sets = [argv for argv in calls(host, "lfs") if argv[0] == "setdirstripe"]
    assert sets == [  # converge only, not idempotence
        ["setdirstripe", "-D", "-c", "4", "-i", "-1", "-X", "3", "/lustre/checkpoints"],
        ["setdirstripe", "-D", "-c", "1", "-i", "-1", "-X", "-1", "/lustre/code"],
    ]
    out = host.check_output("lfs getdirstripe -D /lustre/checkpoints")
    assert "lmv_stripe_count: 4 lmv_stripe_offset: -1" in out and "lmv_max_inherit: 3" in out
    # a directory without dir_default keeps what it has (the seeded default of /lustre/scratch)
    assert state(host)["dir_defaults"]["/lustre/scratch"] == {"count": 2, "index": -1, "inherit": 3}


def test_default_quotas_set_once(host):
    sets = [argv for argv in calls(host, "lfs") if argv[0] == "setquota"]
    assert sets == [  # converge only, not idempotence
        ["setquota", "-U", "-b", "2147483648", "-B", "2306867200", "-i", "5000000", "-I", "5500000", "/lustre"],
        ["setquota", "-P", "-b", "21474836480", "-B", "23622320128", "-i", "0", "-I", "0", "/lustre"],
    ]
    out = host.check_output("lfs quota -U /lustre")
    assert out.startswith("Disk default usr quota:") and "2147483648" in out
    assert "grp" not in state(host)["default_quotas"]["/lustre"]  # no group default planned, none set
