#!/usr/bin/env bash
# build-base-image.sh - build the podman base image for kiln's lab hosts and
# molecule scenarios (localhost/kiln-node:bookworm) without any registry:
# debootstrap a minimal Debian rootfs from this machine's Debian mirror and
# `podman import` it with /sbin/init as the command.
#
# Cached: the image carries a label with a hash of everything that shapes its
# content (suite, package list, masked units, this script's version); when an
# image with the same hash exists nothing is done.
#
# Usage: scripts/build-base-image.sh [--check] [--force] [--help]
#   --check   also boot a container from the image and wait for
#             `systemctl is-system-running --wait` to report `running`
#   --force   rebuild even if the cached image is current
#
# Environment:
#   KILN_BASE_IMAGE     image name (default localhost/kiln-node:bookworm)
#   KILN_DEBIAN_MIRROR  Debian mirror URL (default: read from /etc/apt, else
#                       http://deb.debian.org/debian)
#   KILN_CACHE_DIR      work/cache dir (default /var/tmp/kiln)
set -euo pipefail

# Bump when the build steps change in a way that changes the image.
readonly SCRIPT_VERSION=2
readonly SUITE=bookworm
readonly VARIANT=minbase
readonly PACKAGES=(
    python3 python3-apt          # Ansible
    systemd systemd-sysv dbus    # real init + services (hostnamectl/timedatectl need dbus)
    iproute2 iputils-ping procps # networking / process tools roles and tests use
    ca-certificates gnupg sudo kmod
    openssh-server               # the lab reaches its hosts over SSH, as Ansible reaches a real cluster
)
# systemd already skips what cannot work in a container (remount-fs, getty,
# udev, kernel mounts, ...: ConditionVirtualization=!container), so an
# unmasked image reaches `running`. Masked only: the apt timers, which would
# take the dpkg lock in the middle of a molecule converge or a lab run.
readonly MASKED_UNITS=(apt-daily.timer apt-daily-upgrade.timer)

readonly PREFIX='[base-image]'
log() { printf '%s %s\n' "$PREFIX" "$*"; }
die() { printf '%s ERROR: %s\n' "$PREFIX" "$*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

check=0
force=0
for arg in "$@"; do
    case "$arg" in
        --check) check=1 ;;
        --force) force=1 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument: $arg (see --help)" ;;
    esac
done

IMAGE="${KILN_BASE_IMAGE:-localhost/kiln-node:bookworm}"
CACHE_DIR="${KILN_CACHE_DIR:-/var/tmp/kiln}"
readonly LABEL=io.kiln.base-image.key

[[ ${EUID} -eq 0 ]] || die "must run as root (debootstrap and the lab's podman run as root); try: sudo $0 $*"
for cmd in podman debootstrap python3 sha256sum; do
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd not found; run scripts/host-prereqs.sh first"
done

# --- mirror -----------------------------------------------------------------
# First `deb` source for $SUITE in sources.list or sources.list.d/*.{list,sources}.
detect_mirror() {
    python3 - "$SUITE" <<'PY'
import glob, re, sys
suite = sys.argv[1]
files = ["/etc/apt/sources.list"] + sorted(
    glob.glob("/etc/apt/sources.list.d/*.list") + glob.glob("/etc/apt/sources.list.d/*.sources"))
for path in files:
    try:
        text = open(path).read()
    except OSError:
        continue
    if path.endswith(".sources"):
        for stanza in re.split(r"\n\s*\n", text):
            fields, key = {}, None
            for line in stanza.splitlines():
                if line.startswith("#") or not line.strip():
                    continue
                if line[0] in " \t" and key:
                    fields[key] += " " + line.strip()
                    continue
                key, _, val = line.partition(":")
                key = key.strip().lower()
                fields[key] = val.strip()
            if ("deb" in fields.get("types", "").split()
                    and suite in fields.get("suites", "").split()
                    and fields.get("enabled", "yes").lower() != "no"
                    and fields.get("uris")):
                print(fields["uris"].split()[0]); sys.exit(0)
    else:
        for line in text.splitlines():
            line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
            if len(line) >= 3 and line[0] == "deb" and line[2] == suite:
                print(line[1]); sys.exit(0)
sys.exit(1)
PY
}

if [[ -n "${KILN_DEBIAN_MIRROR:-}" ]]; then
    MIRROR="$KILN_DEBIAN_MIRROR"
elif ! MIRROR="$(detect_mirror)"; then
    MIRROR=http://deb.debian.org/debian
fi
MIRROR="${MIRROR%/}"

# --- cache key --------------------------------------------------------------
pkg_csv="$(IFS=,; echo "${PACKAGES[*]}")"
KEY="$(printf 'v=%s\nsuite=%s\nvariant=%s\npkgs=%s\nmask=%s\n' \
    "$SCRIPT_VERSION" "$SUITE" "$VARIANT" "$pkg_csv" "${MASKED_UNITS[*]}" \
    | sha256sum | cut -c1-16)"

image_key() {
    podman image inspect --format "{{ index .Labels \"$LABEL\" }}" "$IMAGE" 2>/dev/null || true
}

# --- check ------------------------------------------------------------------
check_image() {
    local name="kiln-base-check-$$" state
    log "check: starting ${name} from ${IMAGE}"
    # shellcheck disable=SC2064  # expand $name now
    trap "podman rm -f -t 0 '$name' >/dev/null 2>&1 || true" EXIT
    podman run -d --name "$name" --systemd=always "$IMAGE" >/dev/null \
        || die "check: podman run failed; see scripts/host-prereqs.sh for the podman settings this needs"
    # Right after start systemd's bus may not exist yet ("Failed to connect to
    # bus"): retry until --wait returns a settled state.
    local deadline=$((SECONDS + 120))
    while true; do
        state="$(timeout 120 podman exec "$name" systemctl is-system-running --wait 2>/dev/null || true)"
        case "$state" in
            running|degraded|maintenance|stopping) break ;;
        esac
        if ((SECONDS >= deadline)); then
            state="${state:-no answer} after 120 s"
            break
        fi
        sleep 1
    done
    if [[ "$state" != "running" ]]; then
        log "check: failed units:"
        podman exec "$name" systemctl --failed --no-legend --plain >&2 || true
        podman exec "$name" journalctl -b -p warning --no-pager -n 40 >&2 || true
        die "check: system state is '${state}', expected 'running' (mask the failing units above in MASKED_UNITS)"
    fi
    podman exec "$name" python3 -c 'import apt' \
        || die "check: python3-apt is not importable in the image"
    podman exec "$name" sh -c 'systemctl is-active --quiet ssh && test -s /etc/ssh/ssh_host_ed25519_key.pub' \
        || die "check: sshd is not running with its own host key in the image"
    podman rm -f -t 0 "$name" >/dev/null
    trap - EXIT
    log "check: ok, systemctl is-system-running -> running"
}

# --- build ------------------------------------------------------------------
mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/base-image.lock"
if ! flock -n 9; then
    log "another build holds $CACHE_DIR/base-image.lock; waiting (up to 10 min)"
    flock -w 600 9 || die "timed out waiting for $CACHE_DIR/base-image.lock"
fi

if [[ $force -eq 0 && "$(image_key)" == "$KEY" ]]; then
    log "cached: ${IMAGE} is current (key ${KEY}); nothing to build"
else
    start=$SECONDS
    rootfs="$CACHE_DIR/rootfs-$KEY"
    debcache="$CACHE_DIR/debootstrap-cache"
    mkdir -p "$debcache"
    rm -rf "$rootfs"
    # shellcheck disable=SC2064  # expand $rootfs now
    trap "rm -rf '$rootfs'" EXIT
    log "debootstrap ${SUITE} (${VARIANT}) from ${MIRROR} into ${rootfs} (packages: ${pkg_csv})"
    if ! debootstrap --variant="$VARIANT" --include="$pkg_csv" --cache-dir="$debcache" \
            "$SUITE" "$rootfs" "$MIRROR" >"$CACHE_DIR/debootstrap.log" 2>&1; then
        tail -n 30 "$CACHE_DIR/debootstrap.log" >&2
        [[ -f "$rootfs/debootstrap/debootstrap.log" ]] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
        die "debootstrap failed (full log: $CACHE_DIR/debootstrap.log); check that ${MIRROR} is reachable or set KILN_DEBIAN_MIRROR"
    fi

    log "configuring rootfs (mask ${#MASKED_UNITS[@]} units, empty machine-id, clean apt cache)"
    for unit in "${MASKED_UNITS[@]}"; do
        ln -sfn /dev/null "$rootfs/etc/systemd/system/$unit"
    done
    # systemd generates a fresh machine-id per container at boot
    : >"$rootfs/etc/machine-id"
    rm -f "$rootfs/var/lib/dbus/machine-id"
    rm -f "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin
    # podman manages these per container
    : >"$rootfs/etc/hostname"
    rm -f "$rootfs/etc/resolv.conf"
    # No SSH host keys in the image: every container makes its own at first boot (the lab reads
    # them through podman and pins them in its known_hosts). Key-only login.
    rm -f "$rootfs"/etc/ssh/ssh_host_*
    mkdir -p "$rootfs/etc/systemd/system/ssh.service.d" "$rootfs/etc/ssh/sshd_config.d"
    cat >"$rootfs/etc/systemd/system/ssh.service.d/kiln-host-keys.conf" <<'UNIT'
# kiln base image: generate this container's SSH host keys before sshd's config test.
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
UNIT
    cat >"$rootfs/etc/ssh/sshd_config.d/kiln.conf" <<'CONF'
# kiln base image: key-based login only.
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UseDNS no
CONF

    old_id="$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
    log "importing into podman as ${IMAGE}"
    tar -C "$rootfs" --numeric-owner -c . | podman import --quiet \
        --change 'CMD ["/sbin/init"]' \
        --change 'STOPSIGNAL SIGRTMIN+3' \
        --change "LABEL ${LABEL}=${KEY}" \
        --change "LABEL io.kiln.base-image.packages=${pkg_csv}" \
        --change "LABEL io.kiln.base-image.script-version=${SCRIPT_VERSION}" \
        - "$IMAGE" >/dev/null \
        || die "podman import failed"
    rm -rf "$rootfs"
    trap - EXIT
    [[ "$(image_key)" == "$KEY" ]] || die "imported image does not carry label ${LABEL}=${KEY}"
    if [[ -n "$old_id" ]]; then
        # drop the superseded image unless a container still uses it
        podman rmi "$old_id" >/dev/null 2>&1 || true
    fi
    log "built ${IMAGE} (key ${KEY}) in $((SECONDS - start)) s"
fi

if [[ $check -eq 1 ]]; then
    check_image
fi
