#!/usr/bin/env bash
# test.sh - everything CI runs, in order: lint (ruff, mypy, docs, shellcheck, ansible-lint), the collection's
# validators (ansible-test sanity, galaxy-importer), molecule for every role (two at a time), then pytest: the
# Python-only tests on two workers, then the installed wheel, the data mover against SeaweedFS, the object store's
# rolling restart on real hosts and the lab end to end. Called by `make test` (the README's test command) after the
# venv, host packages, base image and Go tools are in place.
# Every stage runs even if an earlier one failed; the exit status is non-zero if any failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
BIN="$ROOT/.venv/bin"
failed=()

stage() {
    local name=$1; shift
    printf '\n[test] ===== %s: %s\n' "$name" "$*"
    local start=$SECONDS
    if "$@"; then
        printf '[test] %s: ok (%ss)\n' "$name" "$((SECONDS - start))"
    else
        printf '[test] %s: FAILED (%ss)\n' "$name" "$((SECONDS - start))"
        failed+=("$name")
    fi
}

stage ruff "$BIN/ruff" check kiln tests bench policy __main__.py
stage mypy "$BIN/mypy"
stage docs "$BIN/python" -m kiln.docgen --check
stage calibration "$BIN/python" bench/calibration/run.py
stage shellcheck shellcheck scripts/*.sh .ci/run
stage ansible-lint scripts/ansible-lint.sh
# The built kiln.cluster collection, checked by the Ansible ecosystem's own validators (scripts/collection-checks.sh).
stage collection-build scripts/collection-checks.sh build
stage ansible-test-sanity scripts/collection-checks.sh sanity
stage galaxy-importer scripts/collection-checks.sh importer
stage molecule scripts/molecule-all.sh --no-setup
# Tests that need nothing but Python run on two workers (pytest-xdist, a file's tests on one worker); those that
# start servers, podman hosts or the lab run after them, one at a time.
SERIAL=(tests/package tests/dataflow tests/acceptance tests/lab)
stage pytest-parallel "$BIN/pytest" -q -p no:cacheprovider -n "${KILN_TEST_WORKERS:-2}" --dist loadfile \
    tests "${SERIAL[@]/#/--ignore=}"
stage pytest-serial "$BIN/pytest" -q -p no:cacheprovider --durations=15 "${SERIAL[@]}"

if ((${#failed[@]})); then
    printf '\n[test] failed stages: %s\n' "${failed[*]}"
    exit 1
fi
printf '\n[test] all stages passed\n'
