"""Benchmark: `kiln plan --json` on a generated 4,096-node (or larger) spec.

    .venv/bin/python bench/plan_scale.py [--nodes 4096] [--pools 1] [--runs 5] [--out FILE]
    .venv/bin/python bench/plan_scale.py --nodes 100000 --pools 4 --runs 3

Runs `kiln plan <spec> --json` as a subprocess (what an operator runs), `--runs` times, on a spec
generated from stacks/Pulumi.prod-h100.yaml with the node count raised, and on prod-h100 itself as
the baseline in the same run. Prints the median wall time, the peak RSS (ru_maxrss of the child),
and the ratio to the baseline; `--out` also writes them as JSON (bench/results/plan_scale*.json).
Targets (the kit's scale requirement for planning): < 2 s and < 300 MB for 4,096 nodes;
< 5 s and < 1.5 GB for 100,000 nodes in 4 pools (validate and plan linear with a small constant).
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


#: (nodes up to, seconds, MB): the targets by size.
TARGETS = ((4096, 2.0, 300), (100_000, 5.0, 1536))


def generated_spec(nodes: int, out: Path, pools: int = 1) -> Path:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod-h100.yaml").read_text())
    data = copy.deepcopy(doc["config"]["kiln:cluster"])
    data["name"] = f"scale-{nodes}"
    first = data["compute"]["pools"][0]
    data["compute"]["pools"] = [
        {**copy.deepcopy(first), "nodes": nodes // pools + (i < nodes % pools),
         **({} if i == 0 else {"name": f"{first['name']}-{i}", "hostname_prefix": f"{first['name']}x{i}-"})}
        for i in range(pools)
    ]
    big = nodes > 60_000
    data["networks"] = ({"management": "10.64.0.0/12", "storage": "10.80.0.0/12"} if big
                        else {"management": "10.96.0.0/16", "storage": "10.97.0.0/16"})
    # Keep the fleet sized as the planner recommends for this many GPUs.
    data["lustre"]["oss"]["nodes"] = max(2, nodes // 32 + (nodes // 32) % 2)
    path = out / f"Pulumi.scale-{nodes}.yaml"
    path.write_text(yaml.safe_dump({"config": {"kiln:cluster": data}}))
    return path


def run_once(spec: Path, out: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    with out.open("wb") as f:
        subprocess.run([sys.executable, "-m", "kiln.cli", "plan", str(spec), "--json"], stdout=f, check=True, cwd=ROOT)
    wall = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the max over all children so far: only a rise is attributable.
    return wall, max(peak_kib, before) / 1024


def measure(spec: Path, runs: int, tmp: Path) -> tuple[float, float, int]:
    """Median wall time, peak RSS and host count. The output goes to a file and is read only after the last run:
    a child starts as a copy of this process (its peak RSS counts ours), so this process stays small meanwhile."""
    walls, peaks = [], []
    out = tmp / f"{spec.stem}.plan.json"
    for _ in range(runs):
        w, p = run_once(spec, out)
        walls.append(w)
        peaks.append(p)
    hosts = len(json.loads(out.read_bytes())["hosts"])
    out.unlink()
    return statistics.median(walls), max(peaks), hosts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--pools", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", help="also write the figures here as JSON")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = generated_spec(args.nodes, Path(tmp), args.pools)
        base_wall, base_peak, base_hosts = measure(ROOT / "stacks" / "Pulumi.prod-h100.yaml", args.runs, Path(tmp))
        wall, peak, hosts = measure(big, args.runs, Path(tmp))
    print(f"baseline prod-h100 ({base_hosts} hosts): median {base_wall:.3f} s, peak RSS {base_peak:.0f} MB")
    print(f"generated {args.nodes}-node spec ({hosts} hosts): median {wall:.3f} s, peak RSS {peak:.0f} MB")
    print(f"ratio to baseline: {wall / base_wall:.2f}× time")
    _, max_s, max_mb = next((t for t in TARGETS if args.nodes <= t[0]), TARGETS[-1])
    ok = wall < max_s and peak < max_mb
    print(f"targets < {max_s:g} s and < {max_mb} MB: {'met' if ok else 'MISSED'}")
    if args.out:
        figures = {
            "nodes": args.nodes, "pools": args.pools, "runs": args.runs, "hosts": hosts,
            "median_s": round(wall, 3), "peak_MB": round(peak), "baseline_hosts": base_hosts,
            "baseline_median_s": round(base_wall, 3), "baseline_peak_MB": round(base_peak),
            "ratio_time": round(wall / base_wall, 2), "target_s": max_s, "target_MB": max_mb, "targets_met": ok,
        }
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
