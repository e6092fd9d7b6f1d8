"""LustreClient: the HPE Lustre CSI driver (its upstream chart) and static PVs/PVCs for the filesystem.

The chart brings the CSIDriver and the node DaemonSet; static provisioning means the builder writes one
PersistentVolume + PersistentVolumeClaim for the filesystem root and one for each planned directory.
"""

from __future__ import annotations

from kiln.knowledge.kubernetes import kubernetes
from kiln.plan.model import Layout, Plan
from kiln.render.manifests.context import (
    LUSTRE_CLIENT,
    ComponentKind,
    Ctx,
    Obj,
    client_mount_options,
    mgs_spec,
    obj,
    quantity_GB,
)
from kiln.render.manifests.helm import helm_release, helm_source
from kiln.spec.types import dns_name


def lustre_csi_values() -> Obj:
    """Chart values (charts/lustre-csi-driver/values.yaml): the driver image at the pinned release."""
    k = kubernetes()
    git = k.charts["lustre_csi"].git_repository
    assert git is not None
    tag = k.git_repositories[git].tag.removeprefix("v")
    return {"deployment": {"image": k.lustre_csi.image.value, "tag": tag}}


def lustre_volume_name(plan: Plan, layout: Layout | None) -> str:
    slug = "root" if layout is None else dns_name(layout.path)
    return f"lustre-{dns_name(plan.fsname)}-{slug}"


def lustre_claim_name(layout: Layout | None) -> str:
    return "lustre-root" if layout is None else f"lustre-{dns_name(layout.path)}"


def _lustre_volume(c: Ctx, layout: Layout | None, capacity: str, options: list[str],
                   namespace: str | None = None, component: ComponentKind = LUSTRE_CLIENT) -> list[Obj]:
    """A static PV and its claim; the claim in `namespace` (default the training namespace, whose PV keeps the
    plain name; another namespace's PV gets the namespace appended, as a PV binds one claim)."""
    ns = c.training if namespace is None else namespace
    path = "" if layout is None else layout.path.rstrip("/")
    handle = f"{mgs_spec(c.plan)}:/{c.plan.fsname}{path}"
    pv_name = lustre_volume_name(c.plan, layout) + ("" if ns == c.training else f"-{ns}")
    pvc_name = lustre_claim_name(layout)
    purpose = "filesystem" if layout is None else layout.purpose
    annotations = {"kiln.io/lustre-path": path or "/", "kiln.io/mount-path": layout.mount_path if layout else
                   c.plan.mount_point}
    if layout is not None:
        annotations["kiln.io/layout"] = layout.setstripe
    labels = {"kiln.io/purpose": purpose}
    pv_spec = {
        "capacity": {"storage": capacity},
        "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "volumeMode": "Filesystem",
        "mountOptions": list(options),
        "claimRef": {"kind": "PersistentVolumeClaim", "namespace": ns, "name": pvc_name},
        "csi": {"driver": kubernetes().lustre_csi.driver.value, "volumeHandle": handle, "fsType": "lustre",
                "volumeAttributes": {"mgsNids": mgs_spec(c.plan), "fsName": c.plan.fsname, "fileset": path or "/"}},
    }
    pvc_spec = {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv_name,
                "resources": {"requests": {"storage": capacity}}}
    return [
        obj("v1", "PersistentVolume", c.meta(component, pv_name, labels=labels, annotations=annotations),
            spec=pv_spec),
        obj("v1", "PersistentVolumeClaim", c.meta(component, pvc_name, ns, labels=labels), spec=pvc_spec),
    ]


def lustre_root_volume(c: Ctx, namespace: str, component: ComponentKind) -> list[Obj]:
    """The filesystem root's PV and claim `lustre-root` in another namespace (the model distribution's)."""
    return _lustre_volume(c=c, layout=None, capacity=quantity_GB(c.plan.lustre.ost_usable_capacity_TB),
                          options=client_mount_options(c.plan), namespace=namespace, component=component)


def lustre_client(c: Ctx) -> list[Obj]:
    capacity = quantity_GB(c.plan.lustre.ost_usable_capacity_TB)
    options = client_mount_options(c.plan)
    objs = [helm_source(c, LUSTRE_CLIENT, "lustre_csi"),
            helm_release(c, LUSTRE_CLIENT, "lustre_csi", lustre_csi_values(), namespace=c.storage)]
    for layout in (None, *c.plan.layouts):
        objs.extend(_lustre_volume(c, layout, capacity, options))
    return objs
