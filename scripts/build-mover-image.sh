#!/usr/bin/env bash
# build-mover-image.sh - build the data mover's container image (containers/datamover/Containerfile) with
# podman from a wheelhouse of this checkout. The tag is the one kiln render uses
# (kiln/knowledge/kubernetes.yaml dataflow.mover_image); push it to the cluster's registry.
#
# Usage: scripts/build-mover-image.sh [TAG]
# Environment: BASE (base image, default docker.io/library/debian:bookworm-slim); WEED (the SeaweedFS binary
# `kiln data models` runs for the filer subscription, default .tools/bin/weed from scripts/build-tools.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:-localhost/kiln-datamover:0.1.0}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
"$here/scripts/build-wheelhouse.sh" "$ctx/wheelhouse"
cp "$here/containers/datamover/Containerfile" "$ctx/"
weed=${WEED:-$here/.tools/bin/weed}
if [ ! -x "$weed" ]; then
  echo "build-mover-image.sh: no SeaweedFS binary at $weed; fix: run scripts/build-tools.sh or set WEED=PATH" >&2
  exit 2
fi
cp "$weed" "$ctx/weed"
podman build --build-arg "BASE=${BASE:-docker.io/library/debian:bookworm-slim}" -t "$tag" "$ctx"
