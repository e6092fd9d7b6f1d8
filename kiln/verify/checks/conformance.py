"""Conformance: the hosts' state read back and compared with the plan. The measured value is the number of
mismatches (target: 0); every mismatch is reported as "<what>: planned <x>, found <y>"."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass

from kiln.lustre.lustre_common import normalize_lnet_net, normalize_nid, values_equal
from kiln.lustre.lustre_layout import (
    dir_default_drift,
    dir_default_from_spec,
    layout_drift,
    layout_from_spec,
    parse_getdirstripe,
    parse_getstripe,
)
from kiln.lustre.lustre_quota import QUOTA_TYPES, parse_default_quota, quota_drift, quota_from_spec
from kiln.plan.groups import LNET_ROUTERS, LUSTRE_CLIENTS, LUSTRE_MDS, LUSTRE_MGS, LUSTRE_OSS, LUSTRE_SERVERS
from kiln.plan.model import AcceptanceTarget, Layout, Tunable
from kiln.plan.tuning import is_namespaced_sysctl
from kiln.verify.checks.check import CheckError, Conformance, Findings, NothingPlanned, Subject, register
from kiln.verify.checks.context import Context
from kiln.verify.checks.options import Variables, var
from kiln.verify.checks.remote import drop_env_file, push_env_file, quote, with_env_file
from kiln.verify.parsers import (
    NVIDIA_SMI_GPU_COLUMNS,
    ParseError,
    parse_env_file,
    parse_ib_rate,
    parse_ib_state,
    parse_lnetctl_net_show,
    parse_nvidia_smi_csv,
)

SEAWEEDFS_UNITS = ("seaweedfs-master", "seaweedfs-volume", "seaweedfs-filer", "seaweedfs-s3")


def _fmt(v: object) -> str:
    return repr(v) if isinstance(v, str) and (not v or " " in v) else str(v)


# ------------------------------------------------------------------------------------------------ sysctls


@register
class Sysctls(Conformance):
    id = "conformance.sysctls"
    tools = ("sysctl",)

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        tun = [t for t in ctx.plan.tunables if t.apply == "sysctl"]
        if not tun:
            raise NothingPlanned("the plan sets no sysctls")
        container = ctx.in_container(host)
        script = "; ".join(
            f"printf '%s\\t%s\\t%s\\n' {quote(t.param)} \"$(sysctl -n {quote(t.param)} 2>&1 | tr -s '\\t\\n' '  ')\" "
            f"\"$(test -r /proc/sys/{quote(t.param.replace('.', '/'))} && echo r || echo -)\""
            for t in tun)
        r = ctx.must(host, script, 60, what="reading sysctls")
        seen = {}
        for line in r.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) == 3:
                seen[parts[0]] = (parts[1].strip(), parts[2] == "r")
        out = Findings(raw={"sysctl.txt": r.stdout})
        for t in tun:
            found, readable = seen.get(t.param, ("", False))
            if container and not is_namespaced_sysctl(t.id):
                out.note(f"{t.param} not checked: not namespaced, it belongs to the container host's "
                         f"kernel (found {_fmt(found)}, planned {_fmt(t.value)})")
                continue
            if not readable:
                out.mismatch(f"{t.param}: planned {_fmt(t.value)}, not readable ({found or 'no such key'})")
            elif not values_equal(t.param, t.value, found):
                out.mismatch(f"{t.param}: planned {_fmt(t.value)}, found {_fmt(found)}")
        out.info["checked"] = len(tun)
        return out


# ---------------------------------------------------------------------------------------------- nccl.conf


@register
class NcclConf(Conformance):
    id = "conformance.nccl_conf"
    tools = ("cat /etc/nccl.conf",)

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        ph = ctx.plan_host(host)
        pool = next((n for n in ctx.plan.nccl if ph and n.pool == ph.pool), None)
        if pool is None:
            raise NothingPlanned(f"the plan has no NCCL environment for this host's pool ({ph.pool if ph else '?'})")
        r = ctx.run(host, "cat /etc/nccl.conf", 30)
        out = Findings(raw={"nccl.conf": r.stdout})
        if not r.ok:
            why = r.stderr.strip() or f"rc {r.rc}"
            out.details = [f"{k}: planned {_fmt(v)}, not set (/etc/nccl.conf unreadable: {why})"
                           for k, v in sorted(pool.env.items())]
            return out
        found = parse_env_file(r.stdout)
        for k, v in sorted(pool.env.items()):
            if k not in found:
                out.mismatch(f"{k}: planned {_fmt(v)}, not set in /etc/nccl.conf")
            elif found[k] != str(v):
                out.mismatch(f"{k}: planned {_fmt(v)}, found {_fmt(found[k])}")
        for k in sorted(set(found) - set(pool.env)):
            out.mismatch(f"{k}: not in the plan, found {_fmt(found[k])} in /etc/nccl.conf")
        return out


# ------------------------------------------------------------------------------------------------- object store


def master_hosts(ctx: Context) -> list[str]:
    """Where seaweedfs-master runs: the plan's masters (the objectstore role reads the same list)."""
    return list(ctx.plan.objectstore.masters)


@dataclass(frozen=True, slots=True)
class ObjectstoreServicesVariables(Variables):
    scope = "conformance.objectstore_services"
    units: tuple[str, ...] = var(SEAWEEDFS_UNITS, "the systemd units that must be active on every object-store "
                                 "host (seaweedfs-master only on the plan's masters); comma-separated")


@register
class ObjectstoreServices(Conformance):
    id = "conformance.objectstore_services"
    tools = ("systemctl",)
    variables = (ObjectstoreServicesVariables,)

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        units = [u for u in ctx.var(ObjectstoreServicesVariables).units
                 if u != "seaweedfs-master" or host in master_hosts(ctx)]
        r = ctx.run(host, "; ".join(f"printf '%s %s\\n' {quote(u)} \"$(systemctl is-active {quote(u)} 2>&1)\""
                                    for u in units), 60)
        states = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
        out = Findings(raw={"systemctl.txt": r.stdout})
        for u in units:
            st = states.get(u, "unknown").strip()
            if st != "active":
                out.mismatch(f"{u}.service: planned active, found {st}")
        out.info["units"] = units
        return out


# SigV4 ListBuckets with the standard library only; runs with python3 on the object-store host.
# Credentials come through the environment (KILN_AK/KILN_SK, exported from a 0600 env file), never arguments.
_LIST_BUCKETS_PY = r"""
import datetime, hashlib, hmac, os, sys, urllib.request, urllib.error, re
ep = sys.argv[1].rstrip('/'); host = ep.split('://', 1)[1]
ak, sk, region = os.environ['KILN_AK'], os.environ['KILN_SK'], 'us-east-1'
t = datetime.datetime.now(datetime.timezone.utc); amz = t.strftime('%Y%m%dT%H%M%SZ'); day = amz[:8]
ph = hashlib.sha256(b'').hexdigest()
canon = '\n'.join(['GET', '/', '', 'host:' + host, 'x-amz-content-sha256:' + ph, 'x-amz-date:' + amz, '',
                   'host;x-amz-content-sha256;x-amz-date', ph])
scope = day + '/' + region + '/s3/aws4_request'
sts = '\n'.join(['AWS4-HMAC-SHA256', amz, scope, hashlib.sha256(canon.encode()).hexdigest()])
k = ('AWS4' + sk).encode()
for part in (day, region, 's3', 'aws4_request'):
    k = hmac.new(k, part.encode(), hashlib.sha256).digest()
sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
auth = ('AWS4-HMAC-SHA256 Credential=' + ak + '/' + scope +
        ', SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=' + sig)
req = urllib.request.Request(ep + '/', headers={'x-amz-date': amz, 'x-amz-content-sha256': ph, 'Authorization': auth})
try:
    body = urllib.request.urlopen(req, timeout=20).read().decode()
except urllib.error.HTTPError as e:
    print('HTTP', e.code, e.read().decode()[:400]); sys.exit(2)
except Exception as e:
    print('ERROR', e); sys.exit(3)
print('\n'.join(re.findall(r'<Name>([^<]+)</Name>', body)))
"""


def s3_credentials(ctx: Context) -> tuple[str, str]:
    ak = ctx.options.s3_access_key or ctx.plan.objectstore.access_key_id
    sk = ctx.options.s3_secret_key
    if not sk:
        raise CheckError("no S3 secret key: export KILN_S3_SECRET_KEY (and KILN_S3_ACCESS_KEY if it is not the "
                         f"plan's access key id {ctx.plan.objectstore.access_key_id!r})")
    return ak, sk


def s3_endpoints(ctx: Context) -> list[str]:
    """S3 gateways as host:port: the option, else every object-store host's storage address, else the plan's."""
    if ctx.options.s3_endpoint:
        return [e.split("://", 1)[-1] for e in ctx.options.s3_endpoint.split(",")]
    port = ctx.plan.objectstore.s3_port
    eps = [f"{a[0]}:{port}" for h in ctx.plan.objectstore.hosts if (a := ctx.inventory.storage_addresses(h))]
    return eps or [ctx.plan.objectstore.endpoint.split("://", 1)[-1].rstrip("/")]


def s3_tls(ctx: Context) -> bool:
    """https endpoints (an external store): warp needs --tls, ListBuckets an https URL."""
    return (ctx.options.s3_endpoint or ctx.plan.objectstore.endpoint or "").startswith("https://")


def list_buckets(ctx: Context, host: str, endpoint: str) -> tuple[list[str], str]:
    ak, sk = s3_credentials(ctx)
    code = base64.b64encode(_LIST_BUCKETS_PY.encode()).decode()
    env = push_env_file(ctx, host, "s3-list-buckets.env", {"KILN_AK": ak, "KILN_SK": sk})
    cmd = with_env_file(env, "python3 -c \"import base64,sys; exec(base64.b64decode(sys.argv[2]))\" "
                             f"{quote(('https://' if s3_tls(ctx) else 'http://') + endpoint)} {code}")
    try:
        r = ctx.run(host, cmd, 60)
    finally:
        drop_env_file(ctx, host, env)
    if r.rc == 127:
        raise CheckError(f"{host}: python3 is needed for the S3 ListBuckets request")
    if not r.ok:
        raise CheckError(f"S3 ListBuckets on {endpoint} from {host} failed: {(r.stdout + r.stderr).strip()[:400]}")
    return [b for b in r.stdout.split() if b], r.stdout


@register
class ObjectstoreBuckets(Conformance):
    id = "conformance.objectstore_buckets"
    tools = ("S3 ListBuckets (SigV4)",)

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        hosts = ctx.group_hosts(target.group)
        return [Subject(f"{hosts[0]} (S3 ListBuckets)", tuple(hosts))] if hosts else []

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        endpoint = s3_endpoints(ctx)[0]
        names, raw = list_buckets(ctx, host, endpoint)
        out = Findings(raw={"list_buckets.txt": raw})
        for b in ctx.plan.objectstore.buckets:
            if b.name not in names:
                out.mismatch(f"bucket {b.name} ({b.purpose}): planned, not listed by {endpoint} "
                             f"(found: {', '.join(names) or 'none'})")
        out.info["buckets"] = names
        return out


# ---------------------------------------------------------------------------------------------------- RDMA


@register
class RdmaPorts(Conformance):
    id = "conformance.rdma_ports"
    tools = ("/sys/class/infiniband",)

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        expected = ctx.hostvars(host).get("rdma_expected_devices")
        if expected is None:
            ph = ctx.plan_host(host)
            expected = [{"device": n.device, "role": n.role, "rate_gbps": n.link_Gbps}
                        for n in (ph.nics if ph else ()) if n.device]
        if not expected:
            raise NothingPlanned("the plan expects no RDMA device on this host")
        script = "; ".join(
            f"d={quote(e['device'])}; p=/sys/class/infiniband/$d/ports/1; "
            "printf '%s|%s|%s\\n' \"$d\" \"$(cat $p/state 2>&1)\" \"$(cat $p/rate 2>&1)\"" for e in expected)
        r = ctx.run(host, script, 30)
        seen = {p[0]: (p[1], p[2]) for line in r.stdout.splitlines() if len(p := line.split("|")) == 3}
        out = Findings(raw={"ports.txt": r.stdout})
        for e in expected:
            dev, want = e["device"], float(e["rate_gbps"])
            state_txt, rate_txt = seen.get(dev, ("missing", "missing"))
            try:
                state = parse_ib_state(state_txt)
            except ParseError:
                out.mismatch(f"{dev} port 1: planned ACTIVE at {want:g} Gb/s, device not found "
                             f"({state_txt.strip()})")
                continue
            if state != "ACTIVE":
                out.mismatch(f"{dev} port 1 state: planned ACTIVE, found {state}")
            try:
                rate = parse_ib_rate(rate_txt)
            except ParseError:
                out.mismatch(f"{dev} port 1 rate: planned {want:g} Gb/s, unreadable ({rate_txt.strip()})")
                continue
            if rate < want:
                out.mismatch(f"{dev} port 1 rate: planned {want:g} Gb/s, found {rate:g} Gb/s")
        return out


# ----------------------------------------------------------------------------------------------------- GPUs


@register
class Gpus(Conformance):
    id = "conformance.gpus"
    tools = ("nvidia-smi",)

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        ph = ctx.plan_host(host)
        want = ph.gpus if ph else int(ctx.hostvars(host).get("gpu_expected_count", 0))
        r = ctx.run(host, f"nvidia-smi --query-gpu={','.join(NVIDIA_SMI_GPU_COLUMNS)} --format=csv", 60)
        if not r.ok:
            raise CheckError(f"{host}: nvidia-smi failed (rc {r.rc}): {(r.stdout + r.stderr).strip()[:300]}")
        gpus = parse_nvidia_smi_csv(r.stdout, r.stderr)
        out = Findings(raw={"nvidia-smi.csv": r.stdout})
        if len(gpus) != want:
            out.mismatch(f"GPU count: planned {want}, found {len(gpus)}")
        for g in gpus:
            if g.persistence != "Enabled":
                out.mismatch(f"GPU {g.index} ({g.name}) persistence mode: planned Enabled, found {g.persistence}")
        return out


# --------------------------------------------------------------------------------------------------- Lustre


@register
class Lnet(Conformance):
    id = "conformance.lnet"
    tools = ("lnetctl net show",)

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        ph = ctx.plan_host(host)
        planned_nids = {normalize_nid(n) for n in (ph.nids if ph else ())}
        planned_nets = {normalize_lnet_net(n.name) for n in ctx.plan.lnet}
        r = ctx.run(host, "lnetctl net show", 60)
        if not r.ok:
            raise CheckError(f"{host}: lnetctl net show failed (rc {r.rc}): {(r.stdout + r.stderr).strip()[:300]}")
        nis = parse_lnetctl_net_show(r.stdout, r.stderr)
        out = Findings(raw={"lnetctl-net-show.yaml": r.stdout})
        by_nid = {ni.nid: ni for ni in nis}
        for nid in sorted(planned_nids):
            ni = by_nid.get(nid)
            if ni is None:
                out.mismatch(f"NID {nid}: planned, not configured (found: {', '.join(sorted(by_nid)) or 'none'})")
            elif ni.status != "up":
                out.mismatch(f"NID {nid}: planned up, found {ni.status}")
        for ni in nis:
            if ni.net not in planned_nets:
                out.mismatch(f"net {ni.net} (NID {ni.nid}): not in the plan (planned nets: "
                             f"{', '.join(sorted(planned_nets))})")
        return out


def lustre_hosts(ctx: Context, target: AcceptanceTarget) -> list[str]:
    """The target's group (the clients), then the Lustre servers and the LNet routers: every host that applies
    a Lustre or LNet tunable, so each value is read where it applies."""
    hosts = ctx.group_hosts(target.group)
    others = [*ctx.group_hosts(LUSTRE_SERVERS), *ctx.group_hosts(LNET_ROUTERS)]
    return hosts + [h for h in others if h not in hosts]


def tunables_for(ctx: Context, host: str) -> list[Tunable]:
    """The Lustre-side tunables that apply to this host: client ones for its pool on clients, OSS/MDS ones on
    servers (persistent ones included: an OSS runs obdfilter.*.brw_size), LNet module options on every Lustre
    host and LNet router."""
    ph = ctx.plan_host(host)
    groups = set(ctx.plan.groups)
    member = {g for g in groups if host in ctx.plan.groups[g]}
    out = []
    for t in ctx.plan.tunables:
        if t.apply == "mount":  # mount options: conformance.lustre_mounts
            continue
        if (t.side == "client" and LUSTRE_CLIENTS in member and (t.pool is None or (ph and ph.pool == t.pool))) \
                or (t.side == "oss" and LUSTRE_OSS in member) \
                or (t.side == "mds" and LUSTRE_MDS in member) \
                or (t.side == "mgs" and LUSTRE_MGS in member) \
                or t.side == "lnet":
            out.append(t)
    return out


@register
class LustreTunables(Conformance):
    id = "conformance.lustre_tunables"
    tools = ("lctl get_param", "/sys/module/*/parameters")

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        return [Subject(h, (h,)) for h in lustre_hosts(ctx, target)]

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        tun = tunables_for(ctx, host)
        if not tun:
            raise NothingPlanned("the plan sets no Lustre tunable for this host's role")
        page = ctx.run(host, "getconf PAGESIZE", 30)
        page_size = int(page.stdout.strip()) if page.ok and page.stdout.strip().isdigit() else 4096
        out = Findings()
        raw: list[str] = []
        for t in tun:
            if t.apply in ("module_param", "module_option"):
                mod, _, opt = t.param.partition(".")
                path = f"/sys/module/{mod}/parameters/{opt}"
                r = ctx.run(host, f"cat {quote(path)}", 30)
                raw.append(f"{path}: rc={r.rc} {r.stdout.strip()} {r.stderr.strip()}")
                if not r.ok:
                    out.mismatch(f"{t.param}: planned {_fmt(t.value)}, not readable ({path}: module not loaded?)")
                elif not values_equal(t.param, t.value, r.stdout.strip(), page_size):
                    out.mismatch(f"{t.param}: planned {_fmt(t.value)}, found {_fmt(r.stdout.strip())}")
                continue
            r = ctx.run(host, f"lctl get_param {quote(t.param)}", 60)
            raw.append(f"$ lctl get_param {t.param} (rc={r.rc})\n{r.stdout}{r.stderr}")
            values = [line.split("=", 1) for line in r.stdout.splitlines() if "=" in line]
            if not r.ok or not values:
                out.mismatch(f"{t.param}: planned {_fmt(t.value)}, not found by lctl get_param "
                             f"({(r.stderr or r.stdout).strip()[:160] or 'no such parameter'})")
                continue
            for name, value in values:
                if not values_equal(name, t.value, value.strip(), page_size):
                    out.mismatch(f"{name}: planned {_fmt(t.value)}, found {_fmt(value.strip())}")
        out.raw["get_param.txt"] = "\n".join(raw)
        out.info["checked"] = len(tun)
        return out


# Mount options the kernel does not show in /proc/mounts (userspace or fstab-only).
_USERSPACE_OPTS = {"defaults", "_netdev", "auto", "noauto", "nofail", "user", "nouser"}


@register
class LustreMounts(Conformance):
    id = "conformance.lustre_mounts"
    tools = ("findmnt",)

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        ph = ctx.plan_host(host)
        mount_tun = [t for t in ctx.plan.tunables
                     if t.apply == "mount" and (t.pool is None or (ph is not None and t.pool == ph.pool))]
        planned_opts = [o for t in mount_tun for o in str(t.value).split(",") if o]
        mounts = ctx.hostvars(host).get("lustre_client_mounts") or [
            {"fsname": ctx.plan.fsname, "mount_point": ctx.plan.mount_point,
             "mgs_nids": [list(x) for x in ctx.plan.mgs_nids], "options": []}]
        if planned_opts:  # the plan's mount options (tunable client.mount.options) win over the inventory's list
            mounts = [dict(m, options=planned_opts) for m in mounts]
        out = Findings()
        raw: list[str] = []
        for m in mounts:
            mp = m["mount_point"]
            r = ctx.run(host, f"findmnt -J -n -o TARGET,SOURCE,FSTYPE,OPTIONS --mountpoint {quote(mp)}", 30)
            raw.append(f"$ findmnt {mp} (rc={r.rc})\n{r.stdout}")
            if not r.ok or not r.stdout.strip():
                out.mismatch(f"{mp}: planned a Lustre mount of {m['fsname']}, nothing mounted there")
                continue
            fs = (json.loads(r.stdout).get("filesystems") or [{}])[0]
            if fs.get("fstype") != "lustre":
                out.mismatch(f"{mp}: planned fstype lustre, found {fs.get('fstype')}")
            src = str(fs.get("source", ""))
            if not src.endswith(f":/{m['fsname']}"):
                out.mismatch(f"{mp} source: planned <MGS NIDs>:/{m['fsname']}, found {src}")
            want_nids = {normalize_nid(n) for group in m.get("mgs_nids", []) for n in group}
            got_nids = {normalize_nid(n) for n in re.split(r"[:,]", src.rsplit(":/", 1)[0]) if "@" in n}
            if want_nids and not (want_nids & got_nids):
                out.mismatch(f"{mp} MGS NIDs: planned {sorted(want_nids)}, found {sorted(got_nids)}")
            opts = set(str(fs.get("options", "")).split(","))
            for o in m.get("options", []):
                if o not in _USERSPACE_OPTS and o not in opts:
                    out.mismatch(f"{mp} option {o}: planned, not in the mount options ({fs.get('options')})")
        out.raw["findmnt.txt"] = "\n".join(raw)
        return out


@register
class LustreLayouts(Conformance):
    id = "conformance.lustre_layouts"
    tools = ("lfs getstripe -d --yaml", "lfs getdirstripe -D --yaml")

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        hosts = ctx.group_hosts(target.group)  # directory layouts are filesystem-wide: read them from one client
        return [Subject(hosts[0], (hosts[0],))] if hosts else []

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        if not ctx.plan.layouts:
            raise NothingPlanned("the plan has no directory layouts")
        out = Findings()
        raw: list[str] = []
        for lay in ctx.plan.layouts:
            # --yaml (lfs getstripe has it since 2.10): one key per line, lov_dump_user_lmm_header() in liblustreapi.c
            r = ctx.run(host, f"lfs getstripe -d --yaml {quote(lay.mount_path)}", 60)
            raw.append(f"$ lfs getstripe -d --yaml {lay.mount_path} (rc={r.rc})\n{r.stdout}{r.stderr}")
            if not r.ok:
                out.mismatch(f"{lay.mount_path}: planned layout `{lay.setstripe}`, lfs getstripe failed: "
                             f"{r.stderr.strip()[:160]}")
                continue
            out.details.extend(layout_mismatches(lay, r.stdout))
            if lay.dirstripe is not None:
                # lmv_dump_user_lmm() in liblustreapi.c: lmv_stripe_count, lmv_stripe_offset, lmv_max_inherit
                r = ctx.run(host, f"lfs getdirstripe -D --yaml {quote(lay.mount_path)}", 60)
                raw.append(f"$ lfs getdirstripe -D --yaml {lay.mount_path} (rc={r.rc})\n{r.stdout}{r.stderr}")
                if not r.ok:
                    out.mismatch(f"{lay.mount_path}: planned default directory layout "
                                 f"`{' '.join(lay.dirstripe.args())}`, lfs getdirstripe failed: "
                                 f"{r.stderr.strip()[:160]}")
                    continue
                out.details.extend(dir_default_mismatches(lay, r.stdout))
        out.raw["getstripe.txt"] = "\n".join(raw)
        return out


@register
class LustreQuotas(Conformance):
    id = "conformance.lustre_quotas"
    tools = ("lfs quota -U|-G|-P",)

    def subjects(self, ctx: Context, target: AcceptanceTarget) -> list[Subject]:
        hosts = ctx.group_hosts(target.group)  # default quotas are filesystem-wide: read them from one client
        return [Subject(hosts[0], (hosts[0],))] if hosts else []

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        host = subject.hosts[0]
        if not ctx.plan.quota_defaults:
            raise NothingPlanned("the plan sets no default quotas (lustre.quotas.defaults)")
        out = Findings()
        raw: list[str] = []
        for q in ctx.plan.quota_defaults:
            flag = QUOTA_TYPES[q.type][0]
            # print_quota_title()/print_quota() in lustre/utils/lfs.c: the default quota table of one type
            r = ctx.run(host, f"lfs quota {flag} {quote(ctx.plan.mount_point)}", 60)
            raw.append(f"$ lfs quota {flag} {ctx.plan.mount_point} (rc={r.rc})\n{r.stdout}{r.stderr}")
            if not r.ok:
                out.mismatch(f"{q.type} default quota: lfs quota {flag} failed: {r.stderr.strip()[:160]}")
                continue
            out.details.extend(quota_mismatches(q.type, q.module_args(), r.stdout))
        out.raw["quota.txt"] = "\n".join(raw)
        return out


def quota_mismatches(quota_type: str, planned: dict[str, object], lfs_quota: str) -> list[str]:
    """What differs between a planned default quota and `lfs quota -U|-G|-P` output (lustre_quota's own rules)."""
    current = parse_default_quota(lfs_quota, quota_type)
    if current is None:
        return [f"{quota_type} default quota: lfs quota printed no default quota table"]
    return [
        f"{quota_type} default quota {d['field']}: planned {d['wanted']}, found {d['current']}"
        for d in quota_drift(current, quota_from_spec(planned))
    ]


def dir_default_mismatches(lay: Layout, getdirstripe: str) -> list[str]:
    """What differs between a planned default directory layout and `lfs getdirstripe -D` output."""
    if lay.dirstripe is None:
        return []
    wanted = dir_default_from_spec(lay.dirstripe.module_args())
    return [
        f"{lay.mount_path} subdirectories {d['field']}: planned {d['wanted']}, found {d['current']}"
        for d in dir_default_drift(parse_getdirstripe(getdirstripe), wanted)
    ]


def layout_mismatches(lay: Layout, getstripe: str) -> list[str]:
    """What differs between a planned directory layout and `lfs getstripe -d` output, one sentence each.

    Parsing and comparison are kiln.lustre.lustre_layout's (the lustre_layout module's own drift check)."""
    current = parse_getstripe(getstripe)
    if current is None:
        return [f"{lay.mount_path}: planned layout `{lay.setstripe}`, found no default layout"]
    out = []
    for d in layout_drift(current, layout_from_spec([c.layout_args() for c in lay.components])):
        where = lay.mount_path if d["component"] is None else f"{lay.mount_path} component {d['component']}"
        out.append(f"{where} {d['field']}: planned {d['wanted']}, found {d['current']}")
    return out

