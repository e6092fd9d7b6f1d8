"""Plan → artifacts: inventory and group_vars, Kubernetes manifests, the plan report. Pure; callers write."""
