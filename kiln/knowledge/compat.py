"""kiln/knowledge/compat.yaml as a typed model: which pinned versions may run together.

Lustre client/server interoperability, CUDA toolkit -> driver branch, NCCL -> CUDA builds and DOCA-Host ->
kernel series, each entry with its reason and source. The planner refuses a combination this data does not
name (kiln/plan/versions.py); docs/stack-reference.md documents the `versions` fields that pick them.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kiln import yamlio


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str = Field(min_length=1)
    source: str = Field(min_length=1)


class LustreInterop(_Entry):
    servers: tuple[str, ...] = Field(min_length=1)


class CudaDriver(_Entry):
    min_driver: int = Field(ge=300)


class NcclCuda(_Entry):
    cuda_builds: tuple[str, ...] = Field(min_length=1)


class DocaKernel(_Entry):
    kernels: tuple[str, ...] = Field(min_length=1)


class CompatFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_: Literal[1] = Field(alias="schema")
    lustre_interop: dict[str, LustreInterop]
    cuda_driver: dict[str, CudaDriver]
    nccl_cuda: dict[str, NcclCuda]
    doca_kernel: dict[str, DocaKernel]


@cache
def load() -> CompatFile:
    """The compatibility matrix, validated once per process."""
    text = resources.files("kiln.knowledge").joinpath("compat.yaml").read_text(encoding="utf-8")
    return CompatFile.model_validate(yamlio.load(text))
