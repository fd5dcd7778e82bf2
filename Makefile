# The two set-up commands: `make run` and `make test`. Both build .venv when it is missing or
# older than pyproject.toml, install the console's npm packages (Chart.js, pinned in
# package-lock.json) and bundle its scripts and styles into static/gen/. PostgreSQL:
# DATABASE_URL when set, else an embedded one under var/. The browser tests drive Debian's
# Chromium (/usr/bin/chromium; .ci/run installs it) and are skipped, saying so, without it.

VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
# The benchmark's own environment: Pauta plus the peer queues it is measured against.
BENCH_VENV := .venv-bench
BENCH_INSTALLED := $(BENCH_VENV)/.installed
NODE_INSTALLED := node_modules/.package-lock.json
ASSETS := static/gen/console.js static/gen/hr.js static/gen/pauta.js
# The message catalogues: .po files kept in the repository, compiled to .mo (not kept).
LOCALES := pt_BR en
CATALOGUES := $(LOCALES:%=translations/%/LC_MESSAGES/messages.mo)
# Where `make catalogues` extracts user-visible text from (babel.cfg says how to read each).
I18N_SOURCES := app.py blueprints console hr models templates
ASSET_SOURCES := $(wildcard static/console/* static/hr/*) static/confirm.js static/pauta.css blueprints/assets.py

.PHONY: run test lint bench soak chaos mutants clean catalogues

run: $(INSTALLED) $(ASSETS) $(CATALOGUES)
	$(PY) -m devtools.run

test: $(INSTALLED) $(ASSETS) $(CATALOGUES) lint
	$(PY) -m devtools.database $(VENV)/bin/pytest $(PYTEST_ARGS)

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Faults injected into a long run on a PostgreSQL cluster of its own (see bench/chaos.py).
# Then the failover test's long version: ten failovers of each replication mode, each after
# 5,000 jobs (tests/test_failover.py; docs/howto/high-availability.md).
chaos: $(INSTALLED)
	$(PY) -m bench.chaos $(CHAOS_ARGS)
	PAUTA_FAILOVER_ROUNDS=10 PAUTA_FAILOVER_RUNS_BEFORE=5000 $(PY) -m devtools.database \
		$(VENV)/bin/pytest tests/test_failover.py -s

# Named mutants of the engine, each of which some test must kill (tests/mutants.toml).
mutants: $(INSTALLED) $(ASSETS) $(CATALOGUES)
	$(PY) -m devtools.database $(PY) -m devtools.mutants $(MUTANTS)

# Each system at its documented defaults and at its best tuning, like-for-like ratios only
# (bench/run.py; docs/benchmarks.md). BENCH_ARGS="--label A" tags the lines of one run.
bench: $(BENCH_INSTALLED)
	$(BENCH_VENV)/bin/python -m devtools.database $(BENCH_VENV)/bin/python -m bench.run $(BENCH_ARGS)

# A month of churn, compressed, on a PostgreSQL cluster of its own (bench/soak.py): 5,000,000
# jobs unless SOAK_ARGS="--jobs N"; SOAK_ARGS="--autovacuum off" for the VACUUM fallback.
soak: $(BENCH_INSTALLED)
	$(BENCH_VENV)/bin/python -m bench.soak $(SOAK_ARGS)

$(INSTALLED): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(NODE_INSTALLED): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

$(ASSETS) &: $(INSTALLED) $(NODE_INSTALLED) $(ASSET_SOURCES)
	$(PY) -m blueprints.assets

translations/%/LC_MESSAGES/messages.mo: translations/%/LC_MESSAGES/messages.po $(INSTALLED)
	$(VENV)/bin/pybabel compile --statistics -l $* -i $< -o $@

# After adding or changing user-visible text: extract every message and merge it into each
# language's .po (devtools/catalogues.py; docs/howto/translate.md).
catalogues: $(INSTALLED)
	$(PY) -m devtools.catalogues update

$(BENCH_INSTALLED): pyproject.toml bench/requirements-peers.txt
	test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e . -r bench/requirements-peers.txt
	touch $@

clean:
	rm -rf $(VENV) .venv-bench node_modules static/gen test-artifacts
