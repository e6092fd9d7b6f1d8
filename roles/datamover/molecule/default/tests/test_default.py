"""Testinfra checks for the datamover role; `host` is the converged container (lake and mover in one).

The test secret never passes through testinfra's output or an assertion: scripts in the container read it
from the deployed env file. The lake is a real SeaweedFS (one `weed server` process, lake.yml), so staging and
model distribution below move real objects through the installed kiln.
"""

from __future__ import annotations

import os
import pathlib
import time

VENV = "/opt/kiln-datamover"
ENV_FILE = "/etc/kiln-datamover/s3.env"
FAST = "/srv/kiln-fast"  # converge.yml's datamover_mount_point
MODELS = "/mnt/local-nvme/models"  # the test stack's dataflow.models[0] target
RECEIVERS = [f"{MODELS}/receiver-{i}" for i in (1, 2, 3)]  # its receivers_per_node: 3 (the lab stack's entry)

# Runs in the container with the venv's boto3 and the deployed credentials.
PUT = """
import hashlib, os, sys, boto3
s3 = boto3.client("s3", endpoint_url="http://datamover-instance:8333", region_name="us-east-1",
                  aws_access_key_id="kiln", aws_secret_access_key=os.environ["KILN_S3_SECRET_KEY"])
body = os.urandom(int(sys.argv[3]))
s3.put_object(Bucket=sys.argv[1], Key=sys.argv[2], Body=body)
print(hashlib.sha256(body).hexdigest())
"""


def _put(host, bucket: str, key: str, size: int) -> str:
    host.run(f"cat > /tmp/put.py <<'KILN_EOF'\n{PUT}\nKILN_EOF")
    cmd = host.run(f"set -a && . {ENV_FILE} && {VENV}/bin/python /tmp/put.py {bucket} {key} {size}")
    assert cmd.rc == 0, cmd.stderr
    return cmd.stdout.strip()


def test_systemd_is_running(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


def test_kiln_is_installed_with_rclone(host):
    assert host.run(f"{VENV}/bin/kiln data --help").rc == 0
    assert host.file(f"{VENV}/bin/rclone").is_file


def test_services_run(host):
    assert host.service("kiln-datamover.service").is_running
    assert host.service("kiln-datamover.service").is_enabled
    assert host.service("kiln-datamover-models@0.service").is_running


def test_scheduled_link_has_a_timer(host):
    out = host.check_output("systemctl show -p TimersCalendar kiln-datamover-stage@eval.timer")
    assert "Mon..Fri *-*-* 03:30:00" in out
    assert host.service("kiln-datamover-stage@eval.timer").is_enabled


def test_credentials_are_root_only(host):
    f = host.file(ENV_FILE)
    assert f.user == "root" and f.mode == 0o600
    # The secret reaches the units through the env file, never their command lines.
    for unit in ("kiln-datamover.service", "kiln-datamover-models@0.service"):
        assert "SECRET" not in host.check_output(f"systemctl show -p ExecStart {unit}")


def test_stage_moves_a_new_object_verified(host):
    digest = _put(host, "datasets", "corpus/shard-0001.bin", 3 * 2**20)
    cmd = host.run("systemctl restart kiln-datamover-stage@corpus.service")
    assert cmd.rc == 0, host.run("journalctl -u kiln-datamover-stage@corpus --no-pager -n 30").stdout
    local = f"{FAST}/datasets/corpus/shard-0001.bin"
    assert host.check_output(f"sha256sum {local}").split()[0] == digest
    # Nothing changed: a second stage moves no byte.
    again = host.run(
        f"set -a && . {ENV_FILE} && {VENV}/bin/kiln data stage /etc/kiln-datamover/Pulumi.molecule.yaml corpus "
        f"--state-dir /var/lib/kiln-datamover --endpoint http://datamover-instance:8333 --mount-point {FAST}"
    )
    assert again.rc == 0, again.stderr
    assert '"bytes_moved": 0' in again.stdout


def test_a_new_model_reaches_every_receiver_unasked(host):
    digest = _put(host, "datasets", "models/tiny.safetensors", 2**20)
    paths = [f"{r}/tiny.safetensors" for r in RECEIVERS]
    for _ in range(60):
        if all(host.file(p).exists for p in paths):
            break
        time.sleep(1)
    for path in paths:
        assert host.file(path).exists, host.run("journalctl -u kiln-datamover-models@0 --no-pager -n 30").stdout
        assert host.check_output(f"sha256sum {path}").split()[0] == digest


def test_status_reports_the_link(host):
    out = host.check_output("%s/bin/kiln data status --state-dir /var/lib/kiln-datamover --json", VENV)
    assert '"corpus"' in out


def test_secret_never_logged():
    eph = pathlib.Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
    secret = (eph / "kiln-s3-secret").read_text().strip()
    log = eph / "ansible.log"
    assert log.exists()
    assert secret not in log.read_text(errors="replace")
