"""The cluster spec: models, loading from a Pulumi stack file, validation with clear errors."""

from kiln.spec.errors import SpecError, SpecIssue
from kiln.spec.loader import StackNotFound, load_stack, parse_stack_text, stack_dirs, stack_path, validate
from kiln.spec.models import ClusterSpec

__all__ = [
    "ClusterSpec",
    "SpecError",
    "SpecIssue",
    "StackNotFound",
    "load_stack",
    "parse_stack_text",
    "stack_dirs",
    "stack_path",
    "validate",
]
