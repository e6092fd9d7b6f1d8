"""Pulumi adapter: the Kubernetes side of an environment as ComponentResources.

The only package that imports pulumi. Every Kubernetes object comes from the builder in
kiln.render.manifests (the same objects `kiln render` writes for GitOps); this package only turns
them into pulumi_kubernetes resources, parented to one ComponentResource per component.
"""

from kiln.infra.components import (
    AcceptanceSuite,
    DataMover,
    GpuNodeStack,
    KilnComponent,
    LustreClient,
    NcclConfig,
    ObjectStore,
)

__all__ = ["AcceptanceSuite", "DataMover", "GpuNodeStack", "KilnComponent", "LustreClient", "NcclConfig", "ObjectStore"]
