"""The kiln.cluster filter plugins (plugins/filter/*.py), imported as Ansible imports them."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from kiln_ansible_support import COLLECTIONS


def filter_plugin(name: str) -> ModuleType:
    """plugins/filter/NAME.py as ``ansible_collections.kiln.cluster.plugins.filter.NAME``."""
    if str(COLLECTIONS) not in sys.path:
        sys.path.append(str(COLLECTIONS))
    return importlib.import_module(f"ansible_collections.kiln.cluster.plugins.filter.{name}")
