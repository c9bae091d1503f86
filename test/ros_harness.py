"""Helpers for tests with real node processes over real DDS (loopback only, a domain per module).

``session()`` sets a test module up: a free ROS_DOMAIN_ID (robot_dynamics.run's lock, so
parallel test runs never share one), the loopback Fast DDS profile, rclpy, and the package's
probe (robot_dynamics.probe) spinning in a background thread; conftest's ``probe_left_clean``
ends it with the module. ``session().launch(specs)`` starts nodes exactly as the runner does
(one process each, logs in files); the probe records topics and calls parameter services.
"""
import atexit
import contextlib
import dataclasses
import functools
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import rclpy
import yaml
from builtin_interfaces.msg import Duration
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from robot_dynamics import run
from robot_dynamics.bringup import NodeSpec
from robot_dynamics.nodes.common.joint_states import LATCHED_QOS, to_time  # noqa: F401 (tests)
from robot_dynamics.nodes.common.joint_states import stamp_of  # noqa: F401 (for the tests)
from robot_dynamics.probe import BEST_EFFORT, RELIABLE, ArmView, spinning, window  # noqa: F401

# real_time_factor of the tests' lock-stepped simulators (unpaced, one ran 2.8 times real time
# alone). Nodes outside the lock step (the estimator) must keep up: at twice real time, a process
# held up for 0.25 s misses 0.5 s of states, the bring-up's state_timeout (its observer restarts).
TEST_PACE = 2.0

_session = None


def tare(probe):
    """Call the estimator's ~/tare: the stamp, s, of the joint state its bias was taken at.

    Estimates stamped later are tared; the probe's newest state may be older than that one.
    """
    response = probe.call(Trigger, '/wrench_estimator/tare', Trigger.Request())
    assert response.success, response.message
    bias = probe.record(JointState, '/wrench_estimator/bias', LATCHED_QOS)   # after the tare:
    tared = bias.last()                                   # its newest, latched, is this tare's
    probe.stop_recording(bias)
    assert len(tared.name) == len(tared.effort) and np.isfinite(tared.effort).all(), tared
    assert f'stamped {stamp_of(tared):.6f} s' in response.message   # the answer says the same
    return stamp_of(tared)


def to_duration(t):
    sec, nanosec = divmod(int(round(t * 1e9)), 10**9)
    return Duration(sec=sec, nanosec=nanosec)


# the controller's answer to a trajectory: refused, or taken with its duration and start
ANSWER = re.compile(r'joint_trajectory( rejected: .*| ignored: .*|'
                    r': \d+ points, [\d.]+ s, from ([\d.]+) s)')


def trajectory_answer(launch, publish, stamp, timeout=10.0, node='dynamics_controller'):
    """Publish a trajectory stamped ``stamp`` (``publish()``); (start, answer) from the log.

    start: the start the controller took, from its log line; that is the stamp, or the newest
    joint state's where the stamp had already passed (under load the probe's view of the arm's
    clock may lag the arm's by more than the lead a test gives), and ``stamp`` when the
    trajectory was refused. answer: the controller's log since the publication, None without an
    answer within ``timeout``.
    """
    offset = len(launch.log(node))
    publish()
    deadline = time.monotonic() + timeout
    while True:
        text = launch.log(node)[offset:]
        match = ANSWER.search(text)
        if match:
            return (float(match.group(2)) if match.group(2) else stamp), text
        if time.monotonic() > deadline:
            return stamp, None
        time.sleep(0.02)


def file_specs(directory, nodes, shared):
    """One NodeSpec per node, each started from a parameter file of its own, as a user writes.

    ``nodes``: {label: (namespace, executable, parameters)}; the file ``directory/label.yaml``
    holds ``shared`` and the node's parameters under the executable's ``/**/`` section.
    """
    directory.mkdir(exist_ok=True)
    specs = []
    for label, (namespace, executable, values) in nodes.items():
        path = directory / f'{label}.yaml'
        path.write_text(yaml.safe_dump({f'/**/{executable}': {'ros__parameters': {
            **shared, **values}}}))
        specs.append(NodeSpec(executable, executable, str(path), {}, namespace))
    return specs


@functools.cache
def warm_numba_cache():
    """Every kernel the nodes use in numba's cache (``python -m robot_dynamics.compile``), once.

    Node start-up times are then those of a warm cache, and a switch of mode is not refused
    for a cache still compiling (``ArmNode.refuse_uncompiled``).
    """
    from robot_dynamics.core import _jit
    if not _jit.complete():
        subprocess.run([sys.executable, '-m', 'robot_dynamics.compile', '--quiet'], check=True)


def module_finished():
    """After a test module: the topics its probe still recorded, [] if none; the session ends.

    Each test module has a session of its own: a ROS_DOMAIN_ID, an rclpy context and a probe.
    A probe that lived through the whole suite matched a new node's endpoints in about 12 s late
    in it (four of Fast DDS's 3 s heartbeat periods), against milliseconds in a fresh process,
    and the tests' 10 s waits for a first message ran out.
    """
    global _session
    if _session is None:
        return []
    session, _session = _session, None   # ends even if clearing fails: the next module's own
    try:
        return session.probe.clear()
    finally:
        session.close()


def session():
    """The ROS session of the test module (created on first use, closed at its end or exit)."""
    global _session
    if _session is None:
        _session = RosSession()
        atexit.register(_session.close)
    return _session


class RosSession:
    """Domain, environment, rclpy and the probe of this test process."""

    def __init__(self):
        warm_numba_cache()   # node start-up times are then those of a warm cache
        self.domain, self._lock = run.allocate_domain_id()
        self.work = pathlib.Path(tempfile.mkdtemp(prefix='robot_dynamics_test_'))
        self.env = run.loopback_environment(self.domain, self.work)
        os.environ.update({k: self.env[k] for k in
                           ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION', 'FASTDDS_DEFAULT_PROFILES_FILE',
                            'ROS_LOG_DIR')})
        rclpy.init()
        self._probe = contextlib.ExitStack()
        self.probe = self._probe.enter_context(spinning('test_probe'))
        self.launches, self.closed = [], False

    def launch(self, specs):
        self.launches.append(Launch(self, at_test_pace(specs),
                                    self.work / f'launch{len(self.launches) + 1}'))
        return self.launches[-1]

    def close(self):
        """Stop what the module's launches left running, then end the probe and the domain."""
        if self.closed:
            return
        self.closed = True
        for launch in self.launches:   # a fixture's failed teardown must not leak its nodes
            launch.stop()
        self._probe.close()
        rclpy.try_shutdown()
        self._lock.close()
        shutil.rmtree(self.work, ignore_errors=True)


def at_test_pace(specs):
    """The NodeSpecs, each lock-stepped arm_simulator among them at TEST_PACE unless set.

    In lock step the simulated arm waits for each command, so a closed loop's figures do not
    depend on how fast simulated time runs against the wall clock (test_lock_step proves
    it: paced at real time, then at TEST_PACE under load); faster, a closed-loop test takes
    less wall time. The bring-ups users run stay at real time.
    """
    return [dataclasses.replace(s, parameters={'real_time_factor': TEST_PACE, **s.parameters})
            if s.executable == 'arm_simulator' and s.parameters.get('lock_step') else s
            for s in specs]


class Launch:
    """Node processes of one test; ``ready()`` waits for each node's 'ready' log line."""

    def __init__(self, ros, specs, directory):
        directory.mkdir()
        self.directory, self.names = directory, [s.label for s in specs]
        self.started = time.monotonic()
        self.processes = run.Processes(specs, ros.env, directory, output=directory)

    def log(self, name):
        """Node ``name``'s log up to its last complete line: a line being written is not read."""
        text = self.output(name)
        return text[:text.rfind('\n') + 1]

    def output(self, name):
        """All node ``name`` has written, a line it is still writing included."""
        return (self.directory / f'{name}.log').read_text()

    def logs(self):
        return '\n'.join(f'--- {n} ---\n{self.output(n)[-3000:]}' for n in self.names)

    def wait_for_log(self, name, text, timeout=20.0):
        """Return whether node ``name`` logs ``text`` within ``timeout`` s.

        A line may trail the topic traffic it is about: the probe can see a command before its
        receiver has logged it.
        """
        deadline = time.monotonic() + timeout
        while text not in self.log(name):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def ready(self, timeout=90.0):
        """{node: seconds from process start to its 'ready' line}; raises if a node exits."""
        startup = {}
        while len(startup) < len(self.names):
            exited = self.processes.exited()
            if exited:
                raise RuntimeError(f'nodes exited: {exited}\n{self.logs()}')
            if time.monotonic() - self.started > timeout:
                raise TimeoutError(f'nodes not ready after {timeout} s\n{self.logs()}')
            for name in self.names:
                if name not in startup and ']: ready: ' in self.log(name):
                    startup[name] = time.monotonic() - self.started
            time.sleep(0.02)
        return startup

    def count(self, name, pattern):
        """Number of log lines of a node matching a regular expression."""
        return len(re.findall(pattern, self.log(name)))

    def stop(self):
        return self.processes.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
