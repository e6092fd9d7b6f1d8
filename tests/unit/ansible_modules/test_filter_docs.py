"""Every kiln.cluster filter is documented as ansible-doc and Galaxy read it: a sidecar plugins/filter/<name>.yml
whose options are the function's parameters (galaxy-importer logs an error for a filter ansible-doc cannot
document, and Galaxy shows it)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

from kiln_ansible_support import REPO, collection_env
from kiln_filters import filter_plugin

ANSIBLE_DOC = Path(sys.executable).parent / "ansible-doc"


def _filters() -> dict[str, object]:
    return {name: function for path in sorted((REPO / "plugins" / "filter").glob("*.py"))
            for name, function in filter_plugin(path.stem).FilterModule().filters().items()}


def test_ansible_doc_documents_every_filter_with_its_parameters(tmp_path: Path) -> None:
    filters = _filters()
    proc = subprocess.run([str(ANSIBLE_DOC), "-t", "filter", "--json", *(f"kiln.cluster.{n}" for n in filters)],
                          capture_output=True, text=True, env=collection_env(tmp_path), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    docs = json.loads(proc.stdout)
    for name, function in filters.items():
        doc = docs[f"kiln.cluster.{name}"]["doc"]
        params = list(inspect.signature(function).parameters.values())  # type: ignore[arg-type]
        wanted = {"_input"} | {"fields" if p.kind is p.VAR_KEYWORD else p.name for p in params[1:]}
        assert set(doc["options"]) == wanted, name
        assert doc["author"] == "Kiln maintainers (@kiln-hpc)" and doc["short_description"], name
        assert docs[f"kiln.cluster.{name}"]["examples"].count(f"kiln.cluster.{name}") >= 1, name


def test_no_sidecar_documents_a_filter_that_does_not_exist() -> None:
    sidecars = {p.stem for p in (REPO / "plugins" / "filter").glob("*.yml")}
    assert sidecars == set(_filters())
