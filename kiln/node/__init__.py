"""Programs kiln installs on the nodes themselves (standard library only: they run on hosts without kiln's
dependencies): the node health check and the Lustre exporter."""
