# Two entry points for a newcomer: `make demo` and `make test`. Both (re)build .venv from
# pyproject.toml (all extras) at the exact versions of envs/constraints.txt when it is missing or
# older than either file.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.benchlib-installed
CORES ?= 2
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: venv demo demo-digest report test test-fast lint format docs dry-run slurm-profile bench bench-gpu clean

$(STAMP): pyproject.toml envs/constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run make PYTHON=python3"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip >/dev/null
	$(BIN)/pip install -c envs/constraints.txt -e '.[all,dev]'
	touch $(STAMP)

venv: $(STAMP)

# The demo ends with what the LIGHTYEAR paper claims, tested on its cells (reports/mnist5k_claims.md)
# and by checking its numbers against the published reference digest (one line:
# "116 of 116 cells match the reference numbers", or which cells and provenance fields differ).
DEMO_DIGEST := config/reference/demo_digest.json

# Cells fork from one warm process that has imported torch and the engine (`benchlib forkserver`):
# the same bytes, a third less CPU per demo cell. FORK= runs each cell in a fresh process.
FORK ?= benchlib forkserver --

demo: $(STAMP)
	$(FORK) snakemake --configfile=config/demo.yaml --cores $(CORES) --rerun-incomplete
	benchlib claims reports/mnist5k_claims.csv
	benchlib verify results/runs/mnist5k --digest $(DEMO_DIGEST)

# The self-contained HTML report of what a config has built (default the demo; CONFIG= for the
# paper grids): tables with their numbers, figures, paper comparisons, a page of what is missing.
CONFIG ?= config/demo.yaml
REPORT ?= results/report.html

report: $(STAMP)
	benchlib html-report $(if $(CONFIG),--config $(CONFIG)) --out $(REPORT) --cores $(CORES)

# After a change that is meant to change the demo's numbers: rewrite the reference digest from a
# finished `make demo` (portable CPU kernels) and commit it with the change.
demo-digest: $(STAMP)
	benchlib digest results/runs/mnist5k --out $(DEMO_DIGEST) \
	  --description "make demo (config/demo.yaml), portable CPU kernels, 1 thread per cell"

# Tests run on $(CORES) workers, each test module on one worker (its fixtures, e.g. the local SLURM
# cluster, stay in one process). tests/conftest.py groups the modules that read one shared workflow
# run onto one worker (built once) and hands out the heavy groups first (--no-loadscope-reorder).
test: $(STAMP)
	pytest -ra --durations=15 -n $(CORES) --dist loadfile --no-loadscope-reorder

# The quick loop while editing: unit tests only (no workflow, SLURM or slow subprocess tests).
test-fast: $(STAMP)
	pytest -ra --durations=10 -n $(CORES) --dist loadfile --no-loadscope-reorder -m "not workflow and not slurm and not slow"

lint: $(STAMP)
	ruff check src tests
	ruff format --check src tests
	snakefmt --check Snakefile workflow/rules
	snakemake --lint --configfile=config/demo.yaml
	lint-imports

format: $(STAMP)
	ruff check --fix src tests
	ruff format src tests
	snakefmt Snakefile workflow/rules

# The generated pages of docs/: the module map (docs/develop/modules.md, from the module
# docstrings), the components (docs/guide/components.md, from the registries) and the parameter
# reference (docs/guide/parameters.md); tests/test_docs_gen.py fails when one is out of date.
docs: $(STAMP)
	benchlib docs

dry-run: $(STAMP)
	snakemake -n --configfile=config/demo.yaml

# One-time: make `snakemake --profile slurm` find this clone's profiles/slurm. Snakemake looks up a
# bare profile name only in the working directory, $XDG_CONFIG_HOME/snakemake (default
# ~/.config/snakemake) and /etc/xdg/snakemake; this links the user directory's entry here.
SNAKEMAKE_PROFILES := $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/snakemake

slurm-profile:
	@link="$(SNAKEMAKE_PROFILES)/slurm"; target="$(CURDIR)/profiles/slurm"; \
	if [ -L "$$link" ] && [ "$$(readlink "$$link")" = "$$target" ]; then \
	  echo "$$link already links to $$target"; \
	elif [ -e "$$link" ] || [ -L "$$link" ]; then \
	  echo "error: $$link already exists and is not this clone's profile; move it away (or use --profile $$target) and rerun make slurm-profile" >&2; \
	  exit 1; \
	else \
	  mkdir -p "$(SNAKEMAKE_PROFILES)" && ln -s "$$target" "$$link" && \
	  echo "linked $$link -> $$target; now: snakemake --profile slurm tables/femnist_ana.tex"; \
	fi

bench: $(STAMP)
	benchlib bench overhead
	benchlib bench flower

# On a GPU machine, with its own Python's torch, numpy and pandas (no venv, no package index):
# the GPU measurements of docs/guide/performance.md - paper-scale cells (bare, sequential,
# batched, tf32, bf16, cells per GPU, projected GPU-hours) and streamed vs resident training
# with GPU utilisation.
GPU_PYTHON ?= python3
bench-gpu:
	PYTHONPATH=src $(GPU_PYTHON) -m benchlib.cli bench scale --device cuda
	PYTHONPATH=src $(GPU_PYTHON) -m benchlib.cli bench stream --gb 8 --device cuda

clean:
	rm -rf results/data results/splits results/runs results/checkpoints results/collected
	rm -f tables/*.tex figures/*.pdf figures/*.png
