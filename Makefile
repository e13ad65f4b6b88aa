# Every target creates .venv when it is missing; versions come from constraints.txt (pip freeze of a good install).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
export VCPILOT_HOME ?= $(CURDIR)/.vcpilot

.PHONY: venv demo test fuzz lint bench e2e cluster cluster-down clean constraints

venv: $(STAMP)

# uv installs the same pins as pip, several times faster cold (82 s against 414 s for torch and the rest here).
# --compile-bytecode as pip does: where PYTHONDONTWRITEBYTECODE is set (it is in this machine's shell), each process importing torch
# would compile it again, and make test took twice as long.
UV_VERSION := 0.13.9
UV := $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q uv==$(UV_VERSION)
	$(UV) -c constraints.txt -e '.[dev]'
	# drain3 pins cachetools==4.2.1, which MLflow's google-auth cannot share; it runs fine on current cachetools.
	$(UV) --no-deps -c constraints.txt drain3
	touch $(STAMP)

# The demo gets a home of its own, made afresh: generated data, a first champion, then the pipeline on drifted logs.
DEMO_HOME := $(CURDIR)/.vcpilot-demo

demo: venv
	rm -rf $(DEMO_HOME)
	VCPILOT_HOME=$(DEMO_HOME) $(BIN)/vcpilot run
	VCPILOT_HOME=$(DEMO_HOME) $(BIN)/vcpilot release show --registered-model shop-assistant

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# --max-worker-restart=0: a worker that crashes (a signal, not a failed assert) fails the run at once, naming its
# test; pytest-xdist 3.8 with --dist loadfile replaced it and then waited for ever for the tests it had held.
test: lint
	$(BIN)/pytest -q -n 2 --dist loadfile --max-worker-restart=0 --durations=25

# The fuzz tests with many more examples than `make test` gives them (tests/conftest.py, profile `fuzz`); a failure
# prints the smallest input that shows it, to pin with `@example` once fixed. FUZZ_EXAMPLES=N overrides the count.
fuzz: venv
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -q -n 2 --dist loadfile --max-worker-restart=0 tests/fuzz

# Every benchmark, one after another, into benchmarks/results/latest.json and latest.md (benchmarks/report.py): each
# figure with its goal, its baseline and whether it is met. BENCH_ARGS=--quick for a smoke run of a few minutes;
# BENCH_ARGS="--only scheduler,runner" for some. loadgen's ratios need wrk (apt-get install -y wrk).
bench: venv
	command -v wrk >/dev/null || echo "benchmarks/loadgen.py compares with wrk: apt-get install -y wrk"
	$(BIN)/python benchmarks/report.py $(BENCH_ARGS)

# The real cluster (deploy/e2e/, docs/e2e.md): build it once into ~/.cache/vcpilot-e2e (binaries from Go modules, the
# step, pause and Argo executor images without Docker), start it in a network namespace of its own, run the tests,
# and stop every process and mount it started, whatever the tests did. Before it the `night` tests, which need no
# cluster (minutes each; make test leaves them out). First the contract suite and the agent on
# kwok's fake nodes alone (their figures assume them), then a fresh cluster of real nodes only, with Argo
# Workflows, for the tests on real pods and of the pipeline as Argo runs it (vcpilot installed by install.py).
# The real-pod tests go first: they size their pods to the nodes' two CPUs, before the deployment's MLflow runs.
e2e: venv
	deploy/e2e/host-deps.sh
	VCPILOT_REQUIRE_BROWSER=1 $(BIN)/pytest -q --durations=10 -m night tests/integration
	deploy/e2e/build.sh
	deploy/e2e/image.sh
	trap 'deploy/e2e/down.sh' EXIT; trap 'exit 130' INT TERM; \
	export VCPILOT_E2E_KUBECONFIG=$$(deploy/e2e/up.sh --print-kubeconfig); \
	VCPILOT_E2E_REAL_NODES=0 deploy/e2e/up.sh && \
	$(BIN)/pytest -q --durations=15 -m "e2e and not real_pods" tests/contract tests/e2e && \
	VCPILOT_E2E_NODES=0 deploy/e2e/up.sh && \
	export VCPILOT_E2E_REQUIRE_REAL=1 VCPILOT_E2E_STEP_IMAGE=$$(deploy/e2e/image.sh --print | awk 'END {print $$2}') && \
	$(BIN)/pytest -q --durations=10 -m "e2e and real_pods" tests/e2e/test_real_pods.py && \
	$(BIN)/pytest -q --durations=50 -m "e2e and real_pods" tests/e2e --ignore tests/e2e/test_real_pods.py

# The real-pods cluster with Argo Workflows and vcpilot installed (kubectl apply -k deploy/, the demo seeded into
# its workspace), left running for people: the last lines are the exports for kubectl, argo and vcpilot
# (docs/deploy.md walks through submitting). `make cluster-down` stops every process and mount it started.
cluster: venv
	deploy/e2e/host-deps.sh
	deploy/e2e/build.sh
	deploy/e2e/image.sh >/dev/null
	VCPILOT_E2E_NODES=0 deploy/e2e/up.sh >/dev/null
	$(BIN)/python deploy/e2e/install.py || { deploy/e2e/down.sh; exit 1; }
	@deploy/e2e/up.sh --print-env

cluster-down:
	deploy/e2e/down.sh

# Regenerate the pins after changing dependencies in pyproject.toml.
constraints: venv
	$(BIN)/pip freeze --exclude-editable | grep -v '^-e' > constraints.txt

clean:
	rm -rf $(VENV) .vcpilot .pytest_cache .mypy_cache .ruff_cache
