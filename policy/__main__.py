"""Pulumi policy pack entry point: serves the kiln policies to the Pulumi CLI (the policies are in kiln_policies)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kiln_policies import POLICIES
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(name="kiln", enforcement_level=EnforcementLevel.MANDATORY, policies=list(POLICIES))
