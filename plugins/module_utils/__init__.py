"""kiln's Lustre library (lustre_common, lustre_target, lustre_param, lustre_layout,
lustre_quota), and the supported-OS matching of the roles' pre-flight (os_support).

The same files are the ``kiln.cluster`` collection's module_utils and, through the
``kiln/lustre`` link, the ``kiln.lustre`` package (docs/architecture.md, "Lustre library").
"""
