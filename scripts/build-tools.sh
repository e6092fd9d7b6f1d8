#!/usr/bin/env bash
# build-tools.sh - build kiln's pinned Go tools into <repo>/.tools/bin.
#
# Usage: scripts/build-tools.sh [--force] [TOOL...]
#   TOOL     weed, warp, s5cmd or kubeconform (default: weed warp; s5cmd is an
#            optional fallback S3 load generator; kubeconform checks the
#            rendered manifests in make test, tests/infra/test_kubeconform.py)
#   --force  rebuild even if the binary already reports the pinned version
#
# Why not `go install MOD/cmd@VERSION`: go install asks the module proxy for
# the module's version list (deprecation/retraction check), which the proxy
# reachable here refuses (403) for these modules, and the checksum database
# does not serve warp's entry (404). So each tool is fetched as the pinned
# module zip with `go mod download`, checked against the pinned h1: hash below,
# and built from a copy of it with the module's own go.mod/go.sum (the same
# dependency set `go install` would use; dependencies are verified by that
# go.sum). The top module skips the checksum database (GONOSUMDB) because the
# pinned hash is checked instead.
#
# Environment: GO (go binary; default `go` on PATH, else /usr/local/go/bin/go),
# KILN_CACHE_DIR (build dir parent; default /var/tmp/kiln).

# The pinned *_MODULE/_VERSION/... variables are read indirectly (${!name}).
# shellcheck disable=SC2034
set -euo pipefail

# --- pinned versions ----------------------------------------------------------
# SeaweedFS 3.39 (commit 51d4a4b, 2023-01-09). SeaweedFS tags releases as
# "3.39", not semver, so Go knows them only as pseudo-versions; newer ones
# (e.g. @3.96, @4.05, v0.0.0-20260402004241-6213daf11812) are refused by the
# module proxy here. Sum is the sumdb-verified h1: hash of the module zip.
WEED_MODULE=github.com/seaweedfs/seaweedfs
WEED_VERSION=v0.0.0-20230109022022-51d4a4b28d0e
WEED_SUM='h1:7TzK6quGr2M5B3Hgy1+vooW4tsdVabuMjfkNY2dwwt4='
WEED_PKG=./weed
WEED_REPORTS=3.39                      # `weed version` prints "version 30GB 3.39 ..."
WEED_LDFLAGS="-X github.com/seaweedfs/seaweedfs/weed/util.COMMIT=51d4a4b2"

# MinIO warp v1.0.0 (2024-07-26), S3 benchmark. v1.0.1 and later are refused by
# the module proxy here; sum.golang.org has no entry reachable for v1.0.0, so
# the h1: hash below (of the zip proxy.golang.org serves) is the pin.
WARP_MODULE=github.com/minio/warp
WARP_VERSION=v1.0.0
WARP_SUM='h1:woAI+71OyvDQoI6U0xeL9NvX2TxZHXpgGHexU4R6K9Y='
WARP_PKG=.
WARP_REPORTS=v1.0.0                    # `warp --version` prints "warp version v1.0.0 - b3452c34f08a"
WARP_LDFLAGS="-X github.com/minio/warp/pkg.Version=v1.0.0 -X github.com/minio/warp/pkg.ReleaseTag=v1.0.0 -X github.com/minio/warp/pkg.ShortCommitID=b3452c34f08a -X github.com/minio/warp/pkg.CommitID=b3452c34f08a0c0055cd6d75bfae85dae18efccc"

# s5cmd v2.3.0 (2024-12-16), parallel S3 client; fallback load generator.
S5CMD_MODULE=github.com/peak/s5cmd/v2
S5CMD_VERSION=v2.3.0
S5CMD_SUM='h1:g8KSD2o4pcyzUsAaWsn7TGb+j4w+/mI1B5NmfDR0Bbs='
S5CMD_PKG=.
S5CMD_REPORTS=v2.3.0                   # `s5cmd version` prints "v2.3.0-991c9fbc"
S5CMD_LDFLAGS="-X github.com/peak/s5cmd/v2/version.Version=v2.3.0 -X github.com/peak/s5cmd/v2/version.GitCommit=991c9fbc"

# kubeconform v0.7.0 (2025-05-12, the module proxy's time), Kubernetes manifest validator (strict, with the CRD schemas in
# tests/infra/schemas). `kubeconform -v` prints main.version, "development" unless set at build time.
KUBECONFORM_MODULE=github.com/yannh/kubeconform
KUBECONFORM_VERSION=v0.7.0
KUBECONFORM_SUM='h1:ZFfniR8VChrWQxaxTUGnNrxw8RIDkjVBrjdhXSamwjw='
KUBECONFORM_PKG=./cmd/kubeconform
KUBECONFORM_REPORTS=v0.7.0
KUBECONFORM_LDFLAGS="-X main.version=v0.7.0"

DEFAULT_TOOLS=(weed warp)
# ------------------------------------------------------------------------------

readonly PREFIX='[tools]'
log() { printf '%s %s\n' "$PREFIX" "$*"; }
die() { printf '%s ERROR: %s\n' "$PREFIX" "$*" >&2; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="$ROOT/.tools/bin"
if [[ -n "${KILN_CACHE_DIR:-}" ]]; then
    CACHE_DIR="$KILN_CACHE_DIR"
elif mkdir -p /var/tmp/kiln 2>/dev/null && [[ -w /var/tmp/kiln ]]; then
    CACHE_DIR=/var/tmp/kiln
else
    CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/kiln"
fi

force=0
tools=()
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h|--help) sed -n '2,/^$/{/^$/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        weed|warp|s5cmd|kubeconform) tools+=("$arg") ;;
        *) die "unknown argument '$arg' (tools: weed warp s5cmd kubeconform; flags: --force)" ;;
    esac
done
((${#tools[@]})) || tools=("${DEFAULT_TOOLS[@]}")

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "$GO" ]] || die "go not found (looked on PATH and at /usr/local/go/bin/go); install Go >= 1.21 or set GO=/path/to/go"

# Print the version line the binary reports (empty if it does not run).
reported_version() {  # reported_version TOOL BINARY
    case "$1" in
        weed) "$2" version 2>/dev/null | head -n1 ;;
        warp) "$2" --version 2>/dev/null | head -n1 ;;
        s5cmd) "$2" version 2>/dev/null | head -n1 ;;
        kubeconform) "$2" -v 2>/dev/null | head -n1 ;;
    esac || true
}

build_one() {
    local tool="$1" up mod ver sum pkg reports ldflags bin start dl dir got src
    up="$(tr '[:lower:]' '[:upper:]' <<<"$tool")"
    mod="${up}_MODULE"; mod="${!mod}"
    ver="${up}_VERSION"; ver="${!ver}"
    sum="${up}_SUM"; sum="${!sum}"
    pkg="${up}_PKG"; pkg="${!pkg}"
    reports="${up}_REPORTS"; reports="${!reports}"
    ldflags="${up}_LDFLAGS"; ldflags="${!ldflags}"
    bin="$BIN_DIR/$tool"

    if [[ $force -eq 0 && -x "$bin" ]]; then
        got="$(reported_version "$tool" "$bin")"
        if [[ "$got" == *"$reports"* ]]; then
            log "$tool: up to date ($bin reports '$got')"
            return 0
        fi
        log "$tool: $bin reports '${got:-nothing}', want $reports; rebuilding"
    fi

    start=$SECONDS
    log "$tool: downloading $mod@$ver"
    dl="$(GOFLAGS=-mod=mod GONOSUMDB="$mod" GOTOOLCHAIN=local \
        "$GO" mod download -json "$mod@$ver" 2>&1)" \
        || die "$tool: go mod download $mod@$ver failed: $(grep -m1 '"Error"' <<<"$dl" || echo "$dl")"
    got="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"$dl")"
    dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$dl")"
    [[ "$got" == "$sum" ]] \
        || die "$tool: checksum mismatch for $mod@$ver: got '$got', pinned '$sum' (update ${up}_SUM only if you changed ${up}_VERSION)"
    [[ -d "$dir" ]] || die "$tool: module dir '$dir' missing after download"

    # Build from a writable copy: -mod=mod may need to touch go.mod/go.sum.
    src="$CACHE_DIR/gobuild/$tool-$ver"
    rm -rf "$src"
    mkdir -p "$(dirname "$src")" "$BIN_DIR"
    cp -r "$dir" "$src"
    chmod -R u+w "$src"
    log "$tool: building $pkg (CGO_ENABLED=0, $("$GO" env GOVERSION))"
    if ! (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local \
            "$GO" build -trimpath -ldflags "-s -w $ldflags" -o "$bin.tmp" "$pkg") \
            >"$CACHE_DIR/gobuild/$tool.log" 2>&1; then
        tail -n 20 "$CACHE_DIR/gobuild/$tool.log" >&2
        die "$tool: go build failed (full log: $CACHE_DIR/gobuild/$tool.log)"
    fi
    mv -f "$bin.tmp" "$bin"
    rm -rf "$src"
    got="$(reported_version "$tool" "$bin")"
    [[ "$got" == *"$reports"* ]] || die "$tool: built binary reports '${got:-nothing}', expected $reports"
    log "$tool: built $bin in $((SECONDS - start)) s ('$got')"
}

mkdir -p "$CACHE_DIR/gobuild"
exec 9>"$CACHE_DIR/tools.lock"
if ! flock -n 9; then
    log "another build holds $CACHE_DIR/tools.lock; waiting (up to 30 min)"
    flock -w 1800 9 || die "timed out waiting for $CACHE_DIR/tools.lock"
fi
for t in "${tools[@]}"; do
    build_one "$t"
done
