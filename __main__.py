"""Pulumi entry point (Pulumi.yaml: runtime python): stack config → spec → plan → kiln.infra components."""

from kiln.infra.program import main

if __name__ == "__main__":
    main()
