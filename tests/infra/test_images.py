"""kiln's own images (the data mover, kiln-health) are the stack's to set: registry, tag and digest."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kiln.knowledge.kubernetes import kubernetes
from kiln.plan import build_plan
from kiln.render.manifests import render_manifests
from kiln.spec import SpecError, validate

MOVER = "registry.example.com:5000/hpc/kiln-datamover:0.1.0@sha256:" + "a" * 64
HEALTH = "registry.example.com/hpc/kiln-health@sha256:" + "b" * 64


def images(stack_data: dict[str, Any]) -> dict[str, set[str]]:
    """kind/name → the images of its containers, over every rendered object."""
    out: dict[str, set[str]] = {}
    for text in render_manifests(build_plan(validate(stack_data))).values():
        for doc in yaml.safe_load_all(text):
            spec = (doc or {}).get("spec") or {}
            pod = (spec.get("jobTemplate", {}).get("spec", spec).get("template") or {}).get("spec") or {}
            found = {c["image"] for c in pod.get("containers", []) + pod.get("initContainers", [])}
            if found:
                out[f"{doc['kind']}/{doc['metadata']['name']}"] = found
    return out


def test_the_stack_sets_kilns_images(stack: Any) -> None:
    data = stack("dev")
    data["kubernetes"]["images"] = {"datamover": MOVER, "health": HEALTH}
    found = images(data)
    assert found["DaemonSet/kiln-health"] == {HEALTH}
    movers = {k for k, v in found.items() if MOVER in v}
    assert {"Job/kiln-stage-pretrain", "Deployment/kiln-datamover"} <= movers, sorted(found)
    assert not any("localhost/kiln-" in image for v in found.values() for image in v)


def test_unset_images_are_the_local_builds(stack: Any) -> None:
    found = images(stack("dev"))
    assert found["DaemonSet/kiln-health"] == {kubernetes().health.image.value}


@pytest.mark.parametrize("bad", ["Registry.example.com/kiln:1", "kiln-datamover", "kiln:1 --privileged",
                                 "kiln@sha256:abc", "kiln:1\nkind: Pod"])
def test_a_malformed_image_is_refused(stack: Any, bad: str) -> None:
    data = stack("dev")
    data["kubernetes"]["images"] = {"datamover": bad}
    with pytest.raises(SpecError, match=r"kubernetes\.images\.datamover"):
        validate(data)
