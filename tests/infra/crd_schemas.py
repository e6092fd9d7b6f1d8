"""CustomResourceDefinitions → the JSON schemas kubeconform reads (tests/infra/schemas/crds/GROUP/KIND_VERSION.json).

The conversion is kubeconform's own (scripts/openapi2jsonschema.py of github.com/yannh/kubeconform v0.7.0): each
served version's `openAPIV3Schema`, with `additionalProperties: false` on every object below the root that lists
`properties` and does not say otherwise (kubectl's strict validation), and `format: int-or-string` as
`oneOf: [string, integer]`. Each file records its source in `$comment`. Run it when a CRD's version changes, with the
upstream file and where it came from, then update tests/infra/schemas/SOURCES.md:

    PYTHONPATH=. .venv/bin/python tests/infra/crd_schemas.py --source 'github.com/OWNER/REPO TAG DIR' CRD.yaml...

(the upstream file keeps its name: the source recorded is `github.com/OWNER/REPO TAG DIR/<file name>`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

SCHEMAS = Path(__file__).resolve().parent / "schemas" / "crds"


def strict(node: Any, root: bool = True) -> Any:
    """additionalProperties: false wherever `properties` are listed and nothing else is said, below the root."""
    if isinstance(node, dict):
        if "properties" in node and not root and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            strict(value, root=False)
    elif isinstance(node, list):
        for value in node:
            strict(value, root=False)
    return node


def int_or_string(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("format") == "int-or-string":
            return {"oneOf": [{"type": "string"}, {"type": "integer"}]}
        return {k: int_or_string(v) for k, v in node.items()}
    if isinstance(node, list):
        return [int_or_string(v) for v in node]
    return node


def schemas(crd: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(relative path, schema) for each version of one CRD that carries a schema."""
    spec = crd["spec"]
    for version in spec.get("versions", []):
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is not None:
            name = f"{spec['group']}/{spec['names']['kind'].lower()}_{version['name'].lower()}.json"
            yield name, int_or_string(strict(schema))


def convert(path: Path, source: str, out: Path = SCHEMAS) -> list[Path]:
    text = path.read_bytes()
    digest = hashlib.sha256(text).hexdigest()
    written = []
    for doc in yaml.safe_load_all(text):
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        for name, schema in schemas(doc):
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            comment = f"{source} (sha256 {digest}), converted by tests/infra/crd_schemas.py"
            target.write_text(json.dumps({"$comment": comment, **schema}, indent=1, sort_keys=True) + "\n")
            written.append(target)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="where the files come from: 'github.com/OWNER/REPO TAG DIR'")
    ap.add_argument("crds", nargs="+", type=Path, help="CRD files, named as upstream")
    args = ap.parse_args()
    for path in args.crds:
        for target in convert(path, f"{args.source.rstrip('/')}/{path.name}"):
            print(target.relative_to(SCHEMAS.parent))


if __name__ == "__main__":
    main()
