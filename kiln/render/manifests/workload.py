"""What every pod kiln renders carries: resources from kiln/knowledge/kubernetes.yaml `workloads`, the restricted
container security context, the runtime's default seccomp profile, and a TTL on finished Jobs (docs/security.md,
"Kubernetes workloads")."""

from __future__ import annotations

from typing import Any

from kiln.knowledge.kubernetes import Resources

Obj = dict[str, Any]

# No privilege escalation and no capability: what a container of kiln's (or a tool's) needs beyond a plain process.
RESTRICTED: Obj = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
POD_SECURITY: Obj = {"seccompProfile": {"type": "RuntimeDefault"}}
# The pod fields of a pod that never calls the Kubernetes API: no service-account token is mounted into it.
NO_API: Obj = {"automountServiceAccountToken": False}
NOBODY = 65534  # the unprivileged user and group every distribution reserves
TMP_SIZE = "1Gi"  # the scratch /tmp of a tool that runs unprivileged (warp's result file, the AWS CLI's HOME)


def resources(r: Resources) -> Obj:
    return {"requests": dict(r.requests), "limits": dict(r.limits)}


def restricted(container: Obj, r: Resources) -> Obj:
    """`container` with its requests and limits and the restricted security context."""
    return {**container, "resources": resources(r), "securityContext": dict(RESTRICTED)}


def unprivileged(container: Obj, r: Resources) -> tuple[Obj, Obj]:
    """A tool that needs neither root nor its image's filesystem: `restricted`, as nobody (65534), a read-only root
    filesystem, and /tmp (its working directory and HOME) on a small emptyDir. Returns the container and that
    volume, which the pod must list."""
    container = restricted(container, r)
    container["securityContext"].update(runAsNonRoot=True, runAsUser=NOBODY, runAsGroup=NOBODY,
                                        readOnlyRootFilesystem=True)
    container["workingDir"] = "/tmp"
    container["env"] = [*container.get("env", []), {"name": "HOME", "value": "/tmp"}]
    container["volumeMounts"] = [*container.get("volumeMounts", []), {"name": "tmp", "mountPath": "/tmp"}]
    return container, {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}}


def finished_after(spec: Obj, ttl_s: int) -> Obj:
    """A Job spec that the TTL controller removes `ttl_s` seconds after it finished (its pods and their logs too)."""
    return {"ttlSecondsAfterFinished": ttl_s, **spec}
