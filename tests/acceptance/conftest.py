"""Acceptance suites. The suite runs with --import-mode=importlib, so this directory (podman_hosts) is put on
sys.path here; the testinfra suites' options live in suite_options."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
