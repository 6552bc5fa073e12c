# txnlab: two commands do everything on a fresh machine.
#   make demo   set up, then run the main job
#   make test   set up, then run the gate: unit, corpus and live tiers (docs/testing.md)
#   make campaign   the whole matrix beside the gate, resumable (docs/campaign.md)
include versions.env

VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup setup-test setup-docker demo test unit integration matrix campaign docker-up docker-down down clean

setup:
	bash scripts/setup.sh

setup-test:
	WITH_TEST_TOOLS=1 bash scripts/setup.sh

# the Docker engine, docker-compose and debootstrap (Debian's), for the compose stack (docs/docker.md)
setup-docker:
	WITH_DOCKER=1 bash scripts/setup.sh

demo: setup
	$(VENV)/bin/txnlab demo $(if $(FLINK),--with-flink)

test: setup-test
	scripts/gate.sh $(PY) $(PYTEST_ARGS)

unit: setup-test
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

integration: setup-test
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

# the core integration tests on every Kafka release of KAFKA_VERSIONS (or VERSIONS=4.1.1,4.4.0); docs/kafka-versions.md
matrix: setup-test
	$(PY) scripts/kafka_matrix.py $(if $(VERSIONS),--versions $(VERSIONS))

# the whole matrix (docs/campaign.md): every built-in on every client, the core tests on every release, every
# catalogued bug's sides, the tests that left the gate; resumable in runs/campaign (CAMPAIGN_ARGS="--parts bugs")
campaign: setup-test setup-docker
	$(VENV)/bin/txnlab campaign $(CAMPAIGN_ARGS)

# the compose stack on a Docker engine: the engine started when none answers, the images built, the stack up
docker-up: setup-docker
	$(VENV)/bin/txnlab docker up

docker-down:
	-$(VENV)/bin/txnlab docker down

down:
	-$(VENV)/bin/txnlab cluster down

clean: down
	rm -rf .txnlab/cluster .txnlab/test-cluster* .pytest_cache
