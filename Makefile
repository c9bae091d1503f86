# make demo / make test: create or reuse the environment's venv (scripts/setup_venv.sh), then
# run. ROS_DISTRO picks the environment: kilted (default; .venv, the newest pins) or jazzy
# (.venv-jazzy: Python 3.12, ROS 2 Jazzy wheels, Ubuntu 24.04's numpy and scipy, numba 0.59.1).
ROS_DISTRO ?= kilted
export ROS_DISTRO
VENV := $(if $(filter jazzy,$(ROS_DISTRO)),.venv-jazzy,.venv)
PY := $(VENV)/bin/python
PYTEST := $(PY) -m pytest -q --timeout=300
# pytest-xdist: a module to a worker (each DDS module has its own domain and rclpy context);
# WORKERS=0 runs in this process
WORKERS ?= 2
PARALLEL := -n $(WORKERS) --dist loadfile
# what make test runs: the whole suite; CI's second environment runs the part that differs
TESTS ?= test

.PHONY: all venv test-interfaces compile demo test test-unit test-nojit docs bench bench-nodes bench-start lint colcon clean
all: test

venv:
	@scripts/setup_venv.sh >/dev/null

# The test-only control_msgs (test/interfaces), built with the venv's rosidl generators into
# build/test_interfaces/$(ROS_DISTRO); cheap when built.
test-interfaces: venv
	@PYTHON=$(PY) scripts/build_test_interfaces.sh >/dev/null

# every kernel into numba's cache (seconds when it is there): make demo and make test run it first
compile: venv
	@$(PY) -m robot_dynamics.compile

demo: venv
	$(PY) -m robot_dynamics.demo

test: venv test-interfaces compile
	@$(PY) -m robot_dynamics.versions
	$(PYTEST) $(PARALLEL) --durations=25 $(TESTS)
	@$(MAKE) --no-print-directory test-nojit

# Everything but the tests that start nodes on DDS (marked dds) and the minute-long loops.
test-unit: venv test-interfaces
	$(PYTEST) $(PARALLEL) -m "not dds and not slow" test

# The same kernels as plain Python (NUMBA_DISABLE_JIT=1), on the tests marked nojit.
test-nojit: venv
	@NUMBA_DISABLE_JIT=1 $(PYTEST) -m nojit test; rc=$$?; \
	[ $$rc -ne 5 ] || echo "make test-nojit: no test is marked nojit" >&2; exit $$rc

# The manual (doc/, Sphinx) into build/doc, warnings as errors; make test builds it the same way
# (test/package/test_docs.py), so a docs warning fails CI.
docs: venv
	$(PY) -m sphinx -W --keep-going -q -b html doc build/doc

lint: venv
	$(PYTEST) -m linter test

bench: venv
	$(PY) -m robot_dynamics.benchmarks

# The node section alone: each node's CPU per cycle and latency against a minimal rclpy node.
bench-nodes: venv
	$(PY) -m robot_dynamics.benchmarks.nodes

# Cold (empty NUMBA_CACHE_DIR) and warm start of each node to its first output, and the compile.
bench-start: venv
	$(PY) -m robot_dynamics.benchmarks.start

# colcon build into a temporary workspace, and check the installed layout.
colcon: venv
	scripts/check_colcon.sh

clean:
	rm -rf build install log .pytest_cache robot_dynamics.egg-info
