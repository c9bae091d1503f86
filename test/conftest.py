"""Generic pytest configuration: marker registration, single-threaded BLAS, control_msgs."""
import ctypes
import gc
import os
import sys
import warnings

import pytest

# Multi-threaded OpenBLAS is hundreds of times slower on the small matrices of arm dynamics on
# a 2-core machine; set before numpy is imported by any test module (children inherit it).
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

# No full collection during a module, only at its end (probe_left_clean): over the hundreds of
# thousands of messages a DDS module records, one paused every thread of the test process, the
# probe's poller too, for 0.3-1.3 s; the probe's newest state then lagged the arm's by as much.
gc.set_threshold(*gc.get_threshold()[:2], 2 ** 31 - 1)


def pytest_configure(config):
    config.addinivalue_line(
        'markers', 'nojit: also run with NUMBA_DISABLE_JIT=1 (make test-nojit)')
    config.addinivalue_line('markers', 'linter: static checks of the sources')
    config.addinivalue_line('markers', 'slow: a minute or more of closed loop (runs in the suite)')
    config.addinivalue_line('markers', 'flake8: flake8 compliance (ament_flake8)')
    config.addinivalue_line('markers', 'pep257: docstring style (ament_pep257)')
    config.addinivalue_line('markers', 'dds: starts node processes on DDS (make test-unit skips '
                                       'them); set on every test that uses the ros fixture')


DDS = 'ros'   # the fixture of the tests that start node processes on DDS


def pytest_collection_modifyitems(config, items):
    """Mark ``dds`` every test that uses the ``ros`` fixture (itself or through another).

    A test that starts node processes without the harness (through robot_dynamics.run or a
    script) says so itself, ``@pytest.mark.dds``. Then order the modules longest first, roughly:
    those with a ``slow`` test, those with a ``dds`` test, the rest (each keeps its own order).
    make test gives pytest-xdist's workers a module at a time in this order, so that they run
    the long ones first and end together.
    """
    for item in items:
        if DDS in item.fixturenames:
            item.add_marker(pytest.mark.dds)
    slow = {item.path for item in items if item.get_closest_marker('slow')}
    dds = {item.path for item in items if item.get_closest_marker('dds')}
    items.sort(key=lambda item: (item.path not in slow, item.path not in dds))


@pytest.fixture(scope='module')
def ros():
    """The module's DDS session (ros_harness.session): its tests launch node processes."""
    from ros_harness import session
    return session()


@pytest.fixture(scope='module')
def ros_in_process():
    """The same session, for tests whose nodes are built in the test's process (not ``dds``)."""
    from ros_harness import session
    return session()


@pytest.fixture(autouse=True, scope='module')
def probe_left_clean():
    """A module's DDS session ends with it (ros_harness.module_finished), its recorders too."""
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


@pytest.fixture(autouse=True, scope='session')
def in_process_controllers_activate_at_once():
    """A controller built in a test's process activates without waiting for DDS discovery.

    At activation a controller looks up its command topic's other writers until the graph it
    sees has settled (common.writers.discovered_writers: 2-10 s after its start). The nodes a
    test builds in its own process have no peers to wait for (the test's are known at once),
    and 2-10 s per node was two thirds of the in-process fuzz tests' time. The wait itself is
    tested on nodes in their own processes (test_one_writer).
    """
    from robot_dynamics.nodes.common import writers
    limit, writers.DISCOVERY_LIMIT = writers.DISCOVERY_LIMIT, 0.0
    yield
    writers.DISCOVERY_LIMIT = limit


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ros_distro():
    """Return the distribution of this interpreter's rclpy wheel ('kilted', 'jazzy')."""
    from robot_dynamics.versions import ros_distribution
    return ros_distribution().split()[0]


@pytest.fixture(scope='session')
def control_msgs_prefix():
    """Build (or reuse) the test-only control_msgs; put it on this and child processes' path.

    scripts/build_test_interfaces.sh builds test/interfaces/control_msgs with this venv's rosidl
    generators into build/test_interfaces/<distro> (make test does it first; a stamp makes it
    cheap then). Returns the install prefix of control_msgs.
    """
    import subprocess
    env = dict(os.environ, ROS_DISTRO=ros_distro(), PYTHON=sys.executable)
    done = subprocess.run([os.path.join(REPO, 'scripts', 'build_test_interfaces.sh')], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 0, f'build_test_interfaces.sh failed:\n{done.stderr[-3000:]}'
    prefix = done.stdout.strip().splitlines()[-1]
    version = '%d.%d' % sys.version_info[:2]
    site = os.path.join(prefix, 'lib', f'python{version}', 'site-packages')
    assert os.path.isdir(site), f'{site} missing after build_test_interfaces.sh'
    if site not in sys.path:
        sys.path.insert(0, site)
    prepend_path('PYTHONPATH', site)
    # rosidl's type-support dispatch loads its libraries by name: on LD_LIBRARY_PATH for the
    # node processes; in this process (whose loader read LD_LIBRARY_PATH at its start) loaded
    # now, so that loading them by name finds them loaded
    lib = os.path.join(prefix, 'lib')
    prepend_path('LD_LIBRARY_PATH', lib)
    for name in sorted(os.listdir(lib)):
        if name.endswith('.so'):
            ctypes.CDLL(os.path.join(lib, name))
    return prefix


def prepend_path(variable, directory):
    """Put ``directory`` first on the path list in the environment variable (once)."""
    paths = [p for p in os.environ.get(variable, '').split(os.pathsep) if p]
    if directory not in paths:
        os.environ[variable] = os.pathsep.join([directory] + paths)
