"""Prometheus exporters kiln installs where no maintained one exists."""
