"""kiln/knowledge/compat.yaml as a typed model: which pinned versions may run together.

Lustre client/server interoperability, the Whamcloud point release each Lustre line installs, CUDA toolkit ->
driver branch, NCCL -> CUDA builds, DOCA-Host -> kernel series and the SeaweedFS releases with their builds, each
entry with its reason and source. The planner refuses a combination this data does not name
(kiln/plan/versions.py) and carries the Lustre releases to the inventory; `kiln diff` refuses a SeaweedFS release of
another build (kiln/plan/changes.py); docs/stack-reference.md documents the `versions` fields that pick them.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kiln import yamlio


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str = Field(min_length=1)
    source: str = Field(min_length=1)


class LustreInterop(_Entry):
    servers: tuple[str, ...] = Field(min_length=1)


class LustreRelease(_Entry):
    """A Lustre line's Whamcloud point release and, per EL major version, the EL minor of its directories."""

    release: str = Field(pattern=r"^2\.\d+\.\d+$")
    server_el: dict[str, str] = Field(min_length=1)
    client_el: dict[str, str] = Field(min_length=1)
    # Ubuntu release -> the kernel Whamcloud prebuilt its client modules for (ChangeLog "Client primary kernels");
    # empty: no Ubuntu client packages of this release for a platform kiln supports.
    client_ubuntu: dict[str, str] = Field(default_factory=dict)


class CudaDriver(_Entry):
    min_driver: int = Field(ge=300)


class NcclCuda(_Entry):
    cuda_builds: tuple[str, ...] = Field(min_length=1)


class DocaKernel(_Entry):
    kernels: tuple[str, ...] = Field(min_length=1)
    release: str = Field(pattern=r"^\d+\.\d+\.\d+$")  # the point release whose repository the rdma role adds


class SeaweedFsRelease(_Entry):
    """A SeaweedFS release kiln has a binary of, and its build's offset size: `weed version` prints the volume size
    limit, 30GB for 4-byte offsets and 8000GB for the 5BytesOffset build (weed/util/constants_4bytes.go,
    constants_5bytes.go), whose volume index entries are a byte longer."""

    build: Literal["30GB", "8000GB"]
    refused: str = ""  # a defect that rules the release out, with its fix release; empty: supported


class CompatFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_: Literal[1] = Field(alias="schema")
    lustre_interop: dict[str, LustreInterop]
    lustre_releases: dict[str, LustreRelease]
    cuda_driver: dict[str, CudaDriver]
    nccl_cuda: dict[str, NcclCuda]
    doca_kernel: dict[str, DocaKernel]
    seaweedfs_releases: dict[str, SeaweedFsRelease]

    @model_validator(mode="after")
    def _every_line_has_a_release(self) -> CompatFile:
        lines = set(self.lustre_interop).union(*(e.servers for e in self.lustre_interop.values()))
        missing = sorted(lines - set(self.lustre_releases))
        if missing:
            raise ValueError(f"lustre_releases has no entry for the Lustre line(s) {', '.join(missing)}")
        return self


@cache
def load() -> CompatFile:
    """The compatibility matrix, validated once per process."""
    text = resources.files("kiln.knowledge").joinpath("compat.yaml").read_text(encoding="utf-8")
    return CompatFile.model_validate(yamlio.load(text))
