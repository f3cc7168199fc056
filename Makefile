# Two set-up commands: `make demo` and `make test`. Both build .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo docs test lint typecheck pytest bench bench-instructions mutate rabbitmq postgresql serve clean nova-venv test-nova-functional

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench,docs]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/actorsched demo

# The docs site (mkdocs-material), strict: a broken link or a drifted generated page
# fails (make test builds it too, in tests/test_docs.py). Into site/.
docs: $(STAMP)
	$(PY) scripts/docs_reference.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

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
# when it cannot be made they skip and say why. /usr/sbin, often off a user's PATH,
# holds the rabbitmqctl they make their vhost with (through sudo -n unless root).
pytest: $(STAMP) rabbitmq postgresql
	-@$(MAKE) --no-print-directory nova-venv || echo "make test: no Nova venv; the Nova tests skip"
	-@bash scripts/ensure-virsh.sh || echo "make test: no virsh; the agent's libvirt test skips"
	PATH="$$PATH:/usr/sbin:/sbin" $(PY) -m pytest

test: lint typecheck pytest

# Real OpenStack Nova for the benchmark's realistic section, in a venv of its
# own (its pins, eventlet and oslo.* stay out of ours). `make bench` tries to
# make it and goes on without real Nova when it cannot (the report says so).
# It also holds a real Placement (openstack-placement, the release of Nova 34's
# cycle: its requirements are all met by Nova's) for tests/placement, and a real
# Keystone of the same cycle (it only adds packages) for Placement behind Keystone.
NOVA_VENV := .venv-nova
NOVA_STAMP := $(NOVA_VENV)/.installed
NOVA_VERSION ?= 34.0.0
PLACEMENT_VERSION ?= 16.0.0
KEYSTONE_VERSION ?= 30.0.0
# and what Nova's functional environment imports beyond nova (its test requirements)
NOVA_PINS := nova==$(NOVA_VERSION) openstack-placement==$(PLACEMENT_VERSION) keystone==$(KEYSTONE_VERSION) oslotest testtools wsgi-intercept requests-mock

# The stamp holds the pins it was made with: other pins (or an old, empty stamp)
# make the recipe run again, once per make run, into the same venv.
ifneq ($(shell cat $(NOVA_STAMP) 2>/dev/null),$(NOVA_PINS))
.PHONY: $(NOVA_STAMP)
endif
$(NOVA_STAMP):
	rm -f $(NOVA_STAMP)
	$(PYTHON) -m venv $(NOVA_VENV)
	$(NOVA_VENV)/bin/pip install --quiet --upgrade pip
	$(NOVA_VENV)/bin/pip install --quiet $(foreach pin,$(NOVA_PINS),'$(pin)')
	echo '$(NOVA_PINS)' > $(NOVA_STAMP)

nova-venv: $(NOVA_STAMP)

# Nova 34's own functional environment (API, conductor, 20 fake computes) booting,
# moving and deleting servers, through Nova's scheduler and then actorsched: part of
# `make test` (about 5 minutes of it on two idle cores); this runs it alone.
test-nova-functional: $(STAMP) rabbitmq nova-venv
	$(PY) -m pytest tests/nova_functional

bench: $(STAMP) rabbitmq postgresql
	-@$(MAKE) --no-print-directory nova-venv || echo "make bench: no Nova venv; real Nova is skipped"
	$(VENV)/bin/actorsched bench

# CPU instructions per placement and per report (valgrind): repeatable where
# wall-clock figures are not.
bench-instructions: $(STAMP)
	$(PY) -m benchmarks.instructions

# A seeded sample of mutants of actorsched/core/ and actorsched/actor.py, each run
# against the tests that cover its line (scripts/mutate.py says how): the raw score
# beside the one without the listed equivalents, and every survivor. The seed is
# the day's date unless MUTATE_ARGS="--seed N --sample N" says otherwise. Not part
# of `make test`: about 15 minutes for the default 120 on two idle cores.
mutate: $(STAMP)
	$(PY) -m pip install --quiet -e '.[mutate]'
	$(PY) scripts/mutate.py $(MUTATE_ARGS)

serve: $(STAMP) rabbitmq
	$(VENV)/bin/actorsched serve

clean:
	rm -rf $(VENV) $(NOVA_VENV) .mypy_cache .pytest_cache .ruff_cache mutants
