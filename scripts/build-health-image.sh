#!/usr/bin/env bash
# build-health-image.sh - build kiln-health's container image (containers/health/Containerfile) with podman from
# this checkout's kiln/node/health.py. The tag is the one kiln render uses (kiln/knowledge/kubernetes.yaml
# health.image); push it to the cluster's registry.
#
# Usage: scripts/build-health-image.sh [TAG]
# Environment: BASE (base image, default docker.io/library/debian:bookworm-slim).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:-localhost/kiln-health:0.1.0}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$here/kiln/node/health.py" "$here/containers/health/Containerfile" "$ctx/"
podman build --build-arg "BASE=${BASE:-docker.io/library/debian:bookworm-slim}" -t "$tag" "$ctx"
