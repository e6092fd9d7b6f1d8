"""The kiln policy checks as plain functions: used by the Pulumi policy pack (policy/kiln_policies.py) and by
`kiln render` (kiln/policy/enforce.py), so a wheel without Pulumi enforces the same rules.

Each check takes a resource type token, the resource's inputs (Kubernetes wire names: camelCase) and
the policy's config, and returns violation messages. Per-stack config comes from
`kiln render <stack> --policy-config FILE`; without it the checks fall back to safe defaults.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

Props = Mapping[str, Any]
Check = Callable[[str, Props, Mapping[str, Any]], list[str]]

DEFAULT_PRIVILEGED_NAMESPACES = ("kiln-storage", "kiln-system")
DEFAULT_POOL_LABEL = "kiln.io/pool"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_RAIL_FORMAT = "rdma/rdma_rail{index}"

# Where each workload kind keeps its pod template(s).
_POD_PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "kubernetes:core/v1:Pod": (("spec",),),
    "kubernetes:batch/v1:Job": (("spec", "template", "spec"),),
    "kubernetes:batch/v1:CronJob": (("spec", "jobTemplate", "spec", "template", "spec"),),
    "kubernetes:apps/v1:Deployment": (("spec", "template", "spec"),),
    "kubernetes:apps/v1:StatefulSet": (("spec", "template", "spec"),),
    "kubernetes:apps/v1:DaemonSet": (("spec", "template", "spec"),),
    "kubernetes:apps/v1:ReplicaSet": (("spec", "template", "spec"),),
}
MPIJOB_PREFIX = "kubernetes:kubeflow.org/"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"


def _get(props: Any, path: tuple[str, ...]) -> Any:
    node = props
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def pod_specs(resource_type: str, props: Props) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, pod spec) for every pod template a workload resource carries."""
    for path in _POD_PATHS.get(resource_type, ()):
        spec = _get(props, path)
        if isinstance(spec, Mapping):
            yield ".".join(path), spec
    if resource_type.startswith(MPIJOB_PREFIX) and resource_type.endswith(":MPIJob"):
        replicas = _get(props, ("spec", "mpiReplicaSpecs")) or {}
        for role, rs in replicas.items():
            spec = _get(rs, ("template", "spec"))
            if isinstance(spec, Mapping):
                yield f"spec.mpiReplicaSpecs.{role}.template.spec", spec


def _containers(pod: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for ctr in pod.get(key) or []:
            if isinstance(ctr, Mapping):
                yield ctr


def _namespace(props: Props) -> str:
    return str(_get(props, ("metadata", "namespace")) or "default")


# --------------------------------------------------------------------------------------- privileged pods


def check_privileged(resource_type: str, props: Props, config: Mapping[str, Any]) -> list[str]:
    """Privileged containers only in the storage and system namespaces."""
    allowed = set(config.get("allowedNamespaces") or DEFAULT_PRIVILEGED_NAMESPACES)
    ns = _namespace(props)
    out = []
    for where, pod in pod_specs(resource_type, props):
        for ctr in _containers(pod):
            if _get(ctr, ("securityContext", "privileged")) is True and ns not in allowed:
                out.append(f"container {ctr.get('name')!r} ({where}) is privileged in namespace {ns!r}; "
                           f"privileged pods belong in {', '.join(sorted(allowed))}")
    return out


# ------------------------------------------------------------------------------------ host access, escalation

DEFAULT_ALLOWED_CAPABILITIES = ("IPC_LOCK",)  # RDMA memory registration pins pages (GPU pods)
NAMESPACE = "kubernetes:core/v1:Namespace"
PSA_LABELS = tuple(f"pod-security.kubernetes.io/{mode}" for mode in ("enforce", "audit", "warn"))


def _host_path_namespace(
    ns: str, allowed: Sequence[Mapping[str, Any]], resource_type: str, props: Props
) -> list[str]:
    """A host-path namespace (config hostPathNamespaces: namespace → [{path, readOnly, type}]): its pods mount only
    the listed host paths — read-only where the entry says readOnly, of the entry's hostPath type where it names
    one — and every container drops ALL capabilities, adds none, sets allowPrivilegeEscalation: false and is not
    privileged. Pod Security cannot say this (Baseline forbids every hostPath), so the namespace is labelled
    privileged and this check confines it: kiln-health reads /proc and /sys, the model receivers write their
    planned local-NVMe directory (type Directory: nothing is created on the node)."""
    entries = {str(e.get("path")): e for e in allowed if isinstance(e, Mapping)}
    listed = ", ".join(f"{p} ({'read-only' if e.get('readOnly') else 'type ' + str(e.get('type') or 'any')})"
                       for p, e in sorted(entries.items()))
    out = []
    for where, pod in pod_specs(resource_type, props):
        read_only: dict[Any, str] = {}  # volume name → host path that must be mounted read-only
        for vol in pod.get("volumes") or []:
            if not (isinstance(vol, Mapping) and "hostPath" in vol):
                continue
            path = str(_get(vol, ("hostPath", "path")))
            entry = entries.get(path)
            kind = _get(vol, ("hostPath", "type"))
            if entry is None or (entry.get("type") and kind != entry.get("type")):
                out.append(f"pod ({where}) mounts hostPath {path!r} (type {kind or 'unset'}) in namespace {ns!r}; "
                           f"allowed there: {listed or 'none'}")
            elif entry.get("readOnly"):
                read_only[vol.get("name")] = path
        pod_escalation = _get(pod, ("securityContext", "allowPrivilegeEscalation"))
        for ctr in _containers(pod):
            name = f"container {ctr.get('name')!r} ({where})"
            sc = ctr.get("securityContext") or {}
            for m in ctr.get("volumeMounts") or []:
                if isinstance(m, Mapping) and m.get("name") in read_only and m.get("readOnly") is not True:
                    out.append(f"{name} mounts hostPath {read_only[m.get('name')]!r} writable in namespace "
                               f"{ns!r}; set readOnly: true")
            if sc.get("allowPrivilegeEscalation", pod_escalation) is not False:
                out.append(f"{name} does not set allowPrivilegeEscalation: false in namespace {ns!r}")
            if sc.get("privileged") is True:
                out.append(f"{name} is privileged in namespace {ns!r}; it may only use its listed host paths")
            added = _get(sc, ("capabilities", "add")) or []
            dropped = {str(c).upper() for c in (_get(sc, ("capabilities", "drop")) or [])}
            if added or "ALL" not in dropped:
                out.append(f"{name} must drop ALL capabilities and add none in namespace {ns!r} (adds "
                           f"{', '.join(map(str, added)) or 'none'}, drops {', '.join(sorted(dropped)) or 'none'})")
    return out


def check_pod_security(resource_type: str, props: Props, config: Mapping[str, Any]) -> list[str]:
    """Outside the storage and system namespaces: no hostPath, hostNetwork, hostPID or hostIPC, no privilege
    escalation, no capabilities beyond the allow-list, and no namespace labelled Pod Security 'privileged'. A
    host-path namespace (config hostPathNamespaces) may be labelled privileged, and its pods may mount exactly its
    listed host paths (_host_path_namespace)."""
    allowed = set(config.get("allowedNamespaces") or DEFAULT_PRIVILEGED_NAMESPACES)
    host_path_ns: Mapping[str, Any] = config.get("hostPathNamespaces") or {}
    caps_ok = {str(c).upper() for c in (config.get("allowedCapabilities") or DEFAULT_ALLOWED_CAPABILITIES)}
    where_ok = ", ".join(sorted(allowed))
    if resource_type == NAMESPACE:
        name = str(_get(props, ("metadata", "name")) or "")
        labels = _get(props, ("metadata", "labels")) or {}
        return [f"namespace {name!r} has {key}=privileged; only {where_ok} may"
                for key in PSA_LABELS
                if labels.get(key) == "privileged" and name not in allowed and name not in host_path_ns]
    ns = _namespace(props)
    if ns in allowed:
        return []
    out = []
    if ns in host_path_ns:
        out += _host_path_namespace(ns, host_path_ns[ns] or [], resource_type, props)
    for where, pod in pod_specs(resource_type, props):
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.get(field) is True:
                out.append(f"pod ({where}) sets {field}: true in namespace {ns!r}; host namespaces belong in "
                           f"{where_ok}")
        for vol in pod.get("volumes") or [] if ns not in host_path_ns else []:
            if isinstance(vol, Mapping) and "hostPath" in vol:
                path = _get(vol, ("hostPath", "path"))
                out.append(f"pod ({where}) mounts hostPath {path!r} (volume {vol.get('name')!r}) in namespace "
                           f"{ns!r}; host paths belong in {where_ok}")
        pod_escalation = _get(pod, ("securityContext", "allowPrivilegeEscalation"))
        for ctr in _containers(pod):
            name = f"container {ctr.get('name')!r} ({where})"
            sc = ctr.get("securityContext") or {}
            if sc.get("allowPrivilegeEscalation", pod_escalation) is True:
                out.append(f"{name} sets allowPrivilegeEscalation: true in namespace {ns!r}")
            added = [str(c) for c in (_get(sc, ("capabilities", "add")) or [])]
            extra = sorted({c for c in added if c.upper().removeprefix("CAP_") not in caps_ok})
            if extra:
                out.append(f"{name} adds capabilities {', '.join(extra)} in namespace {ns!r}; allowed: "
                           f"{', '.join(sorted(caps_ok)) or 'none'}")
    return out


# ----------------------------------------------------------------------------------------- GPU pods, rails


def _quantity(value: Any) -> float:
    try:
        return float(str(value))
    except ValueError:
        return 0.0


def _requests(ctr: Mapping[str, Any]) -> dict[str, float]:
    res = ctr.get("resources") or {}
    out: dict[str, float] = {}
    for section in ("requests", "limits"):
        for k, v in (res.get(section) or {}).items():
            out[k] = max(out.get(k, 0.0), _quantity(v))
    return out


def check_gpu_rails(resource_type: str, props: Props, config: Mapping[str, Any]) -> list[str]:
    """Every container that requests GPUs also requests the RDMA resource of each rail of its pool."""
    gpu = str(config.get("gpuResource") or DEFAULT_GPU_RESOURCE)
    label = str(config.get("poolLabel") or DEFAULT_POOL_LABEL)
    fmt = str(config.get("railResourceFormat") or DEFAULT_RAIL_FORMAT)
    rails: Mapping[str, int] | None = config.get("railsPerPool")
    prefix = fmt.split("{", 1)[0].rsplit("/", 1)[0] + "/"
    out = []
    for where, pod in pod_specs(resource_type, props):
        pool = (pod.get("nodeSelector") or {}).get(label)
        for ctr in _containers(pod):
            req = _requests(ctr)
            if req.get(gpu, 0) <= 0:
                continue
            name = f"container {ctr.get('name')!r} ({where})"
            if rails is None:
                if not any(k.startswith(prefix) for k in req):
                    out.append(f"{name} requests {gpu} but no {prefix}* resource (its rails)")
                continue
            if pool is None:
                counts = set(rails.values())
                if len(counts) != 1:
                    out.append(f"{name} requests {gpu} but selects no pool (nodeSelector {label})")
                    continue
                expected = counts.pop()
            elif pool not in rails:
                out.append(f"{name} selects pool {pool!r}, which the stack does not have ({', '.join(rails)})")
                continue
            else:
                expected = int(rails[pool])
            missing = [fmt.format(index=i) for i in range(expected) if req.get(fmt.format(index=i), 0) < 1]
            if missing:
                out.append(f"{name} requests {gpu} on pool {pool!r} without its rails: {', '.join(missing)}")
    return out


# -------------------------------------------------------------------------------------- secrets, ConfigMaps

_SECRET_WORDS = frozenset({"secret", "password", "passwd", "pwd", "token", "key", "credential", "credentials",
                           "apikey", "privatekey", "passphrase"})
_SECRET_VALUE_PATTERNS = (
    ("an AWS access key id", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a secret assignment", re.compile(
        r"""(?im)["']?[\w.-]*(secret|password|passwd|token|access_?key|secret_?key|api_?key)[\w.-]*["']?"""
        r"""\s*[:=]\s*["']?(?![0-9][0-9.]*(?:\s|$|["',}]))[^\s"',}{\[\]]+""")),  # a bare number is a count
)
_S3_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])")


def _words(key: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key)
    return {w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w}


def _looks_like_s3_secret(value: str) -> bool:
    """40 base64 characters with upper, lower and digits: the shape of an S3/AWS secret access key."""
    for m in _S3_SECRET.finditer(value):
        tok = m.group(0)
        if re.search(r"[A-Z]", tok) and re.search(r"[a-z]", tok) and re.search(r"[0-9]", tok):
            return True
    return False


def check_configmap_secrets(resource_type: str, props: Props, config: Mapping[str, Any]) -> list[str]:
    """ConfigMaps hold no secrets: no secret-named keys with values, no values shaped like credentials."""
    if resource_type != CONFIGMAP:
        return []
    name = _get(props, ("metadata", "name"))
    out = []
    for section in ("data", "binaryData"):
        for key, value in (props.get(section) or {}).items():
            text = "" if value is None else str(value)
            words = _words(str(key)) & _SECRET_WORDS
            if words and text.strip():
                out.append(f"ConfigMap {name!r} key {key!r} looks like a secret ({', '.join(sorted(words))}); "
                           "put it in a Secret")
            for what, pattern in _SECRET_VALUE_PATTERNS:
                if pattern.search(text):
                    out.append(f"ConfigMap {name!r} key {key!r} holds what looks like {what}; put it in a Secret")
            if _looks_like_s3_secret(text):
                out.append(f"ConfigMap {name!r} key {key!r} holds what looks like an S3 secret key; "
                           "put it in a Secret")
    return out


# ------------------------------------------------------------------------------------------ policy objects


CHECKS: dict[str, Check] = {
    "kiln-privileged-namespaces": check_privileged,
    "kiln-pod-security": check_pod_security,
    "kiln-gpu-pods-request-rails": check_gpu_rails,
    "kiln-no-secrets-in-configmaps": check_configmap_secrets,
}
