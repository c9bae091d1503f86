"""A node's process ends: within TEARDOWN_TIMEOUT of its stop, and when its launcher dies.

1. rclpy's teardown hanging is stood in for by a node whose ``destroy_node`` blocks in C with
   the GIL held (as the hang seen in rclpy does: no Python thread runs meanwhile); the process
   must say where it hung on stderr and exit with the status its spin returned.
2. A launcher (robot_dynamics.run's Processes) killed outright: its node stops gracefully,
   whether it was still starting or already running.
"""
import pathlib
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from robot_dynamics import run as ros_run
from robot_dynamics.nodes.common.exit_guard import TEARDOWN_TIMEOUT

pytestmark = pytest.mark.dds   # starts node processes (robot_dynamics.run or a script)

SCRIPT = textwrap.dedent("""
    import ctypes
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from robot_dynamics.nodes.common.process import tear_down

    class Stuck(Node):
        def destroy_node(self):
            ctypes.PyDLL(None).sleep(3600)   # a PyDLL call keeps the GIL

    rclpy.init()
    node = Stuck('stuck_node')
    tear_down(node, SingleThreadedExecutor(), {status})
    print('returned')
""")


def run(status, env):
    start = time.monotonic()
    done = subprocess.run([sys.executable, '-c', SCRIPT.format(status=status)],
                          capture_output=True, text=True, timeout=60, env=env)
    return done, time.monotonic() - start


def test_a_hung_teardown_ends_the_process_with_its_status():
    domain, lock = ros_run.allocate_domain_id()   # DDS on loopback, in a domain of its own
    env = ros_run.loopback_environment(domain, tempfile.mkdtemp(prefix='robot_dynamics_test_'))
    with lock:
        outcomes = [(status, *run(status, env)) for status in (0, 3)]
    for status, done, took in outcomes:
        assert done.returncode == status, done.stderr
        assert 'returned' not in done.stdout
        assert 'Timeout (0:00:05)!' in done.stderr   # faulthandler's watchdog
        assert 'in destroy_node' in done.stderr
        assert TEARDOWN_TIMEOUT <= took < TEARDOWN_TIMEOUT + 30


REFUSED = textwrap.dedent("""
    import ctypes
    import sys
    import rclpy
    from rclpy.node import Node
    from robot_dynamics.nodes.common.process import main
    from robot_dynamics.nodes.common.parameters import ConfigError

    class Refused(Node):
        NAME = 'refused_node'

        def __init__(self):
            super().__init__(self.NAME)
            # rclpy's shutdown hangs in C with the GIL held, as its teardown can
            rclpy.try_shutdown = lambda: ctypes.PyDLL(None).sleep(3600)
            raise ConfigError('refused at start')

    sys.exit(main(Refused, ['refused']))
""")


def test_a_node_refused_at_start_ends_with_status_1_though_its_exit_hangs():
    """The start-up refusal's exit is bounded as a stop's teardown is (``end_early``)."""
    domain, lock = ros_run.allocate_domain_id()
    env = ros_run.loopback_environment(domain, tempfile.mkdtemp(prefix='robot_dynamics_test_'))
    start = time.monotonic()
    with lock:
        done = subprocess.run([sys.executable, '-c', REFUSED], capture_output=True, text=True,
                              timeout=60, env=env)
    took = time.monotonic() - start
    assert done.returncode == 1, done.stderr
    assert 'refused at start' in done.stderr
    assert 'Timeout (0:00:05)!' in done.stderr   # faulthandler's watchdog saw the hang
    assert TEARDOWN_TIMEOUT <= took < TEARDOWN_TIMEOUT + 30


INTERRUPTED = textwrap.dedent("""
    import sys
    from rclpy.lifecycle import LifecycleNodeMixin
    from robot_dynamics.nodes.common.process import main
    from robot_dynamics.nodes.dynamics_controller import DynamicsController

    def interrupted(self, *args, **kwargs):   # what main's handler does on SIGINT meanwhile
        raise KeyboardInterrupt

    LifecycleNodeMixin.__init__ = interrupted
    sys.exit(main(DynamicsController, ['dynamics_controller']))
""")


def test_a_node_stopped_before_its_lifecycle_exists_ends_with_status_0():
    """A stop while the managed node is half built (a bring-up ending at start): status 0.

    rclpy's shutdown destroys the half-built node too, before its lifecycle state machine
    exists (it failed so once in a runner test: status 1, an AttributeError).
    """
    domain, lock = ros_run.allocate_domain_id()
    env = ros_run.loopback_environment(domain, tempfile.mkdtemp(prefix='robot_dynamics_test_'))
    with lock:
        done = subprocess.run([sys.executable, '-c', INTERRUPTED], capture_output=True,
                              text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert 'stopped while starting' in done.stderr
    assert 'Traceback' not in done.stderr


LAUNCHER = textwrap.dedent("""
    import os, sys, time
    from robot_dynamics import bringup, run
    spec = [s for s in bringup.nodes('simulated_arm', robot='panda')
            if s.name == 'arm_simulator']
    processes = run.Processes(spec, dict(os.environ), sys.argv[1], output=sys.argv[1])
    print(processes.procs['arm_simulator'].pid, flush=True)
    time.sleep(600)
""")


def state(pid):
    """The process's state letter ('Z': a zombie), or None once it is gone."""
    try:
        status = pathlib.Path(f'/proc/{pid}/status').read_text()
    except FileNotFoundError:
        return None
    return next(line.split()[1] for line in status.splitlines() if line.startswith('State:'))


def launch_and_kill(env, work, ready):
    """Start arm_simulator from a launcher process, SIGKILL the launcher: the node's log."""
    launcher = subprocess.Popen([sys.executable, '-c', LAUNCHER, str(work)], env=env,
                                stdout=subprocess.PIPE, text=True)
    node = int(launcher.stdout.readline())
    log = pathlib.Path(work) / 'arm_simulator.log'
    deadline = time.monotonic() + 120
    while ready and ']: ready: ' not in (log.read_text() if log.exists() else ''):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    while state(node) not in (None, 'Z'):
        assert time.monotonic() < deadline, f'node {node} outlived its launcher'
        time.sleep(0.05)
    return log.read_text()


def test_nodes_stop_when_their_launcher_is_killed():
    domain, lock = ros_run.allocate_domain_id()
    with lock:
        env = ros_run.loopback_environment(domain, tempfile.mkdtemp(prefix='robot_dynamics_test_'))
        starting = launch_and_kill(env, tempfile.mkdtemp(prefix='robot_dynamics_test_'), False)
        running = launch_and_kill(env, tempfile.mkdtemp(prefix='robot_dynamics_test_'), True)
    assert 'Traceback' not in starting + running, starting + running
    assert 'stopped while starting' in starting or ']: ready: ' not in starting, starting
    assert ']: ready: ' in running, running


IGNORING = textwrap.dedent("""
    import os, signal, sys, time
    from robot_dynamics import bringup, run
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # as a shell starts a background job
    spec = [s for s in bringup.nodes('simulated_arm', robot='panda')
            if s.name == 'arm_simulator']
    processes = run.Processes(spec, dict(os.environ), sys.argv[1])
    start = time.monotonic()
    code = processes.stop(timeout=10.0)['arm_simulator']   # at once: the node is importing
    print(code, round(time.monotonic() - start, 1))
""")


def test_a_launcher_that_ignores_sigint_still_stops_a_starting_node():
    """A node started by a launcher that ignores SIGINT stops on SIGINT while still importing.

    Without resetting SIGINT for its nodes (``run.default_sigint``) the node inherits the
    ignore, loses the stop and is killed when ``stop`` gives up (a runner test failed so).
    """
    domain, lock = ros_run.allocate_domain_id()
    with lock:
        env = ros_run.loopback_environment(domain, tempfile.mkdtemp(prefix='robot_dynamics_test_'))
        done = subprocess.run([sys.executable, '-c', IGNORING,
                               tempfile.mkdtemp(prefix='robot_dynamics_test_')],
                              capture_output=True, text=True, timeout=60, env=env)
    code, took = done.stdout.split()
    assert int(code) in (-signal.SIGINT, 0), done.stdout + done.stderr
    assert float(took) < 5.0, done.stdout + done.stderr
