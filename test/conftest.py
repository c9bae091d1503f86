"""Generic pytest configuration: marker registration, single-threaded BLAS."""
import gc
import os
import sys
import warnings

import pytest

# Multi-threaded OpenBLAS is hundreds of times slower on the small matrices of arm dynamics on
# a 2-core machine; set before numpy is imported by any test module (children inherit it).
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')


def pytest_configure(config):
    config.addinivalue_line(
        'markers', 'nojit: also run with NUMBA_DISABLE_JIT=1 (make test-nojit)')
    config.addinivalue_line('markers', 'linter: static checks of the sources')
    config.addinivalue_line('markers', 'slow: a minute or more of closed loop (runs in the suite)')
    config.addinivalue_line('markers', 'flake8: flake8 compliance (ament_flake8)')
    config.addinivalue_line('markers', 'pep257: docstring style (ament_pep257)')
    config.addinivalue_line('markers', 'dds: starts node processes on DDS (make test-unit skips '
                                       'them); set on every test of such a module')


# Modules that start nodes without the harness (through robot_dynamics.run or a script)
DDS_MODULES = {'test_demo', 'test_identification_loop', 'test_nodes_launch', 'test_nodes_soak',
               'test_nodes_warm_up'}


def pytest_collection_modifyitems(config, items):
    """Mark ``dds`` every test of a module that imports ros_harness or is in DDS_MODULES."""
    dds = {}
    for item in items:
        path = item.path
        if path not in dds:
            dds[path] = path.stem in DDS_MODULES or 'ros_harness' in path.read_text()
        if dds[path]:
            item.add_marker(pytest.mark.dds)


@pytest.fixture(autouse=True, scope='module')
def probe_left_clean():
    """A module's DDS recorders end with it: one left running at 1 kHz slows every later test."""
    yield
    harness = sys.modules.get('ros_harness')   # imported by the DDS test modules only
    left = harness.module_finished() if harness is not None else []
    if left:
        warnings.warn(f'the test module left recorders on {left}: stopped now')
    # What outlives a module (hundreds of thousands of recorded messages) leaves the collector's
    # view: a full collection over it paused the probe's thread for longer than its best-effort
    # queue of 100 states lasts at 1 kHz, and the tests saw windows without states.
    gc.collect()
    gc.freeze()
