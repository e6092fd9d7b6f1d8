#!/usr/bin/env bash
# collection-checks.sh - the Ansible ecosystem's own validators on the built kiln.cluster collection, as a
# user's CI would run them. scripts/test.sh runs each step as a stage; each can run alone.
#
# Usage: scripts/collection-checks.sh build|sanity|importer
#   build     ansible-galaxy collection build into $KILN_CACHE_DIR/collection-<checkout hash>/dist, installed
#             (--no-deps --offline) beside it in installed/ansible_collections/kiln/cluster: outside the
#             checkout, since ansible-test takes the files of a git work tree from git and the copy is ignored
#   sanity    ansible-test sanity --python 3.11 on that installed copy, no container. ansible-test makes one
#             virtualenv per sanity test with the requirements it pins (ansible_test/_data/requirements/
#             sanity.*.txt) from PyPI, cached under .cache/ansible-test/.ansible/test/venv/ (the shared
#             .venv is never changed). Those virtualenvs start without pip, and ansible-test fetches its pip
#             bootstrap script from ci-files.testing.ansible.com, which is not a package registry: the
#             bootstrap used instead (scripts/ansible-test-get-pip.py) installs pip from the pip wheel on PyPI.
#             Findings the project accepts are in tests/sanity/ignore-<ansible-core>.txt, each with its reason.
#   importer  galaxy-importer (the pin is pyproject.toml's `galaxy` extra) on the tarball, in its own
#             virtualenv (.cache/venvs/galaxy-importer): galaxy-importer pins attrs<24, older than the main
#             .venv's. Its configuration (scripts/galaxy-importer.cfg) skips what scripts/test.sh already runs.
#
# Environment: PYTHON (default: .venv/bin/python of the checkout), KILN_CACHE_DIR (default /var/tmp/kiln).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/.venv/bin"
PY=${PYTHON:-$BIN/python}
WORK="${KILN_CACHE_DIR:-/var/tmp/kiln}/collection-$(printf '%s' "$ROOT" | sha1sum | cut -c1-12)"
DIST="$WORK/dist"
INSTALLED="$WORK/installed"
COLLECTION="$INSTALLED/ansible_collections/kiln/cluster"
SANITY_HOME="$ROOT/.cache/ansible-test"
IMPORTER_VENV="$ROOT/.cache/venvs/galaxy-importer"
PIP_VERSION=24.2  # ansible-test's bootstrap pip (get_venv_packages() in ansible_test/_internal/python_requirements.py)

log() { printf '[collection] %s\n' "$*"; }

tarball() {
    local found=("$DIST"/kiln-cluster-*.tar.gz)
    [ -e "${found[0]}" ] || { echo "no collection tarball in $DIST: run $0 build first" >&2; exit 2; }
    printf '%s\n' "${found[0]}"
}

build() {
    rm -rf "$DIST" "$INSTALLED"
    mkdir -p "$DIST" "$INSTALLED"
    "$BIN/ansible-galaxy" collection build --output-path "$DIST" "$ROOT" >/dev/null
    local tgz
    tgz=$(tarball)
    ANSIBLE_COLLECTIONS_PATH="$INSTALLED" "$BIN/ansible-galaxy" collection install "$tgz" -p "$INSTALLED" --no-deps --offline >/dev/null
    log "built $(basename "$tgz") ($(tar tzf "$tgz" | wc -l) entries), installed in $COLLECTION"
}

sanity() {
    [ -d "$COLLECTION" ] || { echo "no installed collection at $COLLECTION: run $0 build first" >&2; exit 2; }
    local cache="$SANITY_HOME/.ansible/test/cache"
    local bootstrap="$cache/get_pip_${PIP_VERSION//./_}.py"
    mkdir -p "$cache"
    if ! compgen -G "$cache/pip-$PIP_VERSION-*.whl" >/dev/null; then
        "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --dest "$cache" "pip==$PIP_VERSION"
    fi
    cp "$ROOT/scripts/ansible-test-get-pip.py" "$bootstrap"
    # ansible-test keeps its sanity virtualenvs and the bootstrap under ~/.ansible/test: HOME is the cache.
    (cd "$COLLECTION" && HOME="$SANITY_HOME" "$BIN/ansible-test" sanity --python 3.11 --color no)
}

importer() {
    local pin
    pin=$("$PY" -c 'import tomllib,sys; print(*tomllib.load(open(sys.argv[1],"rb"))["project"]["optional-dependencies"]["galaxy"])' "$ROOT/pyproject.toml")
    local core
    core=$("$BIN/python" -c 'from importlib.metadata import version; print(version("ansible-core"))')
    local stamp="$IMPORTER_VENV/.installed-${pin// /_}-ansible-core-$core"
    if [ ! -e "$stamp" ]; then
        log "installing $pin with ansible-core $core into ${IMPORTER_VENV#"$ROOT"/}"
        rm -rf "$IMPORTER_VENV"
        "$PY" -m venv "$IMPORTER_VENV"
        # shellcheck disable=SC2086  # the pin list is split on purpose
        "$IMPORTER_VENV/bin/pip" install --quiet --disable-pip-version-check $pin "ansible-core==$core"
        touch "$stamp"
    fi
    local tgz
    tgz=$(tarball)
    # It writes importer_result.json into the working directory: run it beside the tarball.
    # It logs some refusals (a plugin ansible-doc cannot document) as ERROR and still "completes successfully";
    # Galaxy shows them to every user, so any ERROR line fails this step.
    (cd "$WORK" && PATH="$IMPORTER_VENV/bin:$PATH" GALAXY_IMPORTER_CONFIG="$ROOT/scripts/galaxy-importer.cfg" \
        "$IMPORTER_VENV/bin/python" -m galaxy_importer.main "$tgz") 2>&1 | tee "$WORK/importer.log"
    if grep -q '^ERROR' "$WORK/importer.log"; then
        echo "galaxy-importer reported errors (above, and in $WORK/importer.log)" >&2
        exit 1
    fi
}

case "${1:-}" in
    build) build ;;
    sanity) sanity ;;
    importer) importer ;;
    *) echo "usage: $0 build|sanity|importer" >&2; exit 2 ;;
esac
