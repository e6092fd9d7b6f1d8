"""kiln: one declarative spec per environment → plan → Pulumi, Ansible, acceptance suites."""

__version__ = "0.1.0"
