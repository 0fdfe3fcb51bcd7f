# cwctl: two set-up commands on a fresh machine: `make demo`, `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP_RUN  := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test

.PHONY: demo test bench lint completions man clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,dev]'
	touch $@ $(STAMP_RUN)

# The demo's success is a report; exit 3 ("problems found") is what a faulty fabric gives.
demo: $(STAMP_RUN)
	@$(BIN)/cwctl scan --sim --fault switch:spine2:congested --jobs 8; rc=$$?; \
	  if [ $$rc -eq 0 ] || [ $$rc -eq 3 ]; then exit 0; else exit $$rc; fi

# Three workers, each module whole on one (its module-scoped testbed, daemons and order
# kept): the namespace-fabric modules mostly wait (scans, holds, iperf3), so on 2 cores
# they overlap with the CPU-bound unit tests (1 380 tests: 20.4 min one at a time, 11.5 min
# on three workers, on this shared machine at load 7-12).
TEST_WORKERS ?= 3

# Then the `quiet` tests alone: every namespace "host" and switch shares the machine's
# cores, and a clock bound in nanoseconds measures the CPUs beside the fabric (one
# congested-fabric scan read 157 ns beside three workers, 15-86 ns alone).
test: $(STAMP_TEST)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not quiet"
	$(BIN)/python -m pytest -q -m quiet

bench: $(STAMP_TEST)
	$(BIN)/python -m bench

lint: $(STAMP_TEST)
	$(BIN)/ruff check cwctl tests bench
	$(BIN)/ruff format --check cwctl tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy cwctl

completions: $(STAMP_RUN)
	$(BIN)/python -m cwctl.cli.completions_gen completions

# cwctl(1), generated from the click tree whenever asked, so never stale: man -l build/man/cwctl.1
# (install: copy it to /usr/local/share/man/man1/)
man: $(STAMP_RUN)
	mkdir -p build/man
	$(BIN)/python -m cwctl.cli.manpage > build/man/cwctl.1

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
