"""The local lab: a stack's hosts as podman systemd containers, configured by the real playbooks,
verified by the real acceptance suite. `kiln lab up|down|status`; `make lab` runs `up`.

The hosts are reached over SSH at their management addresses, as Ansible reaches a real cluster:
the lab makes its own key pair, authorizes it in each container through podman, and pins each
container's host key (read through podman, never trusted on first use) in its own known_hosts.

State lives in `.kiln/<stack>/` (git-ignored): the generated inventory, the lab's S3 secret and SSH
key (mode 0600, never printed), logs and reports. Every step is idempotent, so a killed run is
recovered by running `kiln lab up` again.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kiln.deploy.runner import ansible_env, run_playbook
from kiln.lab import podman
from kiln.plan import build_plan
from kiln.plan.model import Host, Plan
from kiln.plan.settings import build_inventory
from kiln.render.inventory import container_name, render_inventory
from kiln.render.monitoring import render_monitoring
from kiln.spec import load_stack
from kiln.spec.loader import STACKS_ENV, stack_path

CHECKOUT_ENV = "KILN_CHECKOUT"
#: The Prometheus JMX exporter javaagent scripts/build-kafka.sh fetches (the newest 1.x Maven Central serves here).
JMX_EXPORTER_VERSION = "1.0.1"
# What the lab runs besides the Python package: the playbooks, the roles and the host scripts of a checkout.
CHECKOUT_PARTS = ("ansible/site.yml", "roles", "scripts/host-prereqs.sh")
IMAGE = "localhost/kiln-node:bookworm"
FAULT_TMPFS_MIB = 32  # the size of the lab's fault filesystem (monitoring.fault_filesystem)
STEPS = ("prepare", "hosts", "inventory", "configure", "verify")
# The lab's fast tier: a directory on each client host behind the mover's --mount-point (no Lustre kernel).
LAB_FAST_TIER = "/srv/kiln-fast"
# Failover pairs: the lab-only stand-ins (TEST DOUBLEs) of Lustre's OCF agents and of a BMC fence agent, copied into
# the pair's server containers, and where those containers see the host's podman API (fence_kiln_lab).
DOUBLES = Path(__file__).resolve().parent / "doubles"
LAB_AGENTS = {
    "/usr/lib/ocf/resource.d/lustre/Lustre": DOUBLES / "Lustre",
    "/usr/lib/ocf/resource.d/lustre/healthLNET": DOUBLES / "healthLNET",
    "/usr/sbin/fence_kiln_lab": DOUBLES / "fence_kiln_lab",
}
LAB_FENCE_AGENT = "fence_kiln_lab"
API_DIR_IN_CONTAINER = "/var/lib/kiln-lab"

# The lab's benchmark runs are short: its figures show that the suite measures for real, not what
# hardware can do (docs/lab.md), and a warm `make lab` must stay within a few minutes. The stack's
# acceptance section still sets how often each runs (warm-up + repetitions). Recorded in the
# report's `options`; a real cluster's sign-off uses kiln verify's defaults (docs/acceptance.md).
VERIFY_OPTIONS = {
    "network.iperf3.seconds": "2",
    "storage.fio.runtime_s": "5",
    "objectstore.warp.duration_s": "5",  # warp needs a few 1-second segments to analyse a PUT; 3 s is too few
    "objectstore.warp.objects": "20",
    "objectstore.warp.concurrent": "16",
    "dataflow.fast_tier": LAB_FAST_TIER,  # the datamover role's stand-in for the Lustre mount (lab_vars)
    "dataflow.shard_MiB": "32",  # about 250 MB per pass and a 34 MB model: the lab's lake is sized at 0.5 GB
    "ha.drill": "true",  # the lab's pair is there to be failed over (kiln/verify/checks/ha.py)
    "benchmark_workers": "1",  # the lab's hosts share one disk and two cores: no two benchmarks at once
    "stream.drill": "true",  # the lab's KRaft nodes are there to lose a broker (kiln/verify/checks/stream.py)
}


#: What the lab's podman containers cannot give evidence of, by the part a check requires (AcceptanceTarget.requires),
#: and why. A lab's sign-off is INCOMPLETE for these (docs/lab.md, "The verdict"): `kiln lab up` accepts that and
#: nothing else.
LAB_CANNOT_MEASURE = {
    "gpu": "no GPU in a podman container",
    "rdma": "no RDMA device in a podman container",
    "lustre": "no Lustre kernel modules in a container (it cannot load any)",
    "clock": "a container shares the machine's clock and runs no time service of its own",
}


def lab_outcome(report: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether a lab's sign-off is what a lab can reach, and what it could not measure (one line per part).

    ACCEPTED (also WITH WAIVERS) is; INCOMPLETE is when every piece of missing evidence is a check NOT APPLICABLE
    for a part in LAB_CANNOT_MEASURE, or a check a `--only` pass left out; REJECTED, an ERROR or any other missing
    evidence is not."""
    summary = report.get("summary") or {}
    verdict = summary.get("verdict")
    if verdict in ("ACCEPTED", "ACCEPTED WITH WAIVERS"):
        return True, []
    lacking: dict[str, list[str]] = {}
    ok = verdict == "INCOMPLETE"
    for m in summary.get("missing") or []:
        parts = [p for p in m.get("requires") or () if p in LAB_CANNOT_MEASURE]
        if m.get("verdict") == "NOT_APPLICABLE" and parts:
            lacking.setdefault(parts[0], []).append(m["check"])
        elif not (m.get("verdict") == "NOT_RUN" and m.get("check") != "*"):
            ok = False
    lines = [f"{part}: {LAB_CANNOT_MEASURE[part]} — {', '.join(dict.fromkeys(checks))}"
             for part, checks in lacking.items()]
    return ok, lines


def lab_networks(h: Host, mgmt: str, storage: str) -> list[tuple[str, str, str]]:
    """A lab host's podman networks as (network, address, interface): the storage network on the interface the plan
    names for the host's storage NIC, the management network on the first ethN the plan leaves free."""
    taken = {n.interface for n in h.nics}
    first_free = next(f"eth{i}" for i in range(len(taken) + 1) if f"eth{i}" not in taken)
    nets = [(mgmt, h.management_address, first_free)]
    for n in h.nics:
        if n.carries_storage and n.address:
            return [*nets, (storage, n.address, n.interface)]
    return nets


class LabError(RuntimeError):
    """A lab step failed: names the step, the host (if any) and the log to read."""

    def __init__(self, step: str, message: str, host: str | None = None, log: Path | None = None) -> None:
        where = f" on {host}" if host else ""
        see = f"\n  log: {log}" if log else ""
        super().__init__(f"lab step '{step}' failed{where}: {message}{see}")
        self.step, self.host, self.log = step, host, log


def checkout_root() -> Path:
    """The kiln checkout the lab runs from: $KILN_CHECKOUT when set, else the source tree kiln is imported
    from (`pip install -e .`, `make lab`), else the working directory. An installed wheel holds no
    ansible/, roles/ or scripts/, so from a wheel alone the lab stops here and says how to fix it."""
    env = os.environ.get(CHECKOUT_ENV)
    if env:
        candidates = [(Path(env).absolute(), f"${CHECKOUT_ENV}")]
    else:
        candidates = [
            (Path(__file__).resolve().parents[2], "the tree kiln is imported from"),
            (Path.cwd(), "the working directory"),
        ]
    for path, _ in candidates:
        if all((path / part).exists() for part in CHECKOUT_PARTS):
            return path
    looked = "; ".join(f"{path} ({why})" for path, why in candidates)
    raise LabError(
        "load",
        f"the lab needs a kiln checkout ({', '.join(CHECKOUT_PARTS)}), which an installed package does not hold; "
        f"looked in {looked}. Fix: run `make lab` or `kiln lab up` in a git clone of kiln, or set "
        f"{CHECKOUT_ENV}=DIR to one",
    )


@dataclass
class Lab:
    stack: str
    plan: Plan
    state: Path
    out: object = field(default=sys.stdout)
    root: Path = field(default_factory=Path.cwd)  # the checkout (checkout_root())
    stacks_dir: Path | None = None  # where the stack name was resolved (passed on to kiln verify)

    @classmethod
    def load(cls, stack: str, stacks_dir: str | Path | None = None) -> Lab:
        """The lab of a stack. Stack names resolve as everywhere (kiln.spec.stack_path); without --stacks-dir
        or $KILN_STACKS_DIR they resolve against the checkout's stacks/, so any directory of it works."""
        root = checkout_root()
        if stacks_dir is None and not os.environ.get(STACKS_ENV):
            stacks_dir = root / "stacks"
        spec = load_stack(stack, stacks_dir)
        inv = build_inventory(spec)  # before planning: a stack the lab cannot reach stops here
        if inv.connection != "ssh" or inv.address_by != "management_ip" or inv.ansible_user not in (None, "root"):
            raise LabError(
                "load",
                f"stack {stack} has inventory connection={inv.connection!r}, address_by={inv.address_by!r}, "
                f"ansible_user={inv.ansible_user!r}; the lab reaches its containers over SSH as root at their "
                "management addresses: set inventory.connection: ssh, inventory.address_by: management_ip and "
                "inventory.ansible_user: root",
            )
        plan = build_plan(spec, stack)
        where = Path(stacks_dir) if stacks_dir is not None else None
        return cls(stack, plan, root / ".kiln" / plan.stack, root=root, stacks_dir=where)

    # -- helpers -------------------------------------------------------------------------------
    def say(self, step: str, text: str) -> None:
        n = STEPS.index(step) + 1 if step in STEPS else 0
        prefix = f"[lab {n}/{len(STEPS)} {step}]" if n else "[lab]"
        print(f"{prefix} {text}", file=self.out, flush=True)  # type: ignore[call-overload]

    @property
    def inventory_dir(self) -> Path:
        return self.state / "inventory"

    @property
    def secret_file(self) -> Path:
        return self.state / "secrets" / "s3.env"

    @property
    def wheelhouse(self) -> Path:
        return self.state / "wheelhouse"

    @property
    def facts_dir(self) -> Path:
        """Ansible's fact cache for the lab's hosts (dropped whenever a container is created or started)."""
        return self.state / "facts"

    @property
    def ssh_dir(self) -> Path:
        return self.state / "ssh"

    @property
    def ssh_config(self) -> Path:
        return self.ssh_dir / "config"

    def ssh_key(self) -> Path:
        """The lab's own SSH key pair (made once; the private half is mode 0600 and never leaves .kiln/)."""
        key = self.ssh_dir / "id_ed25519"
        if not key.exists() or not key.with_suffix(".pub").exists():
            self.ssh_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            key.unlink(missing_ok=True)
            key.with_suffix(".pub").unlink(missing_ok=True)
            proc = subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"kiln-lab-{self.plan.stack}", "-f", str(key)],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                raise LabError("hosts", f"ssh-keygen failed: {proc.stderr.strip()} (is openssh-client installed?)")
        return key

    def write_ssh_files(self, known: dict[str, str]) -> None:
        """known_hosts (management address → host key) and the ssh config Ansible and kiln verify use."""
        key = self.ssh_key()
        lines = [f"{addr} {hostkey}\n" for addr, hostkey in sorted(known.items())]
        _write_if_changed(self.ssh_dir / "known_hosts", "".join(lines))
        config = (
            f"# Written by kiln lab for stack {self.plan.stack}: how Ansible and kiln verify reach the lab hosts.\n"
            f"Host {' '.join(sorted(known))}\n"
            "    User root\n"
            f"    IdentityFile {key}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.ssh_dir / 'known_hosts'}\n"
            "    StrictHostKeyChecking yes\n"
            "    PasswordAuthentication no\n"
            "    BatchMode yes\n"
            "    LogLevel ERROR\n"
        )
        _write_if_changed(self.ssh_config, config)

    def net_names(self) -> tuple[str, str]:
        return f"kiln-{self.plan.stack}-mgmt", f"kiln-{self.plan.stack}-storage"

    def _script(self, step: str, *args: str) -> None:
        log = self.state / "logs" / f"{step}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as fh:
            proc = subprocess.run(
                [str(self.root / "scripts" / args[0]), *args[1:]],
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                check=False,
            )
        if proc.returncode != 0:
            raise LabError(step, f"{args[0]} exited {proc.returncode}", log=log)

    # -- steps ---------------------------------------------------------------------------------
    def prepare(self) -> None:
        self.say("prepare", "host packages and podman settings (scripts/host-prereqs.sh)")
        self._script("prepare", "host-prereqs.sh")
        self.say("prepare", f"base image {IMAGE} (scripts/build-base-image.sh; cached after the first build)")
        self._script("prepare", "build-base-image.sh")
        self.say("prepare", "pinned SeaweedFS and warp (scripts/build-tools.sh; cached after the first build)")
        self._script("prepare", "build-tools.sh", "weed", "warp")
        self.prepare_datamover()
        self.prepare_kafka()

    def prepare_datamover(self) -> None:
        """The wheelhouse the datamover role installs on the lab's mover hosts (scripts/build-wheelhouse.sh)."""
        if self.plan.dataflow is None:
            return
        self.say("prepare", "kiln's wheelhouse for the data mover (scripts/build-wheelhouse.sh)")
        self._script("prepare", "build-wheelhouse.sh", str(self.wheelhouse))

    def prepare_kafka(self) -> None:
        """The Kafka jars the kafka role installs on the lab's KRaft nodes (scripts/build-kafka.sh: from Maven Central,
        each checked against its checksum; a real cluster installs Apache's release tarball)."""
        if self.plan.kafka is None or not self.plan.kafka.nodes:
            return
        self.say("prepare", f"Kafka {self.plan.kafka.version} jars (scripts/build-kafka.sh; cached after the first "
                            "build)")
        self._script("prepare", "build-kafka.sh", self.plan.kafka.version)

    def hosts(self) -> None:
        mgmt, storage = self.net_names()
        public_key = self.ssh_key().with_suffix(".pub").read_text()
        known: dict[str, str] = {}
        fresh = False
        for name, subnet in ((mgmt, self.plan.networks.management), (storage, self.plan.networks.storage)):
            made = podman.ensure_network(name, subnet, self.plan.stack)
            self.say("hosts", f"network {name} {subnet}: {'created' if made else 'exists'}")
        if self.fences_containers():
            try:
                started = podman.api_service(self.api_dir / "podman.sock", self.state / "podman-api.pid")
            except podman.PodmanError as exc:
                raise LabError("hosts", str(exc)) from None
            where = self.api_dir.relative_to(self.root)
            self.say("hosts", f"podman API for the lab's fence agent at {where}/podman.sock: "
                              f"{'started' if started else 'running'} (lab-only; the pair's servers can stop and "
                              "start lab containers through it)")
        for h in self.plan.hosts:
            nets = lab_networks(h, mgmt, storage)
            vols: list[tuple[str, str]] = []
            nvme = self.plan.local_nvme_mount(h.pool)
            if nvme is not None:
                vol = f"kiln-{self.plan.stack}-{h.name}-nvme"
                podman.ensure_volume(vol, self.plan.stack)
                vols.append((vol, nvme))
            host_spec = podman.HostSpec(
                container=container_name(self.plan.stack, h.name),
                hostname=h.name,
                image=IMAGE,
                networks=tuple(nets),
                volumes=tuple(vols),
                labels={podman.LABEL: self.plan.stack, "io.kiln.role": h.role},
                hosts=tuple((o.name, o.management_address) for o in self.plan.hosts if o.name != h.name),
                tmpfs=self.fault_tmpfs(),
                binds=self.api_binds(h.name),
            )
            try:
                done = podman.ensure_container(host_spec)
                try:
                    state = podman.wait_for_systemd(host_spec.container)
                except podman.PodmanError:
                    if done == "created":
                        raise
                    done = podman.recreate_container(host_spec)  # a stale container of an earlier run
                    state = podman.wait_for_systemd(host_spec.container)
                if host_spec.binds:
                    podman.copy_into(host_spec.container, LAB_AGENTS)
                podman.authorize_key(host_spec.container, public_key)
                known[h.management_address] = podman.ssh_host_key(host_spec.container)
                podman.reachable(h.management_address)
            except podman.PodmanError as exc:
                raise LabError("hosts", str(exc), host=h.name) from None
            self.say("hosts", f"{h.name} ({h.role}) {h.management_address}: {done}, systemd {state}, sshd up")
            fresh = fresh or done != "running"
        if fresh:  # a new or restarted container: the cached facts may not be its own
            shutil.rmtree(self.facts_dir, ignore_errors=True)
        self.write_ssh_files(known)
        self.say("hosts", f"SSH: key, known_hosts and config in {self.ssh_dir.relative_to(self.root)}")

    @property
    def api_dir(self) -> Path:
        return self.state / "podman-api"

    def fences_containers(self) -> bool:
        """The stack's pairs are fenced by the lab's stand-in, which needs the host's podman API."""
        fencing = self.plan.lustre.fencing
        return bool(self.plan.ha.pairs) and fencing is not None and fencing.agent == LAB_FENCE_AGENT

    def api_binds(self, host: str) -> tuple[tuple[str, str], ...]:
        """A failover pair's servers see the podman API directory (the lab's fence agent); other hosts nothing."""
        if not self.fences_containers() or self.plan.ha.pair_of(host) is None:
            return ()
        return ((str(self.api_dir), API_DIR_IN_CONTAINER),)

    def fault_tmpfs(self) -> tuple[tuple[str, int], ...]:
        """The small tmpfs every lab host gets at monitoring.fault_filesystem: the disk the disk-fill fault of
        `kiln verify` fills (monitoring.fault_disk_fill), never the machine's own disk."""
        path = self.plan.monitoring.fault_filesystem
        return ((path, FAULT_TMPFS_MIB),) if path else ()

    @property
    def monitoring_dir(self) -> Path:
        return self.state / "monitoring"

    def inventory(self) -> None:
        files = render_inventory(self.plan)
        for rel, text in files.items():
            _write_if_changed(self.inventory_dir / rel, text)
        self.say(
            "inventory",
            f"{len(files)} files in {self.inventory_dir.relative_to(self.root)} (kiln inventory {self.stack})",
        )
        mon = render_monitoring(self.plan)
        for rel, text in mon.items():
            _write_if_changed(self.monitoring_dir / rel, text)
        self.say("inventory", f"{len(mon)} files in {self.monitoring_dir.relative_to(self.root)} "
                              f"(kiln monitoring {self.stack}: Prometheus, rules, Alertmanager, dashboards)")
        if not self._secret_complete():
            self.secret_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _write_if_changed(
                self.secret_file,
                f"KILN_S3_ACCESS_KEY={self.plan.objectstore.access_key_id}\n"
                f"KILN_S3_SECRET_KEY={secrets.token_urlsafe(30)}\n",
                mode=0o600,
            )
            where = self.secret_file.relative_to(self.root)
            self.say("inventory", f"generated the lab's S3 secret in {where} (mode 0600)")
        # kiln deploy from an installed kiln (docs/lab.md) passes the same lab-only settings the configure step does
        self.say("inventory", f"lab-only settings in {self.lab_vars().relative_to(self.root)}")

    def _secret_complete(self) -> bool:
        """The secret file exists and holds both keys (an interrupted older run could leave it empty)."""
        try:
            env = self.secret_env()
        except (OSError, UnicodeDecodeError):
            return False
        return bool(env.get("KILN_S3_ACCESS_KEY")) and bool(env.get("KILN_S3_SECRET_KEY"))

    def secret_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for line in self.secret_file.read_text().splitlines():
            key, _, value = line.partition("=")
            env[key] = value
        return env

    def lab_vars(self) -> Path:
        """Extra vars only the lab needs: where the pinned binaries are, and that hardware may be absent."""
        tools = self.root / ".tools" / "bin"
        data = {
            "kiln_allow_not_applicable": True,
            "objectstore_weed_src": str(tools / "weed"),
            "bench_tools_warp_src": str(tools / "warp"),
            "monitoring_config_src": str(self.monitoring_dir),
            # The lab refreshes its hosts' apt index once a day, not on every hourly re-run.
            "common_apt_cache_valid_time": 86400,
            "bench_tools_apt_cache_valid_time": 86400,
        }
        data.update(self.datamover_vars())
        data.update(self.kafka_vars())
        if self.fences_containers():
            data["lustre_ha_install_fence_packages"] = False  # fence_kiln_lab is copied in by the hosts step
        path = self.state / "lab-vars.yml"
        _write_if_changed(path, "# Written by kiln lab: lab-only settings.\n" + yaml.safe_dump(data, sort_keys=True))
        return path

    def datamover_vars(self) -> dict[str, object]:
        """The datamover role's operator inputs in the lab: this checkout's stack file and wheelhouse, the pinned
        weed, and a directory on each client host standing in for the Lustre mount (no Lustre kernel here)."""
        if self.plan.dataflow is None:
            return {}
        return {
            "datamover_stack_src": str(stack_path(self.stack, self.stacks_dir).absolute()),
            "datamover_wheelhouse_src": str(self.wheelhouse),
            "datamover_weed_src": str(self.root / ".tools" / "bin" / "weed"),
            "datamover_mount_point": LAB_FAST_TIER,
            "datamover_apt_cache_valid_time": 86400,
        }

    def kafka_vars(self) -> dict[str, object]:
        """The kafka role's operator inputs in the lab: the jars scripts/build-kafka.sh assembled (no release tarball
        is reachable here) and the JMX exporter agent beside them."""
        k = self.plan.kafka
        if k is None or not k.nodes:
            return {}
        home = self.root / ".tools" / f"kafka-{k.version}"
        agent = home / "agent" / f"jmx_prometheus_javaagent-{JMX_EXPORTER_VERSION}.jar"
        return {
            "kafka_install_source": "jars",
            "kafka_jars_src": str(home),
            "kafka_jmx_exporter_jar_src": str(agent),
            "kafka_jmx_exporter_sha256": _sha256(agent) if agent.is_file() else "",
        }

    def configure(self) -> dict[str, int]:
        """ansible/site.yml (the collection's kiln.cluster.site) over SSH, followed as `kiln deploy` follows it."""
        log = self.state / "logs" / f"ansible-{time.strftime('%Y%m%dT%H%M%S')}.log"
        env = ansible_env({
            **os.environ,
            **self.secret_env(),
            "ANSIBLE_CONFIG": str(self.root / "ansible" / "ansible.cfg"),
            "ANSIBLE_SSH_COMMON_ARGS": f"-F {shlex.quote(str(self.ssh_config))}",
            # The base image's interpreter: no discovery round trip per host and run.
            "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
            # Facts cached between runs (gathering = smart reads the cache): a warm re-run gathers none. The roles
            # read only stable facts (OS family, release, virtualization); the hosts step drops the cache when a
            # container is created or started.
            "ANSIBLE_CACHE_PLUGIN": "ansible.builtin.jsonfile",
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(self.facts_dir),
            "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "86400",
        })
        cmd = [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(self.inventory_dir / "hosts.yml"),
            str(self.root / "ansible" / "site.yml"),
            "-e",
            f"@{self.lab_vars()}",
        ]
        self.say("configure", f"ansible-playbook ansible/site.yml (log: {log.relative_to(self.root)})")
        outcome = run_playbook(cmd, env=env, cwd=self.root, log=log, report=lambda line: self.say("configure", line))
        if outcome.returncode != 0:
            hosts = sorted({**outcome.hosts_with("failed"), **outcome.hosts_with("unreachable")})
            first = outcome.failures[0].line() if outcome.failures else "no task failure in the output"
            raise LabError("configure", f"ansible-playbook exited {outcome.returncode} ({first})",
                           host=", ".join(hosts) or None, log=log)
        changed = {h: c.get("changed", 0) for h, c in outcome.recap.items()}
        self.say("configure", "recap: " + ", ".join(f"{h} changed={n}" for h, n in changed.items()))
        return changed

    def verify(self, only: Sequence[str] | None = None, full: bool = False) -> int:
        """kiln verify on the lab; its exit code, or 0 when the sign-off is all a lab can reach (lab_outcome).
        `full`: measure everything (after a converge that changed something, no earlier figure is reused)."""
        out = self.state / "report"
        cmd = [
            sys.executable,
            "-m",
            "kiln.cli",
            "verify",
            self.stack,
            "--inventory",
            str(self.inventory_dir),
            "--out",
            str(out),
            "--backend",
            f"ssh://{{address}}?ssh_config={urllib.parse.quote(str(self.ssh_config))}",
        ]
        for key, value in VERIFY_OPTIONS.items():
            cmd += ["--option", f"{key}={value}"]
        # ha.partner_loss: a server "loses power" when its container is killed (then the partner fences it).
        cmd += ["--option", f"ha.crash_command=podman kill --signal KILL {container_name(self.plan.stack, '{host}')}"]
        if self.stacks_dir is not None:
            cmd += ["--stacks-dir", str(self.stacks_dir)]
        if only:
            cmd += ["--only", *only]
        if full:
            cmd.append("--full")
        self.say("verify", f"kiln verify {self.stack}{' --full' if full else ''} (report in "
                           f"{out.relative_to(self.root)}/)")
        env = {**os.environ, **self.secret_env()}
        proc = subprocess.run(cmd, cwd=self.root, env=env, check=False)
        report = out / "report.md"
        if report.exists():
            print(report.read_text(), file=self.out)  # type: ignore[call-overload]
        return self.judge_outcome(out / "report.json", proc.returncode)

    def sign_off(self) -> str | None:
        """The verdict of the lab's last report (None without one)."""
        try:
            return str(json.loads((self.state / "report" / "report.json").read_text())["summary"]["verdict"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def judge_outcome(self, report: Path, rc: int) -> int:
        """verify's exit code, or 0 where the sign-off is INCOMPLETE only for what a lab cannot measure."""
        try:
            ok, lacking = lab_outcome(json.loads(report.read_text()))
        except (OSError, ValueError):
            return rc
        if rc != 0 and ok:
            self.say("verify", f"sign-off INCOMPLETE, as a lab's must be (kiln verify exited {rc}); not measured here:")
            for line in lacking:
                self.say("verify", f"  {line}")
            return 0
        return rc

    # -- commands ------------------------------------------------------------------------------
    def up(self, skip_prepare: bool = False, only: Sequence[str] | None = None,
           steps: Sequence[str] = STEPS) -> int:
        """The given steps (default: all), in their order; prints and records (timings.json) how long each took.
        A later step uses what an earlier run of the steps before it left (hosts, inventory, SSH files)."""
        self.state.mkdir(parents=True, exist_ok=True)
        times: dict[str, float] = {}
        record: dict[str, object] = {"seconds": times}
        start = last = time.monotonic()
        rc = 0
        for step in (s for s in STEPS if s in steps):
            if step == "prepare":
                self._prepare_step(skip_prepare)
            elif step == "hosts":
                self.hosts()
            elif step == "inventory":
                self.inventory()
            elif step == "configure":
                total = record["changed"] = sum(self.configure().values())
                converged = " (nothing to do: converged)" if not total else ""
                self.say("configure", f"changed={total} in total{converged}")
            else:  # a converge that changed something: measure everything again, else reuse what still holds
                rc = self.verify(only, full=bool(record.get("changed", 0)))
                record["verify_exit"] = rc
                record["sign_off"] = self.sign_off()
            now = time.monotonic()
            times[step], last = round(now - last, 1), now
        times["total"] = round(time.monotonic() - start, 1)
        record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        _write_if_changed(self.state / "timings.json", json.dumps(record, indent=2) + "\n")
        done = ", ".join(f"{k} {v:.0f} s" for k, v in times.items() if k != "total")
        self.say(steps[-1] if steps else "verify",
                 f"done in {_minutes(times['total'])} ({done}); .kiln/{self.plan.stack}/timings.json")
        return rc

    def _prepare_step(self, skip_prepare: bool) -> None:
        if not skip_prepare:
            self.prepare()
        elif not podman.image_exists(IMAGE):
            raise LabError("prepare", f"image {IMAGE} is missing; run without --skip-prepare")
        else:
            self.prepare_datamover()  # kiln's own wheel follows the checkout even when the rest is skipped

    def down(self) -> None:
        names = [c.name for c in podman.containers(self.plan.stack)]
        podman.remove("container", names)
        self.say("down", f"removed {len(names)} containers")
        vols = podman.volumes(self.plan.stack)
        podman.remove("volume", vols)
        nets = podman.networks(self.plan.stack)
        podman.remove("network", nets)
        if podman.stop_api_service(self.state / "podman-api.pid"):
            self.say("down", "stopped the lab's podman API service")
        self.say("down", f"removed {len(vols)} volumes, {len(nets)} networks (state kept in .kiln/{self.plan.stack}/)")

    def status(self) -> dict[str, list[str]]:
        cs = podman.containers(self.plan.stack)
        return {
            "containers": [f"{c.name} {c.state}" for c in cs],
            "networks": podman.networks(self.plan.stack),
            "volumes": podman.volumes(self.plan.stack),
        }


def _minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def _write_if_changed(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `text` to `path` unless it holds it already: into a temporary file beside it, then rename, so a run
    killed halfway leaves the old file or the new one, never a truncated one. Every file the lab keeps uses this."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.read_text() == text:
            return
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
