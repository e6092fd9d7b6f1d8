"""`kiln init`: a commented starter stack from a handful of answers (kiln/templates/starter-stack.yaml.j2).

Each `Question` is one answer: its command-line flag, its default, what it asks and the spec fields it fills, so a
problem the spec's validation finds in the written stack can be told as the answer that caused it (`question_for`).
Strings are inserted as JSON scalars (valid YAML), numbers as numbers: an answer never becomes YAML structure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kiln.spec.types import NAME_PATTERN
from kiln.templating import environment

Answer = int | float | str


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    key: str
    kind: type[int] | type[float] | type[str]
    default: Answer
    text: str  # what `kiln init` asks
    paths: tuple[str, ...]  # the spec fields (path prefixes, as SpecIssue names them) the answer fills

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


POOL = "compute.pools[0]"
QUESTIONS = (
    Question(key="gpu_model", kind=str, default="h100-sxm", text="GPU model (the hardware catalog's name)",
             paths=(f"{POOL}.gpu.model",)),
    Question(key="gpus_per_node", kind=int, default=8, text="GPUs per node", paths=(f"{POOL}.gpu.count",)),
    Question(key="gpu_nodes", kind=int, default=4, text="GPU nodes", paths=(f"{POOL}.nodes", "compute")),
    Question(key="fabric", kind=str, default="infiniband", text="fabric (infiniband, roce or tcp)",
             paths=("fabric", "lustre.lnet")),
    Question(key="rails", kind=int, default=8, text="compute rails (NICs for NCCL) per GPU node",
             paths=(f"{POOL}.compute_rails.count",)),
    Question(key="nic", kind=str, default="cx7-ndr400", text="NIC model of the rails and storage links",
             paths=(f"{POOL}.compute_rails", f"{POOL}.storage_nics", "lustre.mds.nics", "lustre.oss.nics",
                    "objectstore.nics")),
    Question(key="mds_nodes", kind=int, default=1, text="Lustre metadata servers", paths=("lustre.mds",)),
    Question(key="oss_nodes", kind=int, default=2, text="Lustre object storage servers", paths=("lustre.oss",)),
    Question(key="objectstore_nodes", kind=int, default=3, text="object-store (SeaweedFS) servers",
             paths=("objectstore",)),
    Question(key="dataset_tb", kind=float, default=20.0, text="training dataset size, TB",
             paths=("workload.dataset_TB",)),
    Question(key="model_params_b", kind=float, default=8.0,
             text="model size, billions of parameters (sets the checkpoint size)", paths=("workload.model_params_B",)),
    Question(key="checkpoint_interval_min", kind=int, default=30, text="minutes between checkpoints",
             paths=("workload.checkpoint",)),
    Question(key="management_network", kind=str, default="10.0.0.0/22", text="management subnet (SSH, Ansible)",
             paths=("networks.management",)),
    Question(key="storage_network", kind=str, default="10.1.0.0/22", text="storage subnet (LNet, S3)",
             paths=("networks.storage",)),
    Question(key="roce_network", kind=str, default="10.2.0.0/16",
             text="subnet of the RoCE rails' addresses (used with fabric roce)", paths=("networks.roce_rails",)),
)
CHECKPOINT_BYTES_PER_PARAM = 14  # the catalog's default (kiln/knowledge/workload.yaml): weights and Adam state
CHECKPOINTS_KEPT = 3


def question_for(path: str) -> Question | None:
    """The answer that fills the spec field `path` (the longest matching prefix), if any."""
    matches = [(len(p), q) for q in QUESTIONS for p in q.paths if path == p or path.startswith((p + ".", p + "["))]
    return max(matches, key=lambda m: m[0])[1] if matches else None


def render_starter(name: str, answers: Mapping[str, Answer]) -> str:
    """The stack file's text. `answers` holds every question's key; the rest is derived from them. The name must be
    a stack name (kiln.spec.types.NAME_PATTERN): it is also written into comments."""
    if not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(f"not a stack name: {name!r}")
    values = {q.key: q.kind(answers[q.key]) for q in QUESTIONS}  # numbers stay numbers
    checkpoint_tb = float(values["model_params_b"]) * CHECKPOINT_BYTES_PER_PARAM / 1000
    capacity = 2 * (float(values["dataset_tb"]) + CHECKPOINTS_KEPT * checkpoint_tb)
    return environment().get_template("starter-stack.yaml.j2").render(
        **values,
        name=name,
        description=f"{values['gpu_nodes']} x {values['gpus_per_node']} {values['gpu_model']}, from kiln init",
        fsname=_fsname(name),
        lnet="tcp0" if values["fabric"] == "tcp" else "o2ib0",
        checkpoint_tb=f"{checkpoint_tb:.3g}",
        checkpoints_kept=CHECKPOINTS_KEPT,
        objectstore_capacity_tb=max(1, math.ceil(capacity)),
    )


def _fsname(name: str) -> str:
    """A Lustre filesystem name (a letter, then up to 7 letters, digits or _) from the stack name."""
    word = re.sub(r"[^A-Za-z0-9_]", "", name)
    word = word.lstrip("0123456789_")
    return word[:8] or "lustre"
