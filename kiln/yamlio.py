"""YAML reading with libyaml when the machine has it (10× faster on large specs), else pure Python."""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Bounds for YAML written by people (stack files): the tree once aliases are expanded, and its depth.
MAX_NODES = 200_000
MAX_DEPTH = 64


class LimitError(yaml.YAMLError):
    """A document over the bounds of load_bounded (too deep, too large once aliases are expanded, cyclic)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = None


class _StrictLoader(_Loader):  # type: ignore[misc]
    """Safe loader that refuses a key repeated in one mapping (plain PyYAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                fresh = key not in seen
                seen.add(key)
            except TypeError:
                continue  # an unhashable key; the constructor below reports it
            if not fresh:
                raise ConstructorError(
                    "while reading a mapping", node.start_mark, f"duplicate key {str(key)[:60]!r}", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


UNSAFE_TAG = "!unsafe"


class UnsafeDumper(yaml.SafeDumper):
    """Writes every string as `!unsafe '...'`: Ansible then uses it as the literal it is and never evaluates a
    template in it (a spec value such as /x{{ lookup('pipe', ...) }} stays text on the controller)."""


_STR_TAG = "tag:yaml.org,2002:str"


def _unsafe_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # NOTE: ansible-core 2.19 resolves an `!unsafe` scalar's type from its text, quotes or not: `!unsafe '3.39'`
    # arrives as a float. A string that plain YAML would read as a number, bool or null holds no template
    # delimiter, so it is written as a quoted plain string and stays a string.
    if dumper.resolve(yaml.ScalarNode, value, (True, False)) != _STR_TAG:  # type: ignore[no-untyped-call]
        return dumper.represent_scalar(_STR_TAG, value, style="'")
    return dumper.represent_scalar(UNSAFE_TAG, value, style="'")


UnsafeDumper.add_representer(str, _unsafe_str)


class _InventoryLoader(yaml.SafeLoader):
    """Safe loader that reads Ansible's `!unsafe` strings back as plain strings (kiln's own inventories)."""


def _unsafe_scalar(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise ConstructorError(None, None, "!unsafe tags a string", node.start_mark)
    return str(loader.construct_scalar(node))


_InventoryLoader.add_constructor(UNSAFE_TAG, _unsafe_scalar)


def load_inventory(text: str) -> Any:
    """Parse an inventory file kiln wrote (strings tagged `!unsafe`)."""
    return yaml.load(text, Loader=_InventoryLoader)


def load(text: str) -> Any:
    """Parse YAML safely (no arbitrary objects)."""
    return yaml.load(text, Loader=_Loader)


def load_bounded(text: str) -> Any:
    """Parse YAML someone wrote by hand: duplicate keys, cycles, deep nesting and alias bombs are refused.

    Raises yaml.YAMLError (LimitError for the bounds); callers also catch ValueError (integers longer than
    Python's digit limit) and RecursionError.
    """
    doc = yaml.load(text, Loader=_StrictLoader)
    _bound(doc)
    return doc


def _bound(doc: Any) -> None:
    """Expanded size and depth of a loaded tree, each shared node counted once per use (linear in the YAML)."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: Any, depth: int) -> int:
        if not isinstance(node, dict | list):
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise LimitError("the document refers to itself through an alias (a cycle)")
        if depth > MAX_DEPTH:
            raise LimitError(f"nested deeper than {MAX_DEPTH} levels")
        open_.add(key)
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_NODES:
                raise LimitError(f"more than {MAX_NODES} values once aliases are expanded (an alias bomb?)")
        open_.discard(key)
        sizes[key] = total
        return total

    size(doc, 0)
