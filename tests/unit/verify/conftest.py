"""Unit tests of kiln.verify. The suite runs with --import-mode=importlib, so this directory (verify_fakes,
the TEST DOUBLE remote) is put on sys.path here."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
