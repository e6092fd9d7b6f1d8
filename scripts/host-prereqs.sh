#!/usr/bin/env bash
# host-prereqs.sh - install what kiln's tests and the podman lab need on the
# machine that runs them (Debian 12 bookworm), and configure podman for it.
#
# Idempotent and fast when everything is already in place: apt-get runs only
# when a package is missing, containers.conf is rewritten only when a value
# differs. Safe to run concurrently with other apt users: waits (up to
# KILN_APT_LOCK_WAIT seconds, default 300) for the dpkg/apt locks.
#
# Environment:
#   KILN_APT_LOCK_WAIT   seconds to wait for a held dpkg/apt lock (default 300)
#   KILN_NOFILE          podman default nofile ulimit (default 20000, capped at `ulimit -Hn`)
#   KILN_NPROC           podman default nproc ulimit (default 32768, capped at `ulimit -Hu`)
#   KILN_CONTAINERS_CONF file to merge the podman settings into
#                        (default /etc/containers/containers.conf)
set -euo pipefail

readonly PREFIX='[prereqs]'
log() { printf '%s %s\n' "$PREFIX" "$*"; }
die() { printf '%s ERROR: %s\n' "$PREFIX" "$*" >&2; exit 1; }

# Packages needed as root:
#   podman runc            lab hosts + molecule driver (crun fails on hybrid cgroups here)
#   netavark aardvark-dns  podman network backend with name resolution between lab hosts
#   iptables               netavark sets up container NAT/port forwarding with it
#   debootstrap debian-archive-keyring  base image built without a registry
#   fio iperf3             storage / network benchmarks
#   e2fsprogs util-linux   loop-device filesystems (mkfs.ext4, losetup, ...)
#   xfsprogs fdisk         blkid fixtures (tests/unit/ansible_modules/fixtures/regen-blkid.sh: mkfs.xfs, sfdisk)
#   jq python3             scripting (python3 also merges containers.conf below)
#   (lint) shellcheck      lint for scripts/*.sh
#   openssh-client         the lab's Ansible and kiln verify reach its hosts over SSH
#   maven openjdk-17-jre-headless  scripts/build-kafka.sh: Kafka's jars and the JMX exporter from Maven Central
#                          (the kafka role's molecule scenario, bench/kafka_*.py)
PKGS=(podman runc netavark aardvark-dns iptables debootstrap debian-archive-keyring
      fio iperf3 e2fsprogs util-linux xfsprogs fdisk jq python3 shellcheck openssh-client
      maven openjdk-17-jre-headless
      prometheus prometheus-alertmanager)  # promtool and amtool: tests of the rendered monitoring config
# Rootless podman (non-root user with sudo) additionally needs user namespaces,
# user-mode networking and a FUSE overlay driver.
ROOTLESS_PKGS=(uidmap slirp4netns fuse-overlayfs)

CONF="${KILN_CONTAINERS_CONF:-/etc/containers/containers.conf}"
LOCK_WAIT="${KILN_APT_LOCK_WAIT:-300}"

# --- privileges -------------------------------------------------------------
SUDO=()
if [[ ${EUID} -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
        PKGS+=("${ROOTLESS_PKGS[@]}")
        log "not root: using sudo for installs and ${CONF}; adding rootless podman packages"
    else
        die "root is needed to install packages and write ${CONF}; run as root (or install sudo and re-run)"
    fi
fi

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    die "dpkg/apt not found: this script supports Debian/Ubuntu hosts only (tested on Debian 12 bookworm)"
fi

# --- packages ---------------------------------------------------------------
is_installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

# Run apt-get, retrying while another process holds the dpkg/apt lock.
apt_get() {
    local deadline=$((SECONDS + LOCK_WAIT)) errf rc
    errf="$(mktemp)"
    while true; do
        rc=0
        "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get -o DPkg::Lock::Timeout=30 -q -y "$@" 2>"$errf" || rc=$?
        # apt repeats "Waiting for cache lock" every second while it waits
        grep -v '^Waiting for cache lock' "$errf" >&2 || true
        if [[ $rc -eq 0 ]]; then
            rm -f "$errf"
            return 0
        fi
        if grep -Eqi 'could not get lock|unable to acquire the dpkg frontend lock|unable to lock (the )?(administration )?directory|is another process using it' "$errf" \
            && ((SECONDS < deadline)); then
            log "apt/dpkg lock held by another process; retrying in 10 s ($((deadline - SECONDS)) s left)"
            sleep 10
            continue
        fi
        rm -f "$errf"
        return "$rc"
    done
}

missing=()
for p in "${PKGS[@]}"; do
    is_installed "$p" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
    log "packages: all ${#PKGS[@]} present (${PKGS[*]})"
else
    log "packages: missing ${missing[*]}; running apt-get update"
    apt_get update || die "apt-get update failed; check /etc/apt/sources.list* and the network to the Debian mirror"
    log "packages: installing ${missing[*]}"
    apt_get install --no-install-recommends "${missing[@]}" \
        || die "apt-get install failed for: ${missing[*]} (see apt output above)"
    for p in "${missing[@]}"; do
        is_installed "$p" || die "package $p still not installed after apt-get install"
    done
    log "packages: installed ${missing[*]}"
fi

# --- podman settings --------------------------------------------------------
# nofile/nproc must not exceed the hard limits, or the runtime cannot apply them.
cap_limit() {  # cap_limit WANTED HARD_LIMIT
    if [[ "$2" =~ ^[0-9]+$ ]] && (($2 < $1)); then echo "$2"; else echo "$1"; fi
}
nofile="$(cap_limit "${KILN_NOFILE:-20000}" "$(ulimit -Hn)")"
nproc="$(cap_limit "${KILN_NPROC:-32768}" "$(ulimit -Hu)")"
ulimits_value="[\"nofile=${nofile}:${nofile}\", \"nproc=${nproc}:${nproc}\"]"

# Merge `key = value` into [section] of a TOML file: replace the key's line
# (including a multi-line array value) if present, add it under the section
# otherwise, add the section if absent. Writes only when something changes.
# Prints "unchanged" or "updated".
merge_py='
import os, re, sys
path, settings = sys.argv[1], sys.argv[2:]
try:
    with open(path) as f:
        lines = f.read().splitlines()
except FileNotFoundError:
    lines = []
orig = list(lines)
sec_re = re.compile(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(#.*)?$")

def section_bounds(name):
    start = None
    for i, l in enumerate(lines):
        m = sec_re.match(l)
        if m and start is None and m.group(1) == name:
            start = i
        elif m and start is not None:
            return start, i
    return (start, len(lines)) if start is not None else (None, None)

for item in settings:
    section, key, value = item.split("\x1f")
    want = f"{key} = {value}"
    start, end = section_bounds(section)
    if start is None:
        if lines and lines[-1].strip():
            lines.append("")
        lines += [f"[{section}]", want]
        continue
    key_re = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
    for i in range(start + 1, end):
        if key_re.match(lines[i]):
            j = i
            rest = lines[i].split("=", 1)[1].split("#", 1)[0].strip()
            if rest.startswith("[") and "]" not in rest:
                while j + 1 < end and "]" not in lines[j].split("#", 1)[0]:
                    j += 1
            lines[i:j + 1] = [want]
            break
    else:
        # insert after the last non-blank line of the section
        k = end
        while k - 1 > start and not lines[k - 1].strip():
            k -= 1
        lines.insert(k, want)

if lines == orig:
    print("unchanged")
else:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".kiln-tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    if os.path.exists(path):
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
    os.replace(tmp, path)
    print("updated")
'
sep=$'\x1f'
result="$("${SUDO[@]}" python3 -c "$merge_py" "$CONF" \
    "containers${sep}default_ulimits${sep}${ulimits_value}" \
    "engine${sep}runtime${sep}\"runc\"")" \
    || die "could not merge podman settings into ${CONF}"
if [[ "$result" == "unchanged" ]]; then
    log "podman: ${CONF} already has runtime=\"runc\" and default_ulimits=${ulimits_value}"
else
    log "podman: wrote runtime=\"runc\" and default_ulimits=${ulimits_value} into ${CONF}"
fi

# --- sanity check -----------------------------------------------------------
runtime="$("${SUDO[@]}" podman info --format '{{.Host.OCIRuntime.Name}}' 2>/dev/null || true)"
if [[ "$runtime" != "runc" ]]; then
    die "podman does not report the runc runtime (got '${runtime:-nothing}'); run 'podman info' to see why"
fi
log "podman: ok ($("${SUDO[@]}" podman --version), runtime ${runtime})"
