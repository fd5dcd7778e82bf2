# The two set-up commands: `make run` and `make test`. Both build .venv when it is missing or
# older than pyproject.toml. PostgreSQL: DATABASE_URL when set, else an embedded one under var/.

VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
# The benchmark's own environment: Pauta plus the peer queues it is measured against.
BENCH_VENV := .venv-bench
BENCH_INSTALLED := $(BENCH_VENV)/.installed

.PHONY: run test lint bench clean

run: $(INSTALLED)
	$(PY) -m devtools.run

test: $(INSTALLED) lint
	$(PY) -m devtools.database $(VENV)/bin/pytest $(PYTEST_ARGS)

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(BENCH_INSTALLED)
	$(BENCH_VENV)/bin/python -m devtools.database $(BENCH_VENV)/bin/python -m bench.run $(BENCH_ARGS)

$(INSTALLED): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(BENCH_INSTALLED): pyproject.toml bench/requirements-peers.txt
	test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e . -r bench/requirements-peers.txt
	touch $@

clean:
	rm -rf $(VENV) .venv-bench
