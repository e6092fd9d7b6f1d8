"""The kiln policies as Pulumi ResourceValidationPolicy objects. The checks themselves are plain functions in
kiln/policy/checks.py (unit-tested directly, and run by `kiln render` too)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

# The pack runs from a checkout (`pulumi preview --policy-pack policy`): kiln is importable from its root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kiln.policy.checks import (
    CHECKS,
    DEFAULT_ALLOWED_CAPABILITIES,
    DEFAULT_GPU_RESOURCE,
    DEFAULT_POOL_LABEL,
    DEFAULT_PRIVILEGED_NAMESPACES,
    DEFAULT_RAIL_FORMAT,
    Check,
    check_configmap_secrets,
    check_gpu_rails,
    check_pod_security,
    check_privileged,
)


def _validator(check: Check) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in check(args.resource_type, args.props, args.get_config()):
            report_violation(message, None)

    return validate


POLICIES: tuple[ResourceValidationPolicy, ...] = (
    ResourceValidationPolicy(
        name="kiln-privileged-namespaces",
        description="Privileged containers run only in the storage and system namespaces.",
        validate=_validator(check_privileged),
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PolicyConfigSchema(properties={
            "allowedNamespaces": {"type": "array", "items": {"type": "string"},
                                  "default": list(DEFAULT_PRIVILEGED_NAMESPACES)}}),
    ),
    ResourceValidationPolicy(
        name="kiln-pod-security",
        description="Outside the storage and system namespaces: no host paths or host namespaces, no privilege "
                    "escalation, no capabilities beyond the allow-list, no privileged Pod Security labels; a "
                    "host-path namespace (kiln-health's, the model receivers') mounts only its listed host paths, "
                    "as listed (read-only, hostPath type), with no capabilities and no escalation.",
        validate=_validator(check_pod_security),
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PolicyConfigSchema(properties={
            "allowedNamespaces": {"type": "array", "items": {"type": "string"},
                                  "default": list(DEFAULT_PRIVILEGED_NAMESPACES)},
            "allowedCapabilities": {"type": "array", "items": {"type": "string"},
                                    "default": list(DEFAULT_ALLOWED_CAPABILITIES)},
            "hostPathNamespaces": {"type": "object", "default": {}, "additionalProperties": {
                "type": "array", "items": {"type": "object", "required": ["path"], "properties": {
                    "path": {"type": "string"}, "readOnly": {"type": "boolean"}, "type": {"type": "string"}}}}}}),
    ),
    ResourceValidationPolicy(
        name="kiln-gpu-pods-request-rails",
        description="Every GPU pod requests the RDMA resource of each compute rail of its pool.",
        validate=_validator(check_gpu_rails),
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PolicyConfigSchema(properties={
            "poolLabel": {"type": "string", "default": DEFAULT_POOL_LABEL},
            "gpuResource": {"type": "string", "default": DEFAULT_GPU_RESOURCE},
            "railResourceFormat": {"type": "string", "default": DEFAULT_RAIL_FORMAT},
            "railsPerPool": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
        }),
    ),
    ResourceValidationPolicy(
        name="kiln-no-secrets-in-configmaps",
        description="ConfigMaps carry no secrets (secret-named keys, credential-shaped values).",
        validate=_validator(check_configmap_secrets),
        enforcement_level=EnforcementLevel.MANDATORY,
    ),
)


__all__ = [
    "CHECKS", "POLICIES", "check_configmap_secrets", "check_gpu_rails", "check_pod_security", "check_privileged",
]
