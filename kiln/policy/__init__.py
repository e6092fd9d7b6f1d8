"""The policy pack's rules as plain functions (checks) and their enforcement over rendered objects (enforce):
the Pulumi policy pack (policy/kiln_policies.py) and `kiln render` run the same checks."""
