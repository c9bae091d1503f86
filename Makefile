# make demo / make test: create or reuse .venv (scripts/setup_venv.sh), then run.
PY := .venv/bin/python
PYTEST := $(PY) -m pytest -q --timeout=300

.PHONY: all venv demo test test-nojit bench bench-nodes lint colcon clean
all: test

venv:
	@scripts/setup_venv.sh

demo: venv
	$(PY) -m robot_dynamics.demo

test: venv
	$(PYTEST) --durations=25 test
	@$(MAKE) --no-print-directory test-nojit

# The same kernels as plain Python (NUMBA_DISABLE_JIT=1), on the tests marked nojit.
test-nojit: venv
	@NUMBA_DISABLE_JIT=1 $(PYTEST) -m nojit test; rc=$$?; \
	[ $$rc -ne 5 ] || echo "make test-nojit: no test is marked nojit" >&2; exit $$rc

lint: venv
	$(PYTEST) -m linter test

# colcon build into a temporary workspace, and check the installed layout.
bench: venv
	$(PY) -m robot_dynamics.benchmarks

# The node section alone: each node's CPU per cycle and latency against a minimal rclpy node.
bench-nodes: venv
	$(PY) -m robot_dynamics.benchmarks.nodes

colcon: venv
	scripts/check_colcon.sh

clean:
	rm -rf build install log .pytest_cache robot_dynamics.egg-info
