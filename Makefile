# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PG_URL ?= host=127.0.0.1 port=5432 user=postgres dbname=postgres
PYTEST_ARGS ?=

.PHONY: install demo serve test test-sqlite test-postgres test-postgres-partitioned contract lint wheel-check bench bench-smoke api-fuzz clean

$(VENV)/.installed: requirements.txt requirements-deploy.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_demo
	$(PY) manage.py runserver 127.0.0.1:8000

# The three runs (SQLite, Postgres, Postgres hash-partitioned) go side by side, each with its own
# test database and Redis databases (scripts/run_suites.sh); SUITES=sqlite runs one of them.
test: install
	@if $(PY) -c "import psycopg; psycopg.connect('$(PG_URL)', connect_timeout=3).close()" 2>/dev/null; then \
		PY=$(PY) PYTEST_ARGS="$(PYTEST_ARGS)" scripts/run_suites.sh; \
	elif [ -n "$$REQUIRE_POSTGRES" ]; then \
		echo "PostgreSQL is required (REQUIRE_POSTGRES is set) but not reachable at $(PG_URL)"; exit 1; \
	else \
		echo "PostgreSQL not reachable at $(PG_URL): only the SQLite run (set REQUIRE_POSTGRES=1 to fail instead)"; \
		PY=$(PY) PYTEST_ARGS="$(PYTEST_ARGS)" SUITES=sqlite scripts/run_suites.sh; \
	fi

test-sqlite: install
	AGENT_SESSIONS_TEST_DB=sqlite $(PY) -m pytest $(PYTEST_ARGS)

test-postgres: install
	AGENT_SESSIONS_TEST_DB=postgres $(PY) -m pytest $(PYTEST_ARGS)

# The whole Postgres suite again, on a test database whose growing tables are
# hash-partitioned by session_id (manage.py partition_tables, right after migrations).
test-postgres-partitioned: install
	AGENT_SESSIONS_TEST_DB=postgres AGENT_SESSIONS_TEST_PARTITIONS=16 AGENT_SESSIONS_TEST_SERVER_BINDING=1 $(PY) -m pytest $(PYTEST_ARGS)

contract: install
	../shared/contract/run.sh . sqlite
	../shared/contract/run.sh . postgres
	../shared/contract-next/run.sh . sqlite
	../shared/contract-next/run.sh . postgres

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy agent_sessions tests/typing

# Build the wheel, install it with its declared dependencies only into a clean venv, and run a
# fresh `django-admin startproject` with the README's settings on SQLite and on PostgreSQL.
wheel-check: install
	$(PY) scripts/wheel_check.py

# Schemathesis, every check and phase (stateful included), against gunicorn on fresh SQLite and Postgres databases.
API_FUZZ_EXAMPLES ?= 300
api-fuzz: install
	$(PY) -m scripts.api_fuzz --db sqlite --db postgres --examples $(API_FUZZ_EXAMPLES)

# The peers and matplotlib (charts) come from requirements-bench.txt.
bench: install
	$(PY) -m pip install -q -r requirements-bench.txt
	$(PY) -m bench

bench-smoke: install
	$(PY) -m bench --smoke

clean:
	rm -rf $(VENV) db.sqlite3 tests/artifacts
