"""The rest of the kernels, compiled in a process beside a node after a cold start.

A node warms up only what its configuration calls (node.py), so that a fresh install starts in
seconds; a later switch of mode would then compile for seconds in the control loop, so it is
refused until every kernel is in the cache (``ArmNode.refuse_uncompiled``). This starts
``python -m robot_dynamics.compile --quiet`` in the idle scheduling class to fill the cache, and
logs when it is done (or failed, with its output).
"""
import os
import subprocess
import sys
import time

from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from robot_dynamics.core import _jit

POLL = 1.0   # s between checks of the process (the node's wall-clock timer)


def idle():
    """In the child before exec: the idle scheduling class (else the lowest nice), and all CPUs.

    Not the node's real-time priority or CPU affinity, which a child would inherit.
    """
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)
    try:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    except OSError:
        pass


class BackgroundCompile:
    """One compile process, started by ``start(node)`` unless the cache is complete."""

    def __init__(self):
        self.process = self.timer = None

    def start(self, node):
        if self.process is not None or not _jit.ENABLED or _jit.complete():
            return
        self.node, self.began = node, time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'robot_dynamics.compile', '--quiet'],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=idle)
        node.get_logger().info(
            f'compiling the kernels of every other mode in the background (pid '
            f'{self.process.pid}, python -m robot_dynamics.compile): a switch of mode waits '
            'for it')
        self.timer = Node.create_timer(node, POLL, self.poll,   # wall time, also on /clock
                                       clock=Clock(clock_type=ClockType.STEADY_TIME))

    def poll(self):
        code = self.process.poll()
        if code is None:
            return
        self.timer.cancel()
        log, took = self.node.get_logger(), time.monotonic() - self.began
        if code == 0:
            log.info(f'every kernel is compiled ({took:.0f} s): any mode can be switched to')
        else:
            log.error(f'the background compile failed (exit status {code}): '
                      f'{self.process.stdout.read()[-2000:]}')

    def stop(self):
        """End the process, if it runs (the node stops)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
