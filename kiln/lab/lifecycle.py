"""The local lab: a stack's hosts as podman systemd containers, configured by the real playbooks,
verified by the real acceptance suite. `kiln lab up|down|status`; `make lab` runs `up`.

State lives in `.kiln/<stack>/` (git-ignored): the generated inventory, the lab's S3 secret (mode
0600, never printed), logs and reports. Every step is idempotent, so a killed run is recovered by
running `kiln lab up` again.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kiln.lab import podman
from kiln.plan import build_plan
from kiln.plan.model import Plan
from kiln.render.inventory import container_name, render_inventory
from kiln.spec import ClusterSpec, load_stack

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/kiln-node:bookworm"
STEPS = ("prepare", "hosts", "inventory", "configure", "verify")


class LabError(RuntimeError):
    """A lab step failed: names the step, the host (if any) and the log to read."""

    def __init__(self, step: str, message: str, host: str | None = None, log: Path | None = None) -> None:
        where = f" on {host}" if host else ""
        see = f"\n  log: {log}" if log else ""
        super().__init__(f"lab step '{step}' failed{where}: {message}{see}")
        self.step, self.host, self.log = step, host, log


@dataclass
class Lab:
    stack: str
    spec: ClusterSpec
    plan: Plan
    state: Path
    out: object = field(default=sys.stdout)

    @classmethod
    def load(cls, stack: str) -> Lab:
        spec = load_stack(stack)
        if spec.inventory.connection != "podman":
            raise LabError(
                "load", f"stack {stack} has inventory.connection {spec.inventory.connection!r}; the lab needs podman"
            )
        return cls(stack, spec, build_plan(spec, stack), ROOT / ".kiln" / spec.name)

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

    def net_names(self) -> tuple[str, str]:
        return f"kiln-{self.spec.name}-mgmt", f"kiln-{self.spec.name}-storage"

    def _script(self, step: str, *args: str) -> None:
        log = self.state / "logs" / f"{step}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as fh:
            proc = subprocess.run(
                [str(ROOT / "scripts" / args[0]), *args[1:]], stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, check=False
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

    def hosts(self) -> None:
        mgmt, storage = self.net_names()
        for name, subnet in ((mgmt, self.spec.networks.management), (storage, self.spec.networks.storage)):
            made = podman.ensure_network(name, subnet, self.spec.name)
            self.say("hosts", f"network {name} {subnet}: {'created' if made else 'exists'}")
        for h in self.plan.hosts:
            storage_ips = [n.address for n in h.nics if n.role == "storage" and n.address]
            nets = [(mgmt, h.management_address)] + [(storage, ip) for ip in storage_ips[:1]]
            vols: list[tuple[str, str]] = []
            pool = next((p for p in self.spec.compute.pools if p.name == h.pool), None)
            if pool is not None and pool.local_nvme is not None and pool.local_nvme.count:
                vol = f"kiln-{self.spec.name}-{h.name}-nvme"
                podman.ensure_volume(vol, self.spec.name)
                vols.append((vol, pool.local_nvme.mount_point))
            spec = podman.HostSpec(
                container=container_name(self.spec.name, h.name),
                hostname=h.name,
                image=IMAGE,
                networks=tuple(nets),
                volumes=tuple(vols),
                labels={podman.LABEL: self.spec.name, "io.kiln.role": h.role},
                hosts=tuple((o.name, o.management_address) for o in self.plan.hosts if o.name != h.name),
            )
            try:
                done = podman.ensure_container(spec)
                state = podman.wait_for_systemd(spec.container)
            except podman.PodmanError as exc:
                raise LabError("hosts", str(exc), host=h.name) from None
            self.say("hosts", f"{h.name} ({h.role}) {h.management_address}: {done}, systemd {state}")

    def inventory(self) -> None:
        files = render_inventory(self.plan, self.spec)
        for rel, text in files.items():
            path = self.inventory_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
        self.say(
            "inventory", f"{len(files)} files in {self.inventory_dir.relative_to(ROOT)} (kiln inventory {self.stack})"
        )
        if not self.secret_file.exists():
            self.secret_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(f"KILN_S3_ACCESS_KEY={self.plan.objectstore.access_key_id}\n")
                fh.write(f"KILN_S3_SECRET_KEY={secrets.token_urlsafe(30)}\n")
            self.say("inventory", f"generated the lab's S3 secret in {self.secret_file.relative_to(ROOT)} (mode 0600)")

    def secret_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for line in self.secret_file.read_text().splitlines():
            key, _, value = line.partition("=")
            env[key] = value
        return env

    def lab_vars(self) -> Path:
        """Extra vars only the lab needs: where the pinned binaries are, and that hardware may be absent."""
        tools = ROOT / ".tools" / "bin"
        data = {
            "kiln_allow_not_applicable": True,
            "objectstore_weed_src": str(tools / "weed"),
            "bench_tools_warp_src": str(tools / "warp"),
        }
        path = self.state / "lab-vars.yml"
        text = "# Written by kiln lab: lab-only settings.\n" + yaml.safe_dump(data, sort_keys=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        return path

    def configure(self) -> dict[str, int]:
        log = self.state / "logs" / f"ansible-{time.strftime('%Y%m%dT%H%M%S')}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            **self.secret_env(),
            "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg"),
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1",
            "PYTHONUNBUFFERED": "1",
        }
        cmd = [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(self.inventory_dir / "hosts.yml"),
            str(ROOT / "ansible" / "site.yml"),
            "-e",
            f"@{self.lab_vars()}",
        ]
        self.say("configure", f"ansible-playbook ansible/site.yml (log: {log.relative_to(ROOT)})")
        task = ""
        with log.open("w") as fh:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
            assert proc.stdout is not None
            for line in proc.stdout:
                fh.write(line)
                if line.startswith(("PLAY [", "TASK [")):
                    task = line.strip(" *\n")
                    if line.startswith("PLAY ["):
                        self.say("configure", task)
                elif "not applicable" in line.lower():
                    self.say("configure", f"  {line.strip()}")
            rc = proc.wait()
        recap = parse_recap(log.read_text())
        if rc != 0:
            failed = [h for h, c in recap.items() if c.get("failed") or c.get("unreachable")]
            raise LabError(
                "configure",
                f"ansible-playbook exited {rc} (last task: {task})",
                host=", ".join(failed) or None,
                log=log,
            )
        changed = {h: c.get("changed", 0) for h, c in recap.items()}
        self.say("configure", "recap: " + ", ".join(f"{h} changed={n}" for h, n in changed.items()))
        return changed

    def verify(self) -> int:
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
        ]
        self.say("verify", f"kiln verify {self.stack} (report in {out.relative_to(ROOT)}/)")
        env = {**os.environ, **self.secret_env()}
        proc = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
        report = out / "report.md"
        if report.exists():
            print(report.read_text(), file=self.out)  # type: ignore[call-overload]
        return proc.returncode

    # -- commands ------------------------------------------------------------------------------
    def up(self, skip_prepare: bool = False) -> int:
        self.state.mkdir(parents=True, exist_ok=True)
        if not skip_prepare:
            self.prepare()
        elif not podman.image_exists(IMAGE):
            raise LabError("prepare", f"image {IMAGE} is missing; run without --skip-prepare")
        self.hosts()
        self.inventory()
        changed = self.configure()
        total = sum(changed.values())
        self.say("configure", f"changed={total} in total" + (" (nothing to do: converged)" if total == 0 else ""))
        return self.verify()

    def down(self) -> None:
        names = [c.name for c in podman.containers(self.spec.name)]
        podman.remove("container", names)
        self.say("down", f"removed {len(names)} containers")
        vols = podman.volumes(self.spec.name)
        podman.remove("volume", vols)
        nets = podman.networks(self.spec.name)
        podman.remove("network", nets)
        self.say("down", f"removed {len(vols)} volumes, {len(nets)} networks (state kept in .kiln/{self.spec.name}/)")

    def status(self) -> dict[str, list[str]]:
        cs = podman.containers(self.spec.name)
        return {
            "containers": [f"{c.name} {c.state}" for c in cs],
            "networks": podman.networks(self.spec.name),
            "volumes": podman.volumes(self.spec.name),
        }


_RECAP = re.compile(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$")


def parse_recap(text: str) -> dict[str, dict[str, int]]:
    """The PLAY RECAP of an ansible-playbook log: host → {ok, changed, failed, ...}."""
    out: dict[str, dict[str, int]] = {}
    in_recap = False
    for line in text.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap, out = True, {}
            continue
        m = _RECAP.match(line.strip()) if in_recap else None
        if m:
            out[m.group(1)] = {k: int(v) for k, v in (kv.split("=") for kv in m.group(2).split())}
    return out
