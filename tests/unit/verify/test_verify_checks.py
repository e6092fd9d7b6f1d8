"""Checks' logic against the lab plan with a TEST DOUBLE remote (verify_fakes.FakeRemote): what is compared,
what a mismatch says, how tool output becomes a sample. Real hosts: tests/lab/test_lab_e2e.py."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from kiln.lustre.lustre_common import values_equal
from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks import REGISTRY
from kiln.verify.checks.check import CheckError, NotApplicable, Rep, Sample, Subject
from kiln.verify.checks.conformance import ObjectstoreServicesVariables
from kiln.verify.checks.launch import launch_command
from kiln.verify.checks.network import Iperf3Variables
from kiln.verify.checks.objectstore import WarpVariables, analysis_segment_ms
from kiln.verify.checks.options import Options
from kiln.verify.checks.storage import FioVariables, StorageVariables
from kiln.verify.parsers import ParseError
from tests.unit.verify.verify_fakes import FakeRemote, context, fake_tool, lab

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "tools"
REP = Rep(1, 1, False)
LOCAL_FIO = Options(variables=(StorageVariables(local_nvme_path="/scratch"), FioVariables(jobs=2)))


def target(check: str) -> AcceptanceTarget:
    plan, _, _ = lab()
    for t in plan.targets:
        if t.check == check:
            return t
    # checks the lab plan has no target for (one GPU per node, no RDMA): a prod-like target
    return AcceptanceTarget(
        check=check, metric="busbw", unit="GB/s", expected=100.0, warn=90.0, fail=75.0, why="test", scope="node",
        higher_is_better=True, group="kiln_pool_gpu", requires=("gpu",),
    )


def measure(check: str, remotes: dict[str, FakeRemote], host: str, options: Options | None = None,
            subject: Subject | None = None):  # type: ignore[no-untyped-def]
    ctx = context(remotes, options)
    return REGISTRY[check].measure(ctx, target(check), subject or Subject(host, (host,)), REP)


# ------------------------------------------------------------------------------------------------ sysctls

PLANNED = {"net.ipv4.conf.all.arp_ignore": "1", "net.ipv4.conf.all.arp_announce": "2",
           "net.ipv4.conf.all.rp_filter": "2", "net.core.rmem_max": "212992", "net.core.wmem_max": "212992",
           "net.ipv4.tcp_rmem": "4096\t87380\t134217728", "net.ipv4.tcp_wmem": "4096\t65536\t134217728",
           "net.core.netdev_max_backlog": "1000"}


def sysctl_host(tmp_path: Path, values: dict[str, str], container: bool) -> FakeRemote:
    cases = "\n".join(f"  {k}) printf '%b\\n' '{v}';;" for k, v in values.items())
    body = f'case "$2" in\n{cases}\n  *) echo "sysctl: cannot stat $2"; exit 255;;\nesac'
    fake_tool(tmp_path / "bin", "sysctl", body)
    r = FakeRemote("gpu001", tmp_path / "bin")
    return r.on("containerenv", (0, "yes\n" if container else "no\n", ""))


def test_sysctls_in_a_container_skip_host_global_keys(tmp_path: Path) -> None:
    s = measure("conformance.sysctls", {"gpu001": sysctl_host(tmp_path, PLANNED, True)}, "gpu001")
    assert s.value == 0
    notes = [d for d in s.details if d.startswith("note:")]
    assert len(notes) == 3 and all("not namespaced" in n for n in notes)  # rmem_max, wmem_max, netdev_max_backlog


def test_sysctls_mismatch_names_parameter_planned_and_found(tmp_path: Path) -> None:
    values = dict(PLANNED, **{"net.ipv4.conf.all.arp_ignore": "0"})
    s = measure("conformance.sysctls", {"gpu001": sysctl_host(tmp_path, values, True)}, "gpu001")
    assert s.value == 1
    assert "net.ipv4.conf.all.arp_ignore: planned 1, found 0" in s.details


def test_sysctls_on_bare_metal_check_every_key(tmp_path: Path) -> None:
    s = measure("conformance.sysctls", {"gpu001": sysctl_host(tmp_path, PLANNED, False)}, "gpu001")
    assert s.value == 3  # the three host-global keys hold 212992/1000, not the planned values
    assert "net.core.rmem_max: planned 268435456, found 212992" in s.details


def test_values_compare_with_the_lustre_library_rules() -> None:
    """conformance compares with kiln.lustre.lustre_common.values_equal (the lustre_param module's rules)."""
    assert values_equal("net.ipv4.tcp_rmem", "4096 87380 134217728", "4096\t87380\t134217728")
    rpc = "osc.lab-OST0000-osc-ffff.max_pages_per_rpc"
    assert values_equal(rpc, "16M", "4096", page_size=4096)  # lctl reports max_pages_per_rpc in pages
    assert values_equal("osc.*.max_dirty_mb", "2G", "2048")  # *_mb counts MiB
    assert values_equal("obdfilter.*.readcache_max_filesize", "32M", "33554432")
    assert values_equal("x.y", 1, "1") and values_equal("x.y", 0.5, "0.50")
    assert not values_equal(rpc, "16M", "256", page_size=4096) and not values_equal("x.y", 1, "0")
    assert not values_equal("osc.*.max_dirty_mb", "2G", "2147483648")  # MiB, not bytes
    assert not values_equal("net.ipv4.tcp_rmem", "4096 87380", "4096 87380 6291456")


# ------------------------------------------------------------------------------------------------- nccl


def test_nccl_conf_compares_values_exactly() -> None:
    r = FakeRemote("gpu001").on(r"cat /etc/nccl.conf", (0, "# kiln\nNCCL_IB_DISABLE=1\nNCCL_SOCKET_IFNAME=eth0\n"
                                                          "NCCL_DEBUG=INFO\n", ""))
    s = measure("conformance.nccl_conf", {"gpu001": r}, "gpu001")
    assert s.details == ["NCCL_SOCKET_IFNAME: planned =eth0, found eth0",
                         "NCCL_DEBUG: not in the plan, found INFO in /etc/nccl.conf"]
    assert s.value == 2


def test_nccl_conf_missing() -> None:
    r = FakeRemote("gpu001").on(r"cat /etc/nccl.conf", (1, "", "cat: /etc/nccl.conf: No such file or directory"))
    s = measure("conformance.nccl_conf", {"gpu001": r}, "gpu001")
    assert s.value == 2 and all("not set (/etc/nccl.conf unreadable" in d for d in s.details)


# ----------------------------------------------------------------------------------------- object store


def test_services(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "systemctl", '[ "$2" = seaweedfs-filer ] && { echo failed; exit 3; }; echo active')
    s = measure("conformance.objectstore_services", {"s3-01": FakeRemote("s3-01", tmp_path / "bin")}, "s3-01")
    assert s.details == ["seaweedfs-filer.service: planned active, found failed"]
    assert s.info["units"] == ["seaweedfs-master", "seaweedfs-volume", "seaweedfs-filer", "seaweedfs-s3"]


def test_buckets_need_the_secret_and_never_pass_it_as_an_argument() -> None:
    r = FakeRemote("s3-01").on(r"python3 -c", (0, "datasets\n", ""))
    with pytest.raises(CheckError, match="KILN_S3_SECRET_KEY"):
        measure("conformance.objectstore_buckets", {"s3-01": r}, "s3-01")
    s = measure("conformance.objectstore_buckets", {"s3-01": r}, "s3-01", Options(s3_secret_key="s3cr3t"))
    assert s.details[0].startswith("bucket checkpoints (checkpoints): planned, not listed by 10.89.20.")
    assert not any("s3cr3t" in c for c in r.commands)  # no command line carries the secret
    [(content, mode)] = r.secret_files.values()
    assert "KILN_SK=s3cr3t" in content and mode == 0o600
    assert any(c.startswith("rm -f") and c.endswith("s3-list-buckets.env") for c in r.commands)  # removed after


def test_list_buckets_script_signs_like_sigv4() -> None:
    # run the embedded script against nothing: it must fail cleanly with a connection error, not a traceback
    from kiln.verify.checks.conformance import _LIST_BUCKETS_PY

    compile(_LIST_BUCKETS_PY, "<list-buckets>", "exec")


# ----------------------------------------------------------------------------------------------- Lustre


def lctl_host(tmp_path: Path) -> FakeRemote:
    fake_tool(tmp_path / "bin", "lctl", """p="$2"
case "$p" in
  'osc.*.max_pages_per_rpc') echo "osc.lab-OST0000-osc-ff01.max_pages_per_rpc=4096"
                             echo "osc.lab-OST0001-osc-ff01.max_pages_per_rpc=4096";;
  'osc.*.max_rpcs_in_flight') echo "osc.lab-OST0000-osc-ff01.max_rpcs_in_flight=8"
                              echo "osc.lab-OST0001-osc-ff01.max_rpcs_in_flight=32";;
  'jobid_var') echo "jobid_var=procname_uid";;
  'osc.*.checksums') echo "osc.lab-OST0000-osc-ff01.checksums=1";;
  'llite.*.max_read_ahead_mb') echo "llite.lab-ff01.max_read_ahead_mb=512";;
  'llite.*.max_read_ahead_per_file_mb') echo "llite.lab-ff01.max_read_ahead_per_file_mb=128";;
  'llite.*.statahead_max') echo "llite.lab-ff01.statahead_max=128";;
  'mdc.*.max_rpcs_in_flight') echo "mdc.lab-MDT0000-mdc-ff01.max_rpcs_in_flight=64";;
  'mdc.*.max_mod_rpcs_in_flight') echo "mdc.lab-MDT0000-mdc-ff01.max_mod_rpcs_in_flight=50";;
  *) echo "error: get_param: param_path '$p': No such file or directory" >&2; exit 2;;
esac""")
    r = FakeRemote("gpu001", tmp_path / "bin")
    r.on(r"cat /sys/module/ksocklnd/parameters/credits", (0, "256\n", ""))
    return r.on("getconf PAGESIZE", (0, "4096\n", ""))


def test_lustre_tunables(tmp_path: Path) -> None:
    s = measure("conformance.lustre_tunables", {"gpu001": lctl_host(tmp_path)}, "gpu001")
    assert "osc.lab-OST0001-osc-ff01.max_rpcs_in_flight: planned 8, found 32" in s.details
    assert any(d.startswith("ldlm.namespaces.*.lru_max_age: planned 600000, not found by lctl get_param")
               for d in s.details)
    # 9 client tunables of pool gpu (max_dirty_mb is left to the kernel), jobid_var, ksocklnd.credits
    assert s.value == 2 and s.info["checked"] == 11


def test_lustre_tunables_subjects_include_servers() -> None:
    ctx = context({h: FakeRemote(h) for h in ("gpu001", "gpu002", "mds01", "oss01")})
    subjects = REGISTRY["conformance.lustre_tunables"].subjects(ctx, target("conformance.lustre_tunables"))
    assert [s.label for s in subjects] == ["gpu001", "gpu002", "mds01", "oss01"]


def getstripe_text(components: list[tuple[int | None, int, int, str]]) -> str:
    out = ["  lcm_layout_gen:    0", f"  lcm_entry_count:   {len(components)}"]
    start = 0
    for end, count, size, pattern in components:
        out += ["    lcme_id:             N/A", f"    lcme_extent.e_start: {start}",
                f"    lcme_extent.e_end:   {'EOF' if end is None else end}",
                f"      stripe_count:  {count}       stripe_size:   {size}       pattern:       {pattern}", ""]
        start = end or 0
    return "\n".join(out)


def test_lustre_layouts(tmp_path: Path) -> None:
    m = 1 << 20
    outputs = {
        "/lustre/datasets": getstripe_text([(64 * m, 1, m, "raid0"), (4 << 30, 4, 4 * m, "raid0"),
                                            (None, -1, 4 * m, "raid0")]),
        "/lustre/checkpoints": getstripe_text([(256 * m, 1, m, "raid0"), (None, 4, 4 * m, "raid0")]),
        "/lustre/code": getstripe_text([(m, 0, m, "mdt"), (None, 1, 4 * m, "raid0")]),
        "/lustre/scratch": "stripe_count:  1 stripe_size:   1048576 pattern:       raid0 stripe_offset: -1\n",
    }
    r = FakeRemote("gpu001")
    for path, text in outputs.items():
        r.on(rf"lfs getstripe -d --yaml {path}$", (0, text, ""))
    s = measure("conformance.lustre_layouts", {"gpu001": r}, "gpu001")
    assert s.details == ["/lustre/datasets component 2 stripe_count: planned 4, found -1"]


def test_lustre_default_directory_layouts() -> None:
    from dataclasses import replace

    from kiln.plan.model import DirStripe
    from kiln.verify.checks.conformance import dir_default_mismatches

    lay = replace(lab()[0].layouts[1], dirstripe=DirStripe(mdt_count=4, mdt_index=-1, max_inherit=3))
    found = "lmv_stripe_count: 4 lmv_stripe_offset: -1 lmv_hash_type: none lmv_max_inherit: 3 lmv_max_inherit_rr: 0\n"
    assert dir_default_mismatches(lay, found) == []
    assert dir_default_mismatches(lay, found.replace("count: 4", "count: 1")) == [
        f"{lay.mount_path} subdirectories mdt_count: planned 4, found 1"
    ]
    assert dir_default_mismatches(lay, "") == [
        f"{lay.mount_path} subdirectories dir_default: planned "
        "{'mdt_count': 4, 'mdt_index': -1, 'max_inherit': 3}, found None"
    ]
    assert dir_default_mismatches(lab()[0].layouts[1], "") == []  # one MDT: nothing planned, nothing read


def test_lustre_default_quotas() -> None:
    from kiln.plan.model import QuotaDefault
    from kiln.verify.checks.conformance import quota_mismatches

    with pytest.raises(NotApplicable, match="no default quotas"):
        measure("conformance.lustre_quotas", {"gpu001": FakeRemote("gpu001")}, "gpu001")
    planned = QuotaDefault(
        type="user", block_soft_KiB=2147483648, block_hard_KiB=2306867200, inode_soft=5000000, inode_hard=5500000,
    ).module_args()
    table = ("Disk default usr quota:\n      Filesystem  bquota  blimit  bgrace  iquota  ilimit  igrace\n"
             "         /lustre 2147483648 2306867200  604800 5000000 5500000  604800\n")
    assert quota_mismatches("user", planned, table) == []
    assert quota_mismatches("user", planned, table.replace(" 5500000 ", " 6000000 ")) == [
        "user default quota inode_hard: planned 5500000, found 6000000"
    ]
    assert quota_mismatches("group", planned, table) == [
        "group default quota: lfs quota printed no default quota table"
    ]


def test_lnet(tmp_path: Path) -> None:
    ok = "net:\n    - net type: lo\n      local NI(s):\n        - nid: 0@lo\n          status: up\n" \
         "    - net type: tcp\n      local NI(s):\n        - nid: 10.89.20.2@tcp\n          status: up\n"
    r = FakeRemote("gpu001").on("lnetctl net show", (0, ok, ""))
    assert measure("conformance.lnet", {"gpu001": r}, "gpu001").value == 0
    r = FakeRemote("gpu001").on("lnetctl net show", (0, (FIX / "lustre/lnetctl_net_show.yaml").read_text(), ""))
    s = measure("conformance.lnet", {"gpu001": r}, "gpu001")
    assert s.details[0].startswith("NID 10.89.20.2@tcp: planned, not configured")
    assert any("net efa (NID 1.61.92.0@efa): not in the plan" in d for d in s.details)  # published 2.15.6 output


def test_gpus_and_rdma() -> None:
    # real 595.80 output of an L40S with persistence mode off (tests/fixtures/tools/gpu/nvidia_smi_l40s_595.source)
    csv = (FIX / "gpu/nvidia_smi_l40s_595.csv").read_text()
    r = FakeRemote("gpu001").on(r"nvidia-smi --query-gpu=index,name,persistence_mode --format=csv$", (0, csv, ""))
    s = measure("conformance.gpus", {"gpu001": r}, "gpu001")
    assert s.details == ["GPU 0 (NVIDIA L40S) persistence mode: planned Enabled, found Disabled"]
    csv = (FIX / "gpu/nvidia_smi_h100_590.csv").read_text()
    r = FakeRemote("gpu001").on(r"nvidia-smi --query-gpu=index,name,persistence_mode --format=csv$", (0, csv, ""))
    assert measure("conformance.gpus", {"gpu001": r}, "gpu001").details == []
    with pytest.raises(NotApplicable, match="expects no RDMA device"):
        measure("conformance.rdma_ports", {"gpu001": FakeRemote("gpu001")}, "gpu001")


# ----------------------------------------------------------------------------------------------- benchmarks


def test_fio_local_uses_the_plan_size_and_aggregates(tmp_path: Path) -> None:
    fio_json = (FIX / "fio/read_2jobs.json").read_text()
    r = FakeRemote("gpu001").on(r"fio --output-format=json", (0, fio_json, "")).on("MemTotal", (0, "2048000\n", ""))
    s = measure("storage.fio_local_read", {"gpu001": r}, "gpu001", LOCAL_FIO)
    assert s.value > 0 and len(s.info["per_job_GBps"]) == 2
    job = s.raw["job.fio"]
    assert "size=268435456" in job  # fio_size_factor 0 in the lab: 256 MiB per job
    assert "directory=/scratch/kiln-verify" in job and "direct=1" in job and "numjobs=2" in job


def test_fio_size_factor_times_ram() -> None:
    r = FakeRemote("gpu001").on("MemTotal", (0, "1048576\n", ""))  # 1 GiB
    ctx = context({"gpu001": r}, fio_size_factor=2.0)
    job = REGISTRY["storage.fio_local_write"].job(ctx, "gpu001", target("storage.fio_local_write"))  # type: ignore[attr-defined]
    # 2 × 1 GiB of RAM per host, split over the 4 jobs a lab disk's figure needs (the minimum)
    assert job.numjobs == 4 and job.size_per_job == (2 << 30) // 4


def test_fio_runs_enough_processes_for_the_figure_it_expects() -> None:
    r = FakeRemote("gpu001").on("MemTotal", (0, "1048576\n", ""))
    fio = REGISTRY["storage.fio_lustre_read"]
    # 2 × NDR400 at the LNet factors: 76.5 GB/s ÷ 10.84 GB/s per direct-I/O process → 8 processes
    fast = replace(target("storage.fio_lustre_read"), expected=76.5)
    job = fio.job(context({"gpu001": r}, fio_size_factor=2.0), "gpu001", fast)  # type: ignore[attr-defined]
    assert job.numjobs == 8 and job.size_per_job == (2 << 30) // 8
    pinned = Options(variables=(FioVariables(jobs=3),))
    assert fio.job(context({"gpu001": r}, pinned), "gpu001", fast).numjobs == 3  # type: ignore[attr-defined]


def test_iperf3_pair_uses_storage_addresses_and_retries() -> None:
    ok = (FIX / "iperf3/tcp_4streams.json").read_text()
    refused = (FIX / "iperf3/refused.json").read_text()
    answers = iter([(0, refused, ""), (0, ok, "")])
    client = FakeRemote("gpu001").on(r"^timeout|iperf3 -c", lambda _c: next(answers))
    server = FakeRemote("gpu002").on(".", (0, "", ""))
    subject = Subject("gpu001→gpu002", ("gpu001", "gpu002"))
    s = measure("network.iperf3", {"gpu001": client, "gpu002": server}, "gpu001",
                Options(variables=(Iperf3Variables(seconds=3),)), subject)
    assert s.value == pytest.approx(json.loads(ok)["end"]["sum_received"]["bits_per_second"] / 1e9)
    assert any("iperf3 -s -1 -D -B 10.89.20.3" in c for c in server.commands)
    assert any("iperf3 -c 10.89.20.3 -B 10.89.20.2" in c for c in client.commands)
    assert any(c.startswith("test -s") and "kill" in c for c in server.commands)  # server stopped afterwards


def test_warp_credentials_only_in_the_environment() -> None:
    put = (FIX / "warp/put.json").read_text()
    r = FakeRemote("gpu001").on("command -v warp", (0, "/usr/local/bin/warp\n", "")).on(r"warp put", (0, put, ""))
    r.on(r"warp --version", (0, "warp version v1.0.0 - b3452c34f08a\n", ""))
    ctx = context({"gpu001": r, "s3-01": FakeRemote("s3-01")}, Options(s3_secret_key="s3cr3t"))
    chk = REGISTRY["objectstore.s3_put"]
    [subject] = chk.subjects(ctx, target("objectstore.s3_put"))
    assert subject.hosts == ("gpu001", "s3-01")
    chk.prepare(ctx, target("objectstore.s3_put"), subject)
    s = chk.measure(ctx, target("objectstore.s3_put"), subject, REP)
    assert s.value > 0 and s.info["endpoints"] == [f"{ctx.inventory.storage_addresses('s3-01')[0]}:8333"]
    assert "s3cr3t" not in s.raw["command.txt"] and "--secret-key" not in s.raw["command.txt"]
    assert not any("s3cr3t" in c for c in r.commands)
    assert [c for c, m in r.secret_files.values()] == ["WARP_ACCESS_KEY=kiln\nWARP_SECRET_KEY=s3cr3t\n"]


SECRET = "s3cr3t-Value/With+Chars"


@pytest.mark.parametrize("check", ["conformance.objectstore_buckets", "objectstore.s3_get", "objectstore.s3_put"])
def test_no_secret_in_any_argv(check: str) -> None:
    """Every command line a check builds (the remote `sh -c` argument and the local transfer) lacks the secret."""
    put = (FIX / "warp/put.json").read_text()
    get = (FIX / "warp/get.json").read_text()
    remotes = {h: FakeRemote(h).on("command -v warp", (0, "/usr/local/bin/warp\n", ""))
               .on(r"warp --version", (0, "warp version v1.0.0 - b3452c34f08a\n", ""))
               .on(r"warp put", (0, put, "")).on(r"warp get", (0, get, "")).on(r"python3 -c", (0, "datasets\n", ""))
               .on(r"weed shell", (0, "", "")).on(r"^mkdir|^rm -f", (0, "", ""))
               for h in ("gpu001", "s3-01")}
    ctx = context(remotes, Options(s3_secret_key=SECRET))  # type: ignore[arg-type]
    chk = REGISTRY[check]
    t = target(check)
    for subject in chk.subjects(ctx, t):
        chk.prepare(ctx, t, subject)
        chk.measure(ctx, t, subject, REP)
    argvs = [c for r in remotes.values() for c in r.commands]
    assert argvs and not [c for c in argvs if SECRET in c or shlex.quote(SECRET) in c]
    assert any(SECRET in content for r in remotes.values() for content, _ in r.secret_files.values())


def test_warp_of_another_version_is_refused() -> None:
    r = (FakeRemote("gpu001").on("command -v warp", (0, "/usr/local/bin/warp\n", ""))
         .on(r"warp --version", (0, "warp version v1.1.2 - 1234567\n", "")))
    ctx = context({"gpu001": r, "s3-01": FakeRemote("s3-01")}, Options(s3_secret_key="s3cr3t"))
    chk = REGISTRY["objectstore.s3_get"]
    [subject] = chk.subjects(ctx, target("objectstore.s3_get"))
    with pytest.raises(CheckError, match=r"unsupported warp version 1.1.2.*supported: warp v1.0.x"):
        chk.prepare(ctx, target("objectstore.s3_get"), subject)


def test_perftest_and_nccl_and_gpu_copy() -> None:
    r = FakeRemote("gpu001").on("command -v", (0, "/usr/bin/x\n", ""))
    r.on(r"^all_reduce_perf -b", (0, (FIX / "nccl/all_reduce_intra_8gpu.txt").read_text(), ""))
    s = measure("fabric.nccl_allreduce_intra", {"gpu001": r}, "gpu001")
    assert s.value == pytest.approx(232.20) and s.info["gpus"] == 1  # the better busbw at 10 GiB (8 × A100)
    r.on(r"nvbandwidth -t host_to_device", (0, (FIX / "cuda/nvbandwidth_v0.2_8gpu.txt").read_text(), ""))
    assert measure("gpu.h2d_bw", {"gpu001": r}, "gpu001").value == pytest.approx(205.04)
    bad = FakeRemote("gpu001").on("command -v", (1, "", ""))
    with pytest.raises(CheckError, match="neither nvbandwidth nor bandwidthTest"):
        measure("gpu.d2h_bw", {"gpu001": bad}, "gpu001")
    r.on(r"^all_reduce_perf -b", (1, (FIX / "nccl/abort_invalid_device.txt").read_text(), ""))
    with pytest.raises(ParseError, match="Test CUDA failure"):
        measure("fabric.nccl_allreduce_intra", {"gpu001": r}, "gpu001")


def test_launchers() -> None:
    ctx = context({"gpu001": FakeRemote("gpu001")}, Options(mpirun_args="--allow-run-as-root"))
    cmd = launch_command(ctx, ["gpu001", "gpu002"], 8, "ior -w", env={"NCCL_IB_DISABLE": "1"})
    assert cmd.startswith("mpirun -np 16 -H gpu001:8,gpu002:8 --bind-to none -x NCCL_IB_DISABLE=1 --allow-run-as")
    ctx = context({"gpu001": FakeRemote("gpu001")}, Options(launcher="srun", srun_args="-p gpu"))
    cmd = launch_command(ctx, ["gpu001", "gpu002"], 4, "all_reduce_perf -g 1", gpus_per_node=4)
    assert cmd == "srun -N 2 --ntasks-per-node=4 -w gpu001,gpu002 --gpus-per-node=4 -p gpu all_reduce_perf -g 1"


def test_ring_pairs_and_rails() -> None:
    ctx = context({h: FakeRemote(h) for h in ("gpu001", "gpu002")})
    subjects = REGISTRY["network.iperf3"].subjects(ctx, target("network.iperf3"))
    assert [s.label for s in subjects] == ["gpu001→gpu002", "gpu002→gpu001"]
    ctx = context({"gpu001": FakeRemote("gpu001")})
    assert REGISTRY["network.iperf3"].subjects(ctx, target("network.iperf3")) == []


def test_options_from_strings() -> None:
    o = Options().with_values({"fio_runtime_s": "30", "objectstore_units": "a,b", "lustre_dir": "/l/x",
                               "strict": "yes", "command_timeout_s": "12.5"})
    assert o.var(FioVariables).runtime_s == 30 and o.var(ObjectstoreServicesVariables).units == ("a", "b") \
        and o.strict and o.command_timeout_s == 12.5
    pub = Options(s3_secret_key="hidden").public()
    assert "hidden" not in json.dumps(pub) and pub["s3_secret_key_set"] is True


def test_lustre_mounts_use_the_plans_mount_options() -> None:
    fs = {"filesystems": [{"target": "/lustre", "source": "10.89.20.4@tcp:/lab", "fstype": "lustre",
                           "options": "rw,flock,user_xattr,lazystatfs"}]}
    r = FakeRemote("gpu001").on("findmnt", (0, json.dumps(fs), ""))
    assert measure("conformance.lustre_mounts", {"gpu001": r}, "gpu001").value == 0
    fs["filesystems"][0]["options"] = "rw,user_xattr"
    fs["filesystems"][0]["source"] = "10.89.20.9@tcp:/lab"
    r = FakeRemote("gpu001").on("findmnt", (0, json.dumps(fs), ""))
    s = measure("conformance.lustre_mounts", {"gpu001": r}, "gpu001")
    assert "/lustre option flock: planned, not in the mount options (rw,user_xattr)" in s.details
    assert any(d.startswith("/lustre MGS NIDs: planned ['10.89.20.4@tcp']") for d in s.details)
    r = FakeRemote("gpu001").on("findmnt", (1, "", ""))
    assert measure("conformance.lustre_mounts", {"gpu001": r}, "gpu001").details == [
        "/lustre: planned a Lustre mount of lab, nothing mounted there"]


def test_warp_without_secret_copies_nothing() -> None:
    r = FakeRemote("gpu001").on("command -v warp", (1, "", ""))
    ctx = context({"gpu001": r, "s3-01": FakeRemote("s3-01")})
    chk = REGISTRY["objectstore.s3_get"]
    [subject] = chk.subjects(ctx, target("objectstore.s3_get"))
    with pytest.raises(CheckError, match="KILN_S3_SECRET_KEY"):
        chk.prepare(ctx, target("objectstore.s3_get"), subject)
    assert not any(c.startswith("PUT ") for c in r.commands)


# ------------------------------------------------------------------------------ a failed run is never a pass

_GOOD = {
    "storage.mdtest_create": (r"mdtest -n", "mdtest/mdtest_files.txt"),
    "storage.ior_easy_write": (r"ior -a POSIX", "ior/ior_4.0.0_write.json"),
    "fabric.nccl_allreduce_intra": (r"^all_reduce_perf -b", "nccl/all_reduce_intra_8gpu.txt"),
    "storage.fio_local_read": (r"fio --output-format=json", "fio/read_2jobs.json"),
    "gpu.h2d_bw": (r"nvbandwidth -t host_to_device", "cuda/nvbandwidth_v0.2_8gpu.txt"),
}


@pytest.mark.parametrize("check", sorted(_GOOD))
def test_nonzero_exit_is_an_error_even_when_the_output_parses(check: str) -> None:
    pattern, fixture = _GOOD[check]
    good = (FIX / fixture).read_text()

    def remote(rc: int) -> FakeRemote:
        r = FakeRemote("gpu001").on("command -v", (0, "/usr/bin/x\n", "")).on("MemTotal", (0, "2048000\n", ""))
        r.on(r"^mkdir|^ls ", (0, "", ""))
        return r.on(pattern, (rc, good, "mpirun noticed that process rank 3 exited on signal 9 (Killed).\n"))

    opts = LOCAL_FIO
    assert measure(check, {"gpu001": remote(0)}, "gpu001", opts).value > 0
    with pytest.raises(CheckError, match=r"gpu001: .* exited with rc 137 \(timed out\): mpirun noticed"):
        measure(check, {"gpu001": remote(137)}, "gpu001", opts)


# ------------------------------------------------------------------------------------------------ security


def _exposure(states: dict[int, str]) -> FakeRemote:
    def answer(cmd: str) -> tuple[int, str, str]:
        pairs = json.loads(shlex.split(cmd)[3])
        return 0, json.dumps([[a, p, states.get(p, "dropped")] for a, p in pairs]), ""

    return FakeRemote("gpu001").on(r"^python3 -c", answer)


def test_objectstore_exposure_fails_without_a_firewall() -> None:
    open_all = {p: "open" for p in (8333, 9333, 19333, 8080, 18080, 8888, 18888)}
    s = measure("security.objectstore_exposure", {"gpu002": _exposure(open_all)}, "gpu002")
    assert s.value == 6 and s.info["checked"] == 7  # s3-01 is the lab's master: master, volume, filer × HTTP, gRPC
    assert "s3-01 seaweedfs filer 10.89.20.9:8888: planned closed to gpu002 (object-store hosts only), found open" \
        in s.details
    # gpu001 receives the lab's models (filer_access): the filer's gRPC port is planned open to it, nothing else
    s = measure("security.objectstore_exposure", {"gpu001": _exposure(open_all)}, "gpu001")
    assert s.value == 5 and not [d for d in s.details if ":18888" in d]


def test_objectstore_exposure_passes_with_only_s3_open_and_needs_s3() -> None:
    assert measure("security.objectstore_exposure", {"gpu002": _exposure({8333: "open"})}, "gpu002").value == 0
    s = measure("security.objectstore_exposure", {"gpu002": _exposure({})}, "gpu002")
    assert s.details == ["s3-01 S3 gateway 10.89.20.9:8333: planned reachable from gpu002, found dropped"]


def test_objectstore_exposure_wants_the_planned_filer_subscription_open_to_the_model_receiver() -> None:
    s = measure("security.objectstore_exposure", {"gpu001": _exposure({8333: "open", 18888: "open"})}, "gpu001")
    assert s.value == 0 and "18888" in s.info["filer_subscription_open"]
    s = measure("security.objectstore_exposure", {"gpu001": _exposure({8333: "open"})}, "gpu001")
    assert s.details == ["s3-01 seaweedfs filer gRPC 10.89.20.9:18888: planned reachable from gpu001, found dropped"]


def test_exposure_probe_tells_open_from_refused() -> None:
    import socket
    import subprocess
    import sys

    from kiln.verify.checks.security import _PROBE_PY

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    free = closed.getsockname()[1]
    closed.close()
    pairs = json.dumps([["127.0.0.1", srv.getsockname()[1]], ["127.0.0.1", free]])
    out = subprocess.run([sys.executable, "-c", _PROBE_PY, pairs, "2"], capture_output=True, text=True, check=True)
    srv.close()
    assert [state for _, _, state in json.loads(out.stdout)] == ["open", "refused"]


def warp_put(fixture: str, *rules: tuple[str, tuple[int, str, str]],
             variables: WarpVariables | None = None) -> tuple[Sample, FakeRemote]:
    """objectstore.s3_put on a TEST DOUBLE launcher that answers warp with a real run's output."""
    out = (FIX / f"warp/{fixture}.json").read_text()
    r = (FakeRemote("gpu001").on("command -v warp", (0, "/usr/local/bin/warp\n", ""))
         .on(r"warp --version", (0, "warp version v1.0.0 - b3452c34f08a\n", "")).on(r"warp put", (0, out, ""))
         .on(r"^rm -f|^mkdir", (0, "", "")))
    for pattern, answer in rules:
        r.on(pattern, answer)
    opts = Options(s3_secret_key="s3cr3t", variables=(variables or WarpVariables(duration_s=5, concurrent=16),))
    ctx = context({"gpu001": r, "s3-01": FakeRemote("s3-01").on(".*", (0, "", ""))}, opts)
    chk = REGISTRY["objectstore.s3_put"]
    [subject] = chk.subjects(ctx, target("objectstore.s3_put"))
    chk.prepare(ctx, target("objectstore.s3_put"), subject)
    return chk.measure(ctx, target("objectstore.s3_put"), subject, REP), r


def test_warp_analysis_segment_fits_the_run() -> None:
    """A 5 s run is analysed in 250 ms segments (warp's own 1 s leaves a loaded PUT without two); 30 s runs keep
    warp's 1 s. The figure is warp's own analysis where it has one."""
    s, r = warp_put("put_short")
    assert "--analyze.dur 250ms" in s.raw["command.txt"]
    assert s.value == pytest.approx(0.0789, abs=5e-4) and "figure" not in s.info
    assert analysis_segment_ms(30) == 1000 and analysis_segment_ms(2) == 100
    assert any(c.startswith("rm -f") and ".csv.zst" in c for c in r.commands)  # the record is removed


def test_warp_skipped_analysis_is_judged_on_the_runs_total() -> None:
    """A real run whose analysis warp skipped (load 9): the figure is the run's total from warp's per-operation
    record, said so in the row; not a failure hidden, not an ERROR without cause."""
    ops = (FIX / "warp/put_skipped.ops.tsv").read_text()
    s, _ = warp_put("put_skipped", (r"zstd -dc", (0, ops, "")))
    assert s.value == pytest.approx(184549376 / 6.5747 / 1e9, rel=1e-3)  # 44 × 4 MiB from first start to last end
    assert s.info["figure"] == "run total" and s.raw["ops.tsv"] == ops
    assert any("warp's analysis skipped PUT" in d and "44 requests" in d for d in s.details)


def test_warp_skipped_analysis_without_a_usable_record_is_an_error() -> None:
    ops = (FIX / "warp/put_skipped.ops.tsv").read_text()
    with pytest.raises(CheckError, match="zstd, which reads warp's per-operation record, is missing"):
        warp_put("put_skipped", (r"zstd -dc", (127, "", "")))
    failed = ops.replace("\t\t2026", "\tconnection reset\t2026", 1)  # one request failed: no figure
    with pytest.raises(CheckError, match="1 of 44 PUT requests failed"):
        warp_put("put_skipped", (r"zstd -dc", (0, failed, "")))
    with pytest.raises(CheckError, match="only 16 of 32 warp streams finished"):
        warp_put("put_skipped", (r"zstd -dc", (0, ops, "")), variables=WarpVariables(duration_s=5, concurrent=32))
