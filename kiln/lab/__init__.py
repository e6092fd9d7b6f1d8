"""The local lab: the `lab` stack's hosts as podman systemd containers (docs/lab.md)."""
