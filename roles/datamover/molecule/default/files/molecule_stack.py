"""Test stack of the datamover scenario: the lab stack (stacks/Pulumi.lab.yaml) named `molecule`, with one more
link imported on a schedule, so the scenario also deploys a timer. Usage: molecule_stack.py LAB_STACK OUT."""

import sys

import yaml

doc = yaml.safe_load(open(sys.argv[1]))
cluster = doc["config"]["kiln:cluster"]
cluster["name"] = "molecule"
cluster["dataflow"]["links"].append(
    {"name": "eval", "bucket": "datasets", "prefix": "eval/", "path": "/datasets/eval",
     "import_trigger": "schedule", "schedule": "30 3 * * 1-5"}
)
with open(sys.argv[2], "w") as out:
    yaml.safe_dump(doc, out, sort_keys=False)
