"""A node's process ends within TEARDOWN_TIMEOUT of its stop, even when rclpy's teardown hangs.

The hang is stood in for by a node whose ``destroy_node`` never returns; the process must say so
on stderr and exit with the status its spin returned.
"""
import subprocess
import sys
import tempfile
import textwrap
import time

from robot_dynamics import run as ros_run
from robot_dynamics.nodes.node import TEARDOWN_TIMEOUT

SCRIPT = textwrap.dedent("""
    import threading
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from robot_dynamics.nodes.node import tear_down

    class Stuck(Node):
        def destroy_node(self):
            threading.Event().wait()   # never returns

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
        assert '[stuck_node] rclpy teardown took over 5 s; exiting without it' in done.stderr
        assert TEARDOWN_TIMEOUT <= took < TEARDOWN_TIMEOUT + 30
