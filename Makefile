# The two set-up commands: `make run` and `make test`. Both build .venv when it is missing or
# older than pyproject.toml. PostgreSQL: DATABASE_URL when set, else an embedded one under var/.

VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: run test lint bench clean

run: $(INSTALLED)
	$(PY) -m devtools.run

test: $(INSTALLED) lint
	$(PY) -m devtools.database $(VENV)/bin/pytest $(PYTEST_ARGS)

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(INSTALLED)
	$(PY) -m bench.run $(BENCH_ARGS)

$(INSTALLED): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

clean:
	rm -rf $(VENV) .venv-bench
