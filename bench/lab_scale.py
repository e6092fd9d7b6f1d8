"""Benchmark: Ansible configure time of the lab for 2, 4 and 8 GPU-node stand-ins.

    .venv/bin/python bench/lab_scale.py [--nodes 2 4 8] [--keep]

For each N it writes a stack derived from stacks/Pulumi.lab.yaml with N GPU nodes (own name, own
subnets, so it never touches a running `lab`), brings its hosts up, and times two runs of
ansible/site.yml: the first converge and the second (idempotent) one. Prepare steps (packages,
image, tools) are assumed done (`make lab` once). The 2-node run is the baseline for the per-host
growth. Results go to stdout and bench/results/lab_scale.json; docs/benchmarks.md quotes them.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from kiln.lab.lifecycle import Lab

ROOT = Path(__file__).resolve().parents[1]


def stack_file(nodes: int, out: Path) -> Path:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.lab.yaml").read_text())
    data = copy.deepcopy(doc["config"]["kiln:cluster"])
    data["name"] = f"labscale{nodes}"
    data["compute"]["pools"][0]["nodes"] = nodes
    data["networks"] = {"management": f"10.89.{100 + nodes}.0/24", "storage": f"10.89.{150 + nodes}.0/24"}
    path = out / f"Pulumi.labscale{nodes}.yaml"
    path.write_text(yaml.safe_dump({"config": {"kiln:cluster": data}}))
    return path


def measure(nodes: int, tmp: Path, keep: bool) -> dict[str, float | int]:
    lab = Lab.load(str(stack_file(nodes, tmp)))
    lab.state.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        lab.hosts()
        t1 = time.perf_counter()
        lab.inventory()
        first = lab.configure()
        t2 = time.perf_counter()
        second = lab.configure()
        t3 = time.perf_counter()
    finally:
        if not keep:
            lab.down()
    return {
        "gpu_nodes": nodes,
        "hosts": len(lab.plan.hosts),
        "hosts_up_s": round(t1 - t0, 1),
        "first_configure_s": round(t2 - t1, 1),
        "second_configure_s": round(t3 - t2, 1),
        "first_changed": sum(first.values()),
        "second_changed": sum(second.values()),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--keep", action="store_true", help="leave the hosts up")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.nodes:
            rows.append(measure(n, Path(tmp), args.keep))
            print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    for r in rows[1:]:
        extra = r["gpu_nodes"] - base["gpu_nodes"]
        if extra:
            first = (r["first_configure_s"] - base["first_configure_s"]) / extra
            second = (r["second_configure_s"] - base["second_configure_s"]) / extra
            r["first_s_per_extra_gpu_node"] = round(first, 1)
            r["second_s_per_extra_gpu_node"] = round(second, 1)
            print(
                f"{r['gpu_nodes']} GPU nodes: +{first:.1f} s of first and +{second:.1f} s of second "
                f"configure per GPU node beyond {base['gpu_nodes']}"
            )
    out = ROOT / "bench" / "results" / "lab_scale.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
