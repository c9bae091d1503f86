"""Helpers for tests with real node processes over real DDS (loopback only, a domain per module).

``session()`` sets a test module up: a free ROS_DOMAIN_ID (robot_dynamics.run's lock, so
parallel test runs never share one), the loopback Fast DDS profile, rclpy, and a probe node
spinning in a background thread; conftest's ``probe_left_clean`` ends it with the module.
``session().launch(specs)`` starts nodes exactly as the runner does (one process each, logs in
files); the probe records topics and calls parameter services.
"""
import atexit
import bisect
import dataclasses
import functools
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import rclpy
import yaml
from builtin_interfaces.msg import Duration
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from robot_dynamics import run
from robot_dynamics.bringup import NodeSpec
from robot_dynamics.nodes.common.joint_states import LATCHED_QOS, to_time  # noqa: F401 (tests)
from robot_dynamics.nodes.common.joint_states import stamp_of  # noqa: F401 (for the tests)

# depth: what a reader holds between the poller's takes while the test process is held up
# (a 1 kHz topic's 1 s; an unpaced simulated arm's states come a few times faster)
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
BEST_EFFORT = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)

# real_time_factor of the tests' lock-stepped simulators (unpaced, one ran 2.8 times real time
# alone). Nodes outside the lock step (the estimator) must keep up: at twice real time, a process
# held up for 0.25 s misses 0.5 s of states, the bring-up's state_timeout (its observer restarts).
TEST_PACE = 2.0

_session = None


def window(recorder, since, until=float('inf')):
    """The recorded messages stamped in [since, until] (bisected: they arrive in order)."""
    messages = list(recorder.messages)
    first = bisect.bisect_left(messages, since, key=stamp_of)
    return messages[first:bisect.bisect_right(messages, until, key=stamp_of)]


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
        self.probe = Probe()
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.probe)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
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
        self.executor.shutdown()
        self.thread.join(5.0)
        self.probe.poller.close()
        self.probe.destroy_node()
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


class Recorder:
    """Every message received on a topic, with its receipt time (time.time())."""

    def __init__(self):
        self.messages, self.times = [], []
        self.event = threading.Condition()
        self.subscription = None

    def __call__(self, msg):
        self.extend([msg])

    def extend(self, messages):
        with self.event:
            self.messages.extend(messages)
            self.times.extend([time.time()] * len(messages))
            self.event.notify_all()

    def take(self):
        """Record what the subscription has received since the poller last looked."""
        subscription, taken = self.subscription, []
        handle, msg_type = subscription.handle, subscription.msg_type
        with handle:
            while (received := handle.take_message(msg_type, False)) is not None:
                taken.append(received[0])
        if taken:
            self.extend(taken)

    def __len__(self):
        return len(self.messages)

    def wait(self, count, timeout=5.0):
        """Block until ``count`` messages in all; returns whether they came."""
        with self.event:
            return self.event.wait_for(lambda: len(self.messages) >= count, timeout)

    def wait_for_more(self, n=1, timeout=5.0):
        return self.wait(len(self) + n, timeout)

    def last(self, timeout=10.0):
        """The newest message (waiting for a first one)."""
        assert self.wait(1, timeout), 'no message recorded'
        return self.messages[-1]

    def wait_for_stamp(self, t, timeout=10.0):
        """Block until a message stamped at or after t (s) has arrived; returns it."""
        with self.event:
            assert self.event.wait_for(
                lambda: self.messages and stamp_of(self.messages[-1]) >= t, timeout), \
                f'no message stamped after {t}'
            return self.messages[-1]


class ArmView:
    """A test's view of one simulated arm: ``self.states`` records its joint_states.

    The arm's clock is the newest state's stamp (a simulator may run slower than real time,
    so tests wait on it, never on the wall clock). ``self.launch``, when set, gives the logs
    a failure shows.
    """

    states = launch = None

    def now(self):
        """Stamp of the newest joint state: the simulated arm's clock."""
        return stamp_of(self.states.last(timeout=30.0))

    def wait_until(self, t, timeout=60.0):
        """Until a state stamped ``t`` or later has been recorded."""
        deadline = time.monotonic() + timeout
        while self.now() < t:
            assert time.monotonic() < deadline, f'the simulated arm is stuck\n{self.logs()}'
            time.sleep(0.01)

    def wait(self, seconds, timeout=60.0):
        """Until the arm's clock has advanced by ``seconds``."""
        self.wait_until(self.now() + seconds, timeout)

    def logs(self):
        return self.launch.logs() if self.launch is not None else ''

    def joint_arrays(self, joints, since, until=float('inf'), fields=('position',), least=1):
        """States stamped in [since, until]: (stamps, one (k, len(joints)) array per field).

        The probe may miss states on a loaded machine: at least ``least`` of them.
        """
        picked = window(self.states, since, until)
        assert len(picked) >= least, f'{len(picked)} joint states in [{since}, {until}]'
        index = [list(picked[0].name).index(j) for j in joints]
        return (np.array([stamp_of(m) for m in picked]),
                *(np.array([np.asarray(getattr(m, f))[index] for m in picked]) for f in fields))


class Poller:
    """Takes the messages of the recorders' subscriptions every PERIOD s, in a thread of its own.

    The subscriptions are on a node no executor spins: rclpy's SingleThreadedExecutor spends
    about 150 µs of CPU on each message it delivers, a take in this loop about 35 µs, and the
    tests record several 1 kHz topics beside the nodes they test on two cores.
    """

    PERIOD = 0.002   # s

    def __init__(self):
        self.node = rclpy.create_node('test_recorder')
        self.recorders, self.lock = [], threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def record(self, msg_type, topic, qos):
        recorder = Recorder()   # the callback rclpy asks for; no executor calls it
        recorder.subscription = self.node.create_subscription(msg_type, topic, recorder, qos)
        with self.lock:
            self.recorders.append(recorder)
        return recorder

    def run(self):
        while not self.stopped.wait(self.PERIOD):
            with self.lock:
                for recorder in self.recorders:
                    recorder.take()

    def stop_recording(self, recorder):
        """No more messages for ``recorder``; its subscription is destroyed."""
        with self.lock:
            if recorder in self.recorders:
                self.recorders.remove(recorder)
                recorder.take()
                self.node.destroy_subscription(recorder.subscription)

    def stop_all(self):
        """Stop every recorder; the topics they were on (read before their subscriptions go)."""
        with self.lock:
            left = list(self.recorders)
        topics = [r.subscription.topic_name for r in left]
        for recorder in left:
            self.stop_recording(recorder)
        return topics

    def close(self):
        self.stop_all()
        self.stopped.set()
        self.thread.join(5.0)
        self.node.destroy_node()


class Probe(Node):
    """The test's own node: records topics (its poller), publishes, calls parameter services."""

    def __init__(self):
        super().__init__('test_probe')
        self.clients_ = {}
        self.poller = Poller()

    def record(self, msg_type, topic, qos=RELIABLE):
        return self.poller.record(msg_type, topic, qos)

    def stop_all_recording(self):
        """Stop every recorder a test module left; the topics they were on."""
        return self.poller.stop_all()

    def clear(self):
        """Destroy what a test module left: recorders (their topics returned) and clients."""
        left = self.stop_all_recording()
        for client in self.clients_.values():
            self.in_executor(self.destroy_client, client)
        self.clients_.clear()
        return left

    def stop_recording(self, *recorders):
        """No more messages for the recorders (the probe keeps up with a few 1 kHz topics)."""
        for recorder in recorders:
            self.poller.stop_recording(recorder)

    def remove_publishers(self, *publishers):
        for publisher in publishers:
            self.in_executor(self.destroy_publisher, publisher)

    def in_executor(self, function, *args, timeout=5.0):
        done = threading.Event()
        task = self.executor.create_task(function, *args)
        task.add_done_callback(lambda _: done.set())
        self.executor.wake()
        assert done.wait(timeout), f'the executor did not run {function}'
        return task.result()

    def wait_for_subscribers(self, publisher, count=1, timeout=10.0):
        """Until ``count`` subscriptions are matched with the publisher."""
        deadline = time.monotonic() + timeout
        while publisher.get_subscription_count() < count:
            assert time.monotonic() < deadline, f'no subscriber on {publisher.topic_name}'
            time.sleep(0.02)

    def wait_for_publishers(self, recorder, count=1, timeout=10.0):
        """Until ``count`` publishers are matched with the recorder's subscription."""
        deadline = time.monotonic() + timeout
        while recorder.subscription.get_publisher_count() < count:
            assert time.monotonic() < deadline, \
                f'no publisher on {recorder.subscription.topic_name}'
            time.sleep(0.02)

    def until_answered(self, publisher, make_message, recorder, timeout=30.0):
        """Publish make_message() until the recorder hears an answer: matched on both sides.

        A publisher sees the subscription before the subscriber has matched the publisher, and
        what it sends until then is lost; on a loaded machine that can take seconds. The
        assertion says which side had matched.
        """
        count, deadline = len(recorder), time.monotonic() + timeout
        while time.monotonic() < deadline:
            publisher.publish(make_message())
            if recorder.wait(count + 1, timeout=0.05):
                return
        raise AssertionError(
            f'no answer on {recorder.subscription.topic_name} in {timeout} s of publishing on '
            f'{publisher.topic_name}: the publisher has '
            f'{publisher.get_subscription_count()} subscriptions, the recorder '
            f'{recorder.subscription.get_publisher_count()} publishers')

    def call(self, srv_type, service, request, timeout=30.0, retry=2.0):
        """The service's response, the request sent again every ``retry`` s until ``timeout``.

        A client made for an earlier node of the same name sees the service as available while
        that node's ghost is still discovered, and a request sent before the new server has
        matched the client's response reader is lost; the parameter services are idempotent.
        Late in the whole suite a new node took 11.2 s to answer its first call (discovery
        repaired at Fast DDS's 3 s heartbeats), against milliseconds in a fresh process.
        """
        client = self.clients_.get(service)
        if client is None:
            client = self.clients_[service] = self.create_client(srv_type, service)
        assert client.wait_for_service(timeout), f'service {service} not available'
        deadline = time.monotonic() + timeout
        while True:
            future = client.call_async(request)
            done = threading.Event()
            future.add_done_callback(lambda _: done.set())
            if done.wait(min(retry, max(0.0, deadline - time.monotonic()))):
                return future.result()
            client.remove_pending_request(future)
            assert time.monotonic() < deadline, f'no answer from {service}'

    def set_parameters(self, node, values):
        """Set {name: value} one by one through the node's service; returns the results."""
        params = [Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
        return self.call(SetParameters, f'/{node}/set_parameters',
                         SetParameters.Request(parameters=params)).results

    def get_parameters(self, node, *names):
        values = self.call(GetParameters, f'/{node}/get_parameters',
                           GetParameters.Request(names=list(names))).values
        return {n: Parameter.from_parameter_msg(ParameterMsg(name=n, value=v)).value
                for n, v in zip(names, values)}

    def list_parameters(self, node):
        return list(self.call(ListParameters, f'/{node}/list_parameters',
                              ListParameters.Request()).result.names)
