# Two set-up commands: `make demo` and `make test`. Both build .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench bench-instructions mutate rabbitmq postgresql serve clean nova-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/actorsched demo

# The AMQP tests talk to a real broker; start it (installing it first when absent).
rabbitmq:
	@bash scripts/ensure-rabbitmq.sh

# The journal tests and benchmarks talk to a real PostgreSQL (127.0.0.1:5432, database
# test, user postgres, trust); start it (installing it first when absent).
postgresql:
	@bash scripts/ensure-postgresql.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The Nova tests drive Nova 34's own client from its venv (made once, then kept);
# when it cannot be made they skip and say why.
pytest: $(STAMP) rabbitmq postgresql
	-@$(MAKE) --no-print-directory nova-venv || echo "make test: no Nova venv; the Nova tests skip"
	$(PY) -m pytest

test: lint typecheck pytest

# Real OpenStack Nova for the benchmark's realistic section, in a venv of its
# own (its pins, eventlet and oslo.* stay out of ours). `make bench` tries to
# make it and goes on without real Nova when it cannot (the report says so).
NOVA_VENV := .venv-nova
NOVA_STAMP := $(NOVA_VENV)/.installed
NOVA_VERSION ?= 34.0.0

$(NOVA_STAMP):
	$(PYTHON) -m venv $(NOVA_VENV)
	$(NOVA_VENV)/bin/pip install --quiet --upgrade pip
	$(NOVA_VENV)/bin/pip install --quiet 'nova==$(NOVA_VERSION)'
	touch $(NOVA_STAMP)

nova-venv: $(NOVA_STAMP)

bench: $(STAMP) rabbitmq postgresql
	-@$(MAKE) --no-print-directory nova-venv || echo "make bench: no Nova venv; real Nova is skipped"
	$(VENV)/bin/actorsched bench

# CPU instructions per placement and per report (valgrind): repeatable where
# wall-clock figures are not.
bench-instructions: $(STAMP)
	$(PY) -m benchmarks.instructions

# A seeded sample of mutants of actorsched/core/ against the fast tests (mutmut;
# scripts/mutate.py says how and why). Not part of `make test`: a few minutes.
mutate: $(STAMP)
	$(PY) -m pip install --quiet -e '.[mutate]'
	$(PY) scripts/mutate.py $(MUTATE_ARGS)

serve: $(STAMP) rabbitmq
	$(VENV)/bin/actorsched serve

clean:
	rm -rf $(VENV) $(NOVA_VENV) .mypy_cache .pytest_cache .ruff_cache mutants
