"""A node's timers on /clock run once per due time, even after its thread has stalled.

rclpy's events executor (Kilted) called a due 1 Hz timer tens of times after a stall of the
node's thread while /clock kept coming, and then not at all for as many seconds (see
robot_dynamics.nodes.common.timers). Here an ArmNode on use_sim_time takes /clock at 1 kHz of
the arm's time, with a busy callback per clock tick like a controller's, and stalls for 0.3 s
of wall time once a second of the arm's clock; its executor is the one its process runs.
"""
import threading
import time

import numpy as np
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Empty

from robot_dynamics.nodes.common.node import ArmNode
from robot_dynamics.nodes.common.process import executor
from ros_harness import session, to_time

STALL, BUSY = 0.3, 150e-6   # s of wall time


def busy_for(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Timed(ArmNode):
    """An ArmNode with nothing to configure: its clock and timers alone."""

    def configure(self, values, arm):
        return None

    def apply(self, config):
        pass


def test_a_1_hz_timer_is_called_once_a_second_of_the_arm_s_clock(ros_in_process):
    node = Timed('timed', parameter_overrides=[Parameter('use_sim_time', value=True)])
    calls = []
    node.create_timer(1.0, lambda: calls.append(node.monotonic_time()))
    node.create_subscription(Empty, 'stall', lambda _: time.sleep(STALL), 10)
    node.create_subscription(Empty, 'busy', lambda _: busy_for(BUSY), 100)
    clock = ros_in_process.probe.create_publisher(
        Clock, '/clock', QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))
    stall = ros_in_process.probe.create_publisher(Empty, 'stall', 10)
    busy = ros_in_process.probe.create_publisher(Empty, 'busy', 100)
    spinner = executor()
    spinner.add_node(node)
    stopped = threading.Event()

    def spin():
        while not stopped.is_set():
            spinner.spin_once(timeout_sec=0.05)
    thread = threading.Thread(target=spin, daemon=True)
    thread.start()

    def tick(t):
        clock.publish(Clock(clock=to_time(t)))
        busy.publish(Empty())
    try:
        t = 0.1
        tick(t)
        time.sleep(1.0)   # discovery
        for tick_number in range(4000):   # a stall from 0.8 s of every second of the clock
            if tick_number % 1000 == 700:
                stall.publish(Empty())
            t += 0.001
            tick(t)
            time.sleep(0.0005)
        time.sleep(0.5)
    finally:
        stopped.set()
        thread.join(5.0)
        spinner.shutdown()
        ros_in_process.probe.remove_publishers(clock, stall, busy)
        node.destroy_node()
    # a call is late by at most the arm's time a stall lets pass (~0.5 s here), never early
    gaps = np.diff(calls)
    print(f"timer calls at {np.round(calls, 3)} s of the arm's clock (to {t:.3f} s)")
    assert len(calls) >= 3 and gaps.min() > 0.99 and gaps.max() < 1.7, calls


def test_a_call_queued_before_its_timer_was_destroyed_does_nothing():
    """An events executor may dispatch a destroyed timer's queued call: it must not raise."""
    session()
    node = Timed('timed_destroyed')
    calls = []
    timer = node.create_timer(0.01, lambda: calls.append(1))
    queued = timer.callback
    try:
        node.destroy_timer(timer)
        queued()
    finally:
        node.destroy_node()
    assert calls == []
