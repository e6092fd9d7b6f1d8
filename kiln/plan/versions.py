"""The versions the nodes run, checked against the compatibility matrix (kiln/knowledge/compat.yaml).

A combination the matrix does not name is refused: Lustre clients and servers that do not interoperate, a CUDA
toolkit newer than the driver branch runs, an NCCL release without a build for the CUDA version, a DOCA-Host
release without drivers for the kernel series, a SeaweedFS release kiln has no build of or
refuses for a known defect.
"""

from __future__ import annotations

from collections.abc import Mapping

from kiln.knowledge import compat
from kiln.plan.model import LustreRelease, VersionsPlan
from kiln.spec.errors import SpecIssue
from kiln.spec.models import ClusterSpec

FIX_SOURCE = "kiln/knowledge/compat.yaml lists the supported combinations with their sources"


def build_versions(spec: ClusterSpec) -> tuple[VersionsPlan, list[SpecIssue]]:
    """The pinned versions and the combinations the matrix refuses."""
    v = spec.versions
    server, client = spec.lustre.version, v.lustre_client or spec.lustre.version
    releases = compat.load().lustre_releases  # every line the spec accepts has one (compat.CompatFile)
    plan = VersionsPlan(
        lustre_server=server, lustre_client=client,
        lustre_server_release=LustreRelease(release=releases[server].release, el=dict(releases[server].server_el),
                                            ubuntu={}),
        lustre_client_release=LustreRelease(release=releases[client].release, el=dict(releases[client].client_el),
                                            ubuntu=dict(releases[client].client_ubuntu)),
        gpu_driver=v.gpu_driver, gpu_kernel_modules=v.gpu_kernel_modules, cuda=v.cuda, nccl=v.nccl, doca=v.doca,
        kernel=v.kernel, seaweedfs=v.seaweedfs,
        doca_release=doca.release if (doca := compat.load().doca_kernel.get(v.doca)) else "",
    )
    doca_issues = _doca(plan) if spec.fabric.rdma_stack == "doca" else []
    weed_issues = _seaweedfs(v.seaweedfs) if spec.objectstore.backend == "seaweedfs" else []
    return plan, [*_lustre(plan), *_cuda(plan), *_nccl(plan), *doca_issues, *weed_issues]


def _seaweedfs(release: str) -> list[SpecIssue]:
    """A SeaweedFS release the matrix does not list, or lists as refused for a defect."""
    weed = compat.load().seaweedfs_releases
    supported = {r: e for r, e in weed.items() if not e.refused}
    if release not in weed:
        return _not_in_matrix("versions.seaweedfs", release, supported)
    if release in supported:
        return []
    return [SpecIssue("versions.seaweedfs", release, f"is refused: {weed[release].refused}",
                      f"pin one of {', '.join(supported)}; {FIX_SOURCE}")]


def _not_in_matrix(path: str, value: str, table: Mapping[str, object]) -> list[SpecIssue]:
    """A pinned version the matrix does not list: refused, with the versions it does."""
    return [SpecIssue(path, value, "is not in the compatibility matrix",
                      f"pin one of {', '.join(table)}; {FIX_SOURCE}")]


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _lustre(v: VersionsPlan) -> list[SpecIssue]:
    entry = compat.load().lustre_interop.get(v.lustre_client)
    if entry is not None and v.lustre_server in entry.servers:
        return []
    servers = ", ".join(entry.servers) if entry else "none known"
    return [SpecIssue("versions.lustre_client", v.lustre_client,
                      f"Lustre {v.lustre_client} clients are not supported with {v.lustre_server} servers "
                      f"(servers they may mount: {servers})",
                      f"pin a client line that interoperates with lustre.version {v.lustre_server}; {FIX_SOURCE}")]


def _cuda(v: VersionsPlan) -> list[SpecIssue]:
    table = compat.load().cuda_driver
    entry = table.get(v.cuda)
    if entry is None:
        return _not_in_matrix("versions.cuda", v.cuda, table)
    if v.gpu_driver >= entry.min_driver:
        return []
    return [SpecIssue("versions.gpu_driver", v.gpu_driver,
                      f"driver branch {v.gpu_driver} is older than CUDA {v.cuda} needs ({entry.reason}; "
                      f"{entry.source})",
                      f"pin versions.gpu_driver {entry.min_driver} or newer, or an older versions.cuda")]


def _nccl(v: VersionsPlan) -> list[SpecIssue]:
    table = compat.load().nccl_cuda
    entry = table.get(v.nccl)
    if entry is None:
        return _not_in_matrix("versions.nccl", v.nccl, table)
    cuda = _minor(v.cuda)
    if any(_minor(b)[0] == cuda[0] and _minor(b) <= cuda for b in entry.cuda_builds):
        return []
    return [SpecIssue("versions.nccl", v.nccl,
                      f"has no build for CUDA {v.cuda} (builds: {', '.join(entry.cuda_builds)}; {entry.source})",
                      f"pin a CUDA version of the same major at or after a build, or another NCCL; {FIX_SOURCE}")]


def _doca(v: VersionsPlan) -> list[SpecIssue]:
    table = compat.load().doca_kernel
    entry = table.get(v.doca)
    if entry is None:
        return _not_in_matrix("versions.doca", v.doca, table)
    if v.kernel in entry.kernels:
        return []
    return [SpecIssue("versions.kernel", v.kernel,
                      f"DOCA-Host {v.doca} has no driver build for kernel {v.kernel} (kernels: "
                      f"{', '.join(entry.kernels)}; {entry.source})",
                      f"run a supported kernel series or pin a DOCA-Host release that supports {v.kernel}")]
