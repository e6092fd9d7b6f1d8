"""Test double of Slurm's sinfo and scontrol for one lab node: the lab has no slurmctld. On the node,
/usr/local/bin/sinfo and /usr/local/bin/scontrol run `python3 slurm.py <name> <arguments>`.

It keeps the node's state the way the Slurm documentation describes it (slurm.schedmd.com scontrol.html,
"State=DRAIN ... RESUME"; sinfo.html, node state codes, "%E" the reason, "%T" the state, extended form): `scontrol
update nodename=N state=drain reason=R` makes a node with a running job DRAINING and an idle one DRAINED; a
DRAINING node becomes DRAINED once its job ends (here: after the number of `sinfo %T` reads the test set in
"job_reads"); `state=resume` makes it IDLE and clears the reason, which sinfo prints as "none". Every call is
appended to the log with the time, so the lab test can read the order of a rolling upgrade across nodes.
"""

import json
import sys
import time
from pathlib import Path
from typing import Any

STATE = Path("/var/lib/kiln-slurm-double/state.json")
LOG = STATE.with_name("calls.log")


def load() -> dict[str, Any]:
    try:
        return dict(json.loads(STATE.read_text()))
    except (OSError, ValueError):
        return {"state": "idle", "reason": "", "job_reads": 0}


def sinfo(args: list[str], node: dict[str, Any]) -> str:
    fmt = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-o", "--format")), "%T")
    if fmt == "%T" and node["state"] == "draining":
        node["job_reads"] -= 1
        if node["job_reads"] <= 0:
            node["state"] = "drained"
    return str(node["reason"] or "none") if fmt == "%E" else str(node["state"])


def scontrol(args: list[str], node: dict[str, Any]) -> str:
    fields = {k.lower(): v for k, v in (a.split("=", 1) for a in args if "=" in a)}
    if args[:1] != ["update"] or "state" not in fields:
        raise SystemExit(f"scontrol double: only `update nodename=N state=drain|resume [reason=R]`: {args}")
    if fields["state"].lower() == "drain":
        node["state"] = "draining" if node["job_reads"] > 0 else "drained"
        node["reason"] = fields.get("reason", "")
    elif fields["state"].lower() == "resume":
        node.update(state="idle", reason="")
    return ""


def main() -> None:
    name, args = sys.argv[1], sys.argv[2:]
    STATE.parent.mkdir(parents=True, exist_ok=True)
    node = load()
    out = sinfo(args, node) if name == "sinfo" else scontrol(args, node)
    STATE.write_text(json.dumps(node))
    with LOG.open("a") as log:
        log.write(json.dumps({"at": time.time(), "call": [name, *args], "state": node["state"]}) + "\n")
    if out:
        print(out)


if __name__ == "__main__":
    main()
