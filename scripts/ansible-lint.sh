#!/usr/bin/env bash
# ansible-lint.sh - the production profile over the roles, the playbooks and ansible/, one run per tree (the three
# trees in one run took 230 s on a 2-core machine, one after the other 128 s: docs/testing.md). Every tree is
# linted even if an earlier one failed; the exit status is non-zero if any failed. Used by `make lint` and
# scripts/test.sh.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT/ansible" || exit 2
rc=0
for tree in ../roles ../playbooks ../ansible; do
    "$ROOT/.venv/bin/ansible-lint" --profile production "$tree" || rc=1
done
exit "$rc"
