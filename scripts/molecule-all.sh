#!/usr/bin/env bash
# molecule-all.sh - run `molecule test --all` (every scenario) for kiln's roles, one after the other,
# and print a PASS/FAIL line with the time taken per role.
#
# Usage: scripts/molecule-all.sh [-v|--verbose] [--no-setup] [ROLE...]
#   ROLE          role names under roles/ (default: every role that has
#                 tasks/main.yml and molecule/default/molecule.yml)
#   -v --verbose  stream molecule's output (default: write it to
#                 .cache/molecule-logs/<role>.log, show its tail on failure)
#   --no-setup    skip scripts/host-prereqs.sh and scripts/build-base-image.sh
#   --list        print the roles that would run, and exit
#
# Environment: KILN_MOLECULE_TIMEOUT (seconds per role, default 1800), KILN_MOLECULE_JOBS (roles run at once,
# default 2: a scenario spends much of its time waiting on its container, so two lanes use a 2-core machine).
# Exit status: 0 when every role passed, 1 otherwise. The last line reads
# "molecule: N passed, M failed".
set -euo pipefail

readonly PREFIX='[molecule]'
log() { printf '%s %s\n' "$PREFIX" "$*"; }
die() { printf '%s ERROR: %s\n' "$PREFIX" "$*" >&2; exit 2; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOLECULE="$ROOT/.venv/bin/molecule"
LOG_DIR="$ROOT/.cache/molecule-logs"
TIMEOUT="${KILN_MOLECULE_TIMEOUT:-1800}"
JOBS="${KILN_MOLECULE_JOBS:-2}"
# The scenarios that take longest (measured on a 2-core machine): started first.
SLOW_FIRST=(kafka objectstore datamover lustre_server lustre_ha monitoring rdma common lustre_layout lustre_client)

verbose=0
setup=1
list=0
roles=()
for arg in "$@"; do
    case "$arg" in
        -v|--verbose) verbose=1 ;;
        --no-setup) setup=0 ;;
        --list) list=1 ;;
        -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        -*) die "unknown option '$arg' (see --help)" ;;
        *) roles+=("${arg%/}") ;;
    esac
done

[[ -x "$MOLECULE" ]] \
    || die "$MOLECULE not found; create the venv: python3 -m venv .venv && .venv/bin/pip install -e '.[ops,test]'"
# molecule runs ansible-config/ansible-playbook/pytest from PATH
export PATH="$ROOT/.venv/bin:$PATH"

if ((${#roles[@]} == 0)); then
    for f in "$ROOT"/roles/*/molecule/default/molecule.yml; do
        [[ -e "$f" ]] || continue
        r="${f#"$ROOT/roles/"}"
        r="${r%%/*}"
        if [[ ! -f "$ROOT/roles/$r/tasks/main.yml" ]]; then
            log "skip $r (no tasks/main.yml: not a role)" >&2
            continue
        fi
        roles+=("$r")
    done
    ((${#roles[@]})) || die "no roles/*/molecule/default/molecule.yml found under $ROOT"
fi

if [[ $list -eq 1 ]]; then
    printf '%s\n' "${roles[@]}"
    exit 0
fi

# A scenario's platform (= podman container) names must start with the role's
# name: container names are global, and roles copied from roles/_template
# must not collide with each other.
check_names() {  # check_names ROLE
    "$ROOT/.venv/bin/python" - "$1" "$ROOT/roles/$1/molecule/default/molecule.yml" <<'PY'
import sys, yaml
role, path = sys.argv[1], sys.argv[2]
want = role.lstrip("_")
with open(path) as f:
    data = yaml.safe_load(f) or {}
bad = [p.get("name", "") for p in data.get("platforms") or [] if not str(p.get("name", "")).startswith(want)]
if bad:
    print(f"platform name(s) {bad} in {path} must start with '{want}' (e.g. {want}-instance)")
    sys.exit(1)
PY
}

if [[ $setup -eq 1 ]]; then
    "$ROOT/scripts/host-prereqs.sh"
    "$ROOT/scripts/build-base-image.sh"
fi

mkdir -p "$LOG_DIR"
lock_dir=/var/tmp/kiln/locks
mkdir -p "$lock_dir" 2>/dev/null || lock_dir="$LOG_DIR"

# run_role ROLE RESULT_FILE: one role's `molecule test --all`; writes "rc seconds message" to RESULT_FILE.
run_role() {
    local role=$1 out=$2 dir="$ROOT/roles/$1" logf="$LOG_DIR/$1.log" start=$SECONDS rc=0 msg
    if [[ ! -f "$dir/molecule/default/molecule.yml" ]]; then
        msg="no scenario at roles/$role/molecule/default/molecule.yml"
        rc=2
    elif ! msg="$(check_names "$role")"; then
        rc=2
    else
        log "$role: molecule test (log: ${logf#"$ROOT/"})"
        # One run per role at a time on this machine (its container name is fixed).
        (
            flock -w "$TIMEOUT" 9 || { echo "timed out waiting for $lock_dir/molecule-$role.lock" >&2; exit 3; }
            cd "$dir"
            if [[ $verbose -eq 1 ]]; then
                timeout "$TIMEOUT" "$MOLECULE" test --all 2>&1 | tee "$logf"
                exit "${PIPESTATUS[0]}"
            else
                NO_COLOR=1 ANSIBLE_NOCOLOR=1 timeout "$TIMEOUT" "$MOLECULE" test --all >"$logf" 2>&1
            fi
        ) 9>"$lock_dir/molecule-$role.lock" || rc=$?
        msg="log ${logf#"$ROOT/"}"
        [[ $rc -eq 124 ]] && msg="timed out after ${TIMEOUT} s; $msg"
    fi
    printf '%s %s %s\n' "$rc" "$((SECONDS - start))" "$msg" >"$out"
    if [[ $rc -ne 0 && $verbose -eq 0 && -f "$logf" && $rc -ne 2 ]]; then
        log "$role: last lines of $logf:"
        tail -n 40 "$logf" >&2
    fi
}

# Scenarios run $JOBS at a time (each role has its own containers and lock); the slowest roles start first so
# the lanes finish together.
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
ordered=()
for role in "${SLOW_FIRST[@]}"; do
    [[ " ${roles[*]} " == *" $role "* ]] && ordered+=("$role")
done
for role in "${roles[@]}"; do
    [[ " ${ordered[*]} " == *" $role "* ]] || ordered+=("$role")
done
for role in "${ordered[@]}"; do
    while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
    run_role "$role" "$results/$role" &
done
wait

passed=0
failed=0
summary=()
for role in "${roles[@]}"; do
    read -r rc secs msg <"$results/$role" || { rc=2; secs=0; msg="no result"; }
    if [[ $rc -eq 0 ]]; then
        passed=$((passed + 1))
        line="$(printf 'PASS  %-28s %5d s' "$role" "$secs")"
    else
        failed=$((failed + 1))
        line="$(printf 'FAIL  %-28s %5d s  (%s)' "$role" "$secs" "$msg")"
    fi
    log "$line"
    summary+=("$line")
done

log "summary:"
for line in "${summary[@]}"; do
    log "  $line"
done
echo "molecule: ${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
