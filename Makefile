# The two commands of the quick start:
#   make book   set up .venv if needed, execute every notebook, render HTML into _build/html
#   make test   set up .venv if needed, run unit tests, nbval over every notebook, and the build check
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: book test venv clean lab refresh bench bench-accelerator mutation test-portable probe generate

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	@touch $(STAMP)

# The execution cache's step drops outputs made before a library change, then executes the notebooks the cache lacks
# two at a time (the build itself runs them one after the other); the build then takes them from the cache.
book: $(STAMP) node_modules/.installed
	@$(BIN)/python -m scaling_lib.book.execution_cache
	$(BIN)/jupyter-book build . -W -n --keep-going
	@$(BIN)/python -m scaling_lib.book.execution_cache --built
	@echo "The book is at: file://$(CURDIR)/_build/html/index.html"

# Pyodide (pinned in package-lock.json), which the answer boxes load into the page; npm takes it from its cache after
# the first install. book/_ext/answer_boxes.py copies its core files into _build/html/_static/pyodide.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --prefer-offline
	@touch $@

test: $(STAMP) node_modules/.installed
	SCALING_BOOK_FUZZ=thorough $(BIN)/python -m pytest -n 2 --dist loadfile --nbval --nbval-current-env tests chapters book

# Portability check (not part of `make test`): nbval over the notebooks that run JAX, under a second XLA CPU
# configuration: at most AVX2 in XLA's code generation and in oneDNN, OpenBLAS's AVX2 (Haswell) kernels for NumPy, one
# thread, one core where taskset exists. A stored output that depends on the CPU's floating-point kernels fails here
# even on the machine that stored it. XLA_FLAGS already set are kept (the device count is appended by the set-up).
PORTABLE_NB ?= $(shell grep -l -E '"(import jax|from jax|from scaling_lib\.tiny|from scaling_lib import tiny|import qwix|from flax)' chapters/*.ipynb book/*.ipynb)
PORTABLE_ENV := XLA_FLAGS="$$XLA_FLAGS --xla_cpu_max_isa=AVX2 --xla_cpu_multi_thread_eigen=false" \
	ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
	$(if $(shell command -v taskset),taskset -c $$($(BIN)/python -c 'import os; print(min(os.sched_getaffinity(0)))'),)
test-portable: $(STAMP)
	$(PORTABLE_ENV) $(BIN)/python -m pytest -p no:cacheprovider --nbval --nbval-current-env $(PORTABLE_NB)

# Re-execute notebooks in place (all of them, or NB=chapters/01_rooflines.ipynb) to refresh their stored outputs.
NB ?= chapters/*.ipynb book/*.ipynb
refresh: $(STAMP)
	$(BIN)/python tools/refresh_notebooks.py $(NB)

# Regenerate what is generated from other files: the library code the chapters write out in saved cells
# (tools/save_cells.py), then the "Defined in" back-links and the library index (tools/backlinks.py), then the
# command-line reference page (scaling_lib.book.cli_reference). The tests fail when any of them is out of date.
generate: $(STAMP)
	$(BIN)/python tools/save_cells.py
	$(BIN)/python tools/backlinks.py
	$(BIN)/python -m scaling_lib.book.cli_reference
	$(BIN)/python tools/exercise_cells.py

lab: $(STAMP)
	$(BIN)/python -m pip install --quiet jupyterlab==4.6.6
	$(BIN)/jupyter lab chapters/

clean:
	rm -rf _build

# Benchmarks: not tests, not part of `make test`.
bench: $(STAMP)
	$(BIN)/python bench/bench_serving.py
	$(BIN)/python bench/bench_report.py
	$(BIN)/python bench/bench_plan.py
	$(BIN)/python bench/bench_cpu_roofline.py

# The H200 measurements of scaling_lib/data/accelerator_measurements.csv, repeated on the GPU or TPU of this machine
# (not part of `make bench` or `make test`; needs an accelerator): writes bench/results/accelerator-<date>.csv.
bench-accelerator: $(STAMP)
	@mkdir -p bench/results
	SCALING_BOOK_DEVICES=accelerator $(BIN)/python bench/bench_accelerator.py --out bench/results/accelerator-$$(date +%F).csv

# Mutation testing of the closed-form modules (not part of `make test`). Installs the dev extra (mutmut, hypothesis)
# into .venv, generates every mutant of scaling_lib's top-level modules, runs the `-m "not tiny"` tests against a
# seeded random sample of 600 of them (15 to 30 minutes on 2 shared cores; MUTATION_ARGS=--all tests all of them, about
# 15,300, some 25 times as long) and prints the score with its confidence interval and the survivors. mutmut runs in a fresh copy of the tree in
# .mutation/, which the script makes and alone removes (never a folder of yours). See tools/mutation_score.py.
MUTATION_ARGS ?= --sample 600
mutation: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-build-isolation -e ".[dev]"
	$(BIN)/python -m pip check
	$(BIN)/python tools/mutation_score.py $(MUTATION_ARGS)

# Bad-input probes (not part of `make test`): a catalogue of bad inputs through every public function, the command
# line and the tiny JAX entry points, each under a 1-second limit; prints how many get a clear error and every one
# that does not, and fails if any is silently accepted or hangs. See tools/probe_bad_inputs.py.
probe: $(STAMP)
	$(BIN)/python tools/probe_bad_inputs.py
