"""Filters of the lustre_ha role: the pcs commands that build one failover pair's Pacemaker configuration.

``pcs_commands(pair)`` returns one argv (without ``pcs -f <file>``) per command, in the order pcs must run them on
a copy of the CIB whose resources and constraints were emptied (the role then pushes the copy with
``pcs cluster cib-push <copy> diff-against=<original>``, so an unchanged configuration changes nothing). Syntax:
pcs 0.11 ``pcs --help`` (pcs/usage.py): ``resource create``, ``stonith create``, ``constraint location ... prefers |
avoids | rule``, ``constraint order``, ``constraint colocation add``, ``property set``, ``resource defaults update``.

What it encodes:

- fencing: one device per node that may only run on the partner; the device that targets the first node carries
  ``pcmk_delay_base`` (Pacemaker 2.1.5 pacemaker-fenced metadata: "a static delay ... to avoid death matches"),
  so in a split the first node fences first;
- healthLNET (lustre-release lustre/conf/resource/healthLNET): ``ping_update()`` reads the carrier of one
  ``device`` and scores the number of ``host_list`` NIDs answering ``lctl ping`` (``lctl_check()``); so one
  instance per node and storage interface, pinned to its node, sets attribute ``lnet_<interface>``, and each
  target has one rule that bans it from a node where every one of that node's interfaces scores below the
  node's threshold (one clause per node, joined with or);
- an md array (ocf:heartbeat:mdraid: ``mdadm_conf``, ``md_dev``) or a zpool (ocf:heartbeat:ZFS: ``pool``) per
  target, which the target runs with and after;
- MGS, then MDTs, then OSTs (Optional orders: moving one target never stops another).

Where agents live: an agent ``ocf:<provider>:<type>`` is the executable ``/usr/lib/ocf/resource.d/<provider>/<type>``
(the OCF resource agent API, "Installation"; ``ocf:lustre:*`` come with Lustre's lustre-resource-agents,
``ocf:heartbeat:*`` with resource-agents); a fence agent ``stonith:<agent>`` is ``/usr/sbin/<agent>`` (fence-agents
install their executables there; Pacemaker's pacemaker-fenced looks them up in that directory).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

OCF_ROOT = "/usr/lib/ocf/resource.d"
FENCE_ROOT = "/usr/sbin"

# pcs 0.11 refuses an agent whose metadata <version> is not an OCF version it knows (1.0, 1.1) unless forced
# (pcs/lib/resource_agent: "implements unsupported OCF version ... use --force to override"). Lustre's agents put
# their own release there (lustre/conf/resource/Lustre: 1.0.1, healthLNET: 0.99.4), so their resources are
# created with --force; their parameters are the ones those files declare.
_FORCED_PROVIDERS = ("ocf:lustre:",)


def _forced(agent: str) -> list[str]:
    return ["--force"] if agent.startswith(_FORCED_PROVIDERS) else []


def lnet_attribute(device: str) -> str:
    """The node attribute healthLNET sets for a storage interface (its `name` parameter): lnet_<interface>."""
    return "lnet_" + re.sub(r"[^A-Za-z0-9_]", "_", device)


def lnet_rule(node: str, devices: list[str], threshold: int) -> list[str]:
    """Rule words (pcs constraint location ... rule): true on `node` when every interface scores below threshold."""
    words = ["#uname", "eq", node]
    for dev in devices:
        attr = lnet_attribute(dev)
        words += ["and", "(", "not_defined", attr, "or", attr, "lt", "integer", str(threshold), ")"]
    return words


def _fencing(pair: dict[str, Any]) -> list[list[str]]:
    fence = pair["fencing"]
    if fence["agent"] == "none-lab":
        return []
    out = []
    for node in pair["nodes"]:
        argv = ["stonith", "create", f"fence-{node['name']}", fence["agent"], f"pcmk_host_list={node['name']}"]
        if fence.get("address"):
            argv.append("ip=" + fence["address"].replace("{host}", node["name"]))
        if fence.get("username"):
            argv += [f"username={fence['username']}", "password_script=cat /etc/kiln/fence-password"]
        argv += [f"{k}={v}" for k, v in sorted((fence.get("options") or {}).items())]
        if node.get("fence_delay_s"):
            argv.append(f"pcmk_delay_base={node['fence_delay_s']}s")
        argv += ["op", "monitor", "interval=60s"]
        out.append(argv)
        # A node never runs the device that fences it.
        out.append(["constraint", "location", f"fence-{node['name']}", "avoids", node["name"]])
    return out


def _lnet(pair: dict[str, Any]) -> list[list[str]]:
    timing = pair["timing"]
    out = []
    for check in pair["lnet_checks"]:
        partner = next(n["name"] for n in pair["nodes"] if n["name"] != check["node"])
        for dev in check["devices"]:
            rid = f"lnet-{check['node']}-{re.sub(r'[^A-Za-z0-9_-]', '_', dev)}"
            out.append([
                "resource", "create", rid, "ocf:lustre:healthLNET", "lctl=true", "multiplier=1",
                f"dampen={timing['lnet_dampen_s']}s", f"timeout={timing['lnet_ping_timeout_s']}",
                f"device={dev}", f"name={lnet_attribute(dev)}", "host_list=" + " ".join(check["host_list"]),
                "op", "monitor", f"interval={timing['lnet_monitor_s']}s", "timeout=60s", "--force",
            ])
            out.append(["constraint", "location", rid, "prefers", check["node"]])
            out.append(["constraint", "location", rid, "avoids", partner])
    return out


def _storage(r: dict[str, Any], md_conf: str) -> list[list[str]]:
    """The md array or pool under a target: created, colocated with it and started before it."""
    if r.get("md_device"):
        sub, argv = f"{r['name']}-md", ["ocf:heartbeat:mdraid", f"mdadm_conf={md_conf}", f"md_dev={r['md_device']}"]
    elif r.get("zpool"):
        sub, argv = f"{r['name']}-zpool", ["ocf:heartbeat:ZFS", f"pool={r['zpool']}", "importargs=-d /dev/disk/by-id"]
    else:
        return []
    return [
        ["resource", "create", sub, *argv, "op", "start", "timeout=120s", "op", "stop", "timeout=120s",
         "op", "monitor", "interval=30s", "timeout=60s"],
        ["constraint", "colocation", "add", r["name"], "with", sub, "INFINITY", f"id={r['name']}-with-storage"],
        ["constraint", "order", "start", sub, "then", "start", r["name"], "kind=Mandatory",
         f"id={r['name']}-after-storage"],
    ]


def _target(r: dict[str, Any], pair: dict[str, Any]) -> list[list[str]]:
    params = [f"{k}={v}" for k, v in (r.get("params") or {}).items()]
    out = [
        ["resource", "create", r["name"], r["agent"], *params, "op", "start", "timeout=450s", "op", "stop",
         "timeout=300s", "op", "monitor", "interval=20s", "timeout=300s", *_forced(r["agent"])],
        ["constraint", "location", r["name"], "prefers", f"{r['node']}=100"],
    ]
    clauses = [["(", *lnet_rule(c["node"], c["devices"], c["threshold"]), ")"] for c in pair["lnet_checks"]]
    if clauses:
        expr = [word for i, clause in enumerate(clauses) for word in (["or"] if i else []) + clause]
        out.append(["constraint", "location", r["name"], "rule", f"constraint-id={r['name']}-lnet", "score=-INFINITY",
                    *expr])
    return out


def _orders(resources: list[dict[str, Any]]) -> list[list[str]]:
    out = []
    for r in resources:
        for lower in resources:
            if lower["tier"] < r["tier"]:
                out.append(["constraint", "order", "start", lower["name"], "then", "start", r["name"],
                            "kind=Optional", f"id={lower['name']}-before-{r['name']}"])
    return out


def pcs_commands(pair: dict[str, Any]) -> list[list[str]]:
    """Every pcs command (argv after `pcs -f FILE`) of one pair's configuration.

    `pair`: nodes [{name, fence_delay_s}], resources [{name, agent, tier, node, params, md_device, zpool}] (those
    whose agents are installed), lnet_checks [{node, devices, host_list, threshold}] (empty without healthLNET),
    fencing {agent, address, username, options}, timing {lnet_monitor_s, lnet_dampen_s, lnet_ping_timeout_s},
    stickiness, md_conf.
    """
    stonith = "false" if pair["fencing"]["agent"] == "none-lab" else "true"
    out = [
        ["property", "set", f"stonith-enabled={stonith}", "no-quorum-policy=stop"],
        # Stickiness above the preference (100): a target stays where it runs when its own server comes back.
        ["resource", "defaults", "update", f"resource-stickiness={pair['stickiness']}"],
        *_fencing(pair),
        *_lnet(pair),
    ]
    resources = sorted(pair["resources"], key=lambda r: (r["tier"], r["name"]))
    for r in resources:
        storage = _storage(r, pair["md_conf"])
        # the array or pool, then the target, then the constraints that name both
        out += storage[:1] + _target(r, pair)[:1] + storage[1:] + _target(r, pair)[1:]
    return out + _orders(resources)


def usable_resources(resources: list[dict[str, Any]], missing: list[str]) -> list[dict[str, Any]]:
    """The resources whose agent is installed, and whose md array's (ocf:heartbeat:mdraid) or pool's
    (ocf:heartbeat:ZFS) agent too: a target without the resource that brings up its storage cannot start."""
    def usable(r: dict[str, Any]) -> bool:
        needs = {r["agent"]}
        if r.get("md_device"):
            needs.add("ocf:heartbeat:mdraid")
        if r.get("zpool"):
            needs.add("ocf:heartbeat:ZFS")
        return not needs & set(missing)

    return [r for r in resources if usable(r)]


def ocf_agent_path(agent: str) -> str:
    """``ocf:lustre:Lustre`` → ``/usr/lib/ocf/resource.d/lustre/Lustre``; ``stonith:fence_ipmilan`` →
    ``/usr/sbin/fence_ipmilan``.

    The name is split at its first two colons into class, provider and type (as ``IFS=: read -r class
    provider type`` splits it); a name of another class gets a path where no agent is installed, so it is
    reported missing rather than refused here.
    """
    parts = [*str(agent).split(":", 2), "", ""][:3]
    if parts[0] == "stonith":
        return f"{FENCE_ROOT}/{parts[1]}"
    return f"{OCF_ROOT}/{parts[1]}/{parts[2]}"


def ocf_agents_missing(agents: Sequence[str], paths: Mapping[str, Any]) -> list[str]:
    """The agents whose file a host_probe (paths) found missing or not executable, in the order given."""
    missing = []
    for agent in agents:
        answer = paths.get(ocf_agent_path(agent))
        if not isinstance(answer, Mapping):
            raise AnsibleFilterError(f"the probe did not look at {ocf_agent_path(agent)} (agent {agent})")
        if not answer.get("executable"):
            missing.append(agent)
    return missing


class FilterModule:
    """Pacemaker: the pcs commands of a pair and where its agents live."""

    def filters(self) -> dict[str, Any]:
        return {"pcs_commands": pcs_commands, "usable_resources": usable_resources, "lnet_attribute": lnet_attribute,
                "ocf_agent_path": ocf_agent_path, "ocf_agents_missing": ocf_agents_missing}
