"""Security: what a training-side host can reach on the object-store hosts.

`security.objectstore_exposure` connects from each compute host to every object-store host's storage address:
the S3 gateway must answer; the SeaweedFS master, volume server and filer (HTTP and gRPC ports) must not.
Those servers trust whoever reaches them (the master hands out write tokens over HTTP, the filer and volume
servers serve and store data), so only the object-store hosts themselves may reach them (roles/firewall with
the plan's rules; docs/security.md). A port that answers from a compute host is a mismatch, so the check
fails on a cluster without the firewall. The one planned exception is the filer's gRPC port from the receivers
of a `dataflow.models` entry with `filer_access` (its metadata subscription): planned reachable from them, and
still closed to every other compute host.
"""

from __future__ import annotations

import json

from kiln import knowledge
from kiln.plan.model import AcceptanceTarget
from kiln.verify.checks.check import CheckError, Conformance, Findings, NothingPlanned, Subject, register
from kiln.verify.checks.conformance import master_hosts
from kiln.verify.checks.context import Context
from kiln.verify.checks.remote import quote

CONNECT_TIMEOUT_S = 3.0

# One TCP connect per (address, port), all at once (a dropped port costs the timeout once, not once per port): open,
# refused (RST: reached, nothing listening) or dropped (timeout).
_PROBE_PY = r"""
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
def probe(pair):
    addr, port = pair
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.settimeout(float(sys.argv[2]))
    try:
        s.connect((addr, port)); state = "open"
    except socket.timeout:
        state = "dropped"
    except ConnectionRefusedError:
        state = "refused"
    except OSError as e:
        state = "error " + str(e)
    finally:
        s.close()
    return [addr, port, state]
pairs = json.loads(sys.argv[1])
with ThreadPoolExecutor(max(1, len(pairs))) as pool:
    print(json.dumps(list(pool.map(probe, pairs))))
"""


def _backend_ports(ctx: Context, host: str) -> list[tuple[str, int]]:
    sw = knowledge.load().ports.seaweedfs  # the ports the roles, firewall and manifests use
    ports, grpc = sw.http(), sw.grpc_offset.value
    roles = ["volume", "filer"] + (["master"] if host in master_hosts(ctx) else [])
    return [(f"seaweedfs {r}{' gRPC' if g else ''}", ports[r] + (grpc if g else 0)) for r in roles for g in (0, 1)]


@register
class ObjectstoreExposure(Conformance):
    id = "security.objectstore_exposure"
    tools = ("python3 socket connect",)

    def compare(self, ctx: Context, target: AcceptanceTarget, subject: Subject) -> Findings:
        client = subject.hosts[0]
        store = ctx.plan.objectstore
        if store.backend != "seaweedfs" or not store.hosts:
            raise NothingPlanned("the plan deploys no SeaweedFS (external object store)")
        probes: list[tuple[str, int, str, bool]] = []  # address, port, what, should be reachable
        # The one planned exception: the filer's gRPC port for the model service's subscription, open to the
        # receivers of dataflow.models entries with filer_access only (kiln/render/firewall.py).
        subscriber = client in (ctx.plan.dataflow.filer_subscribers if ctx.plan.dataflow else ())
        filer_grpc = knowledge.load().ports.seaweedfs.filer_grpc
        for h in store.hosts:
            for addr in ctx.inventory.storage_addresses(h)[:1]:
                probes.append((addr, store.s3_port, f"{h} S3 gateway", True))
                probes += [(addr, port, f"{h} {what}", subscriber and port == filer_grpc)
                           for what, port in _backend_ports(ctx, h)]
        if not probes:
            raise CheckError("no storage address of an object-store host in the inventory")
        pairs = json.dumps([[a, p] for a, p, _, _ in probes])
        r = ctx.run(client, f"python3 -c {quote(_PROBE_PY)} {quote(pairs)} {CONNECT_TIMEOUT_S}",
                    30 + CONNECT_TIMEOUT_S * len(probes))
        if not r.ok:
            raise CheckError(f"{client}: the connection probe failed (rc {r.rc}): {(r.stderr or r.stdout)[-300:]}")
        try:
            seen = {(a, int(p)): str(state) for a, p, state in json.loads(r.stdout)}
        except (ValueError, TypeError) as exc:
            raise CheckError(f"{client}: unreadable probe output ({exc}): {r.stdout[-200:]}") from None
        out = Findings(raw={"connect.json": r.stdout})
        for addr, port, what, reachable in probes:
            state = seen.get((addr, port), "not probed")
            if reachable and state != "open":
                out.mismatch(f"{what} {addr}:{port}: planned reachable from {client}, found {state}")
            elif reachable and port == filer_grpc:
                out.info["filer_subscription_open"] = f"{what} {addr}:{port} (planned: dataflow.models filer_access)"
            elif not reachable and state == "open":
                out.mismatch(f"{what} {addr}:{port}: planned closed to {client} (object-store hosts only), "
                             "found open")
        out.info["checked"] = len(probes)
        return out
