"""The nodes' fast path (CDR bytes in, and out) against their plain path: the same outputs.

Two in-process dynamics_controllers with the same parameters and the same fake clocks get the
same joint states: one as messages (``on_joint_state``, the plain path), the other as the bytes
rclpy's ``serialize_message`` makes of them (``on_serialized_joint_state``, what its raw
subscription hands over). Every published command must be the same to the bit, and so must the
counters, the warnings (rejection reasons) and the samples kept for payload identification.
In computed torque, gravity compensation and the task-space modes the fast path's states go
through the compiled cycle (nodes/dynamics_controller/command_cycle.py), all but the first of
a smooth motion; the estimator's through its own (nodes/wrench_estimator/estimator_cycle.py),
all but the first (which anchors the observer). In the task-space modes the tip poses
published and the condition number kept for /diagnostics must be the same too.
Sequences: a smooth motion along a trajectory (in the task-space modes: target poses, a stream
of them and a target wrench), and fuzzed ones (reordered, partial, extra and repeated joints,
NaN/Inf, missing or short fields, stamps unset, stale, out of order or jumping ahead, time
passing beyond state_timeout, parameter changes, targets), in computed torque, gravity
compensation (with and without collision detection), both task-space modes, and a task-space
mode on a gravity-compensating arm (which the compiled cycle does not serve).
The wrench estimator likewise (its fast path reads, and publishes both outputs serialized).
"""
import copy
import math
import time
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from rclpy.parameter import Parameter
from rclpy.serialization import deserialize_message, serialize_message
from scipy.spatial.transform import Rotation
from geometry_msgs.msg import PoseStamped, WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.nodes.dynamics_controller import controller_state
from robot_dynamics.nodes.dynamics_controller.command_cycle import CommandCycle
from robot_dynamics.nodes.dynamics_controller.cartesian_modes import (MODES as TASK_MODES,
                                                                      TIP_POSE_PERIOD)
from robot_dynamics.nodes.dynamics_controller import DynamicsController
from robot_dynamics.nodes.wrench_estimator.estimator_cycle import EstimatorCycle
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator
from ros_harness import to_duration, to_time

PARAMS = bringup.load_config(bringup.config_file('panda.yaml'))['dynamics_controller'][
    'ros__parameters']
JOINTS = PARAMS['joints']
ESTIMATOR_PARAMS = bringup.load_config(bringup.config_file('panda.yaml'))['wrench_estimator'][
    'ros__parameters']
URDF = open(rd.robot_urdf('panda')).read()
MODEL = rd.load_urdf(URDF, PARAMS['base'], PARAMS['tip'])
POSE = np.array([0.3, -0.5, 0.2, -2.0, 0.4, 1.6, -0.7])
CONFIGS = {
    'computed_torque': {'mode': 'computed_torque'},
    'gravity_compensation': {'mode': 'gravity_compensation'},
    'gravity_compensation_collision': {'mode': 'gravity_compensation', 'collision.enable': True},
    'cartesian_impedance': {'mode': 'cartesian_impedance'},
    'cartesian_impedance_limited': {'mode': 'cartesian_impedance', 'cartesian.max_velocity':
                                    [0.2, 0.5], 'cartesian.coriolis_compensation': True},
    'operational_space': {'mode': 'operational_space'},
    'operational_space_unshaped': {'mode': 'operational_space',
                                   'operational_space.inertia_shaping': False},
    'cartesian_impedance_compensating_arm': {
        'mode': 'cartesian_impedance', 'hardware_compensates_gravity': True,
        'measured_effort': 'torque_minus_gravity'}}
COMPILED = ('computed_torque', 'gravity_compensation', 'cartesian_impedance',
            'cartesian_impedance_limited', 'operational_space', 'operational_space_unshaped',
            'wrench_estimator')   # what a compiled cycle serves
FUZZ = settings(max_examples=25, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


def state_parts(topic, msg):
    """(part, msg) for each part of the controller state a message published on ``topic`` carries.

    A JointState fallback (``~/controller_state/<part>``) is one part. A control_msgs
    JointTrajectoryControllerState (``~/controller_state``, where control_msgs imports: once a
    test of this session has built it) carries each of its points that is not empty.
    """
    if topic != 'controller_state':
        return [(topic, msg)]
    fields = ('positions', 'velocities', 'accelerations', 'effort')
    return [(part, msg) for part in controller_state.PARTS
            if any(len(getattr(getattr(msg, part), f)) for f in fields)]


class Twin:
    """Two controllers, plain and fast, driven alike; their outputs recorded."""

    def __init__(self, overrides, node_class=DynamicsController, params=PARAMS):
        self.clock, self.t0 = 1000.0, time.time()
        self.nodes = [self._node(node_class, f'/{path}', {**params, **overrides})
                      for path in ('plain', 'fast')]
        self.commands, self.warnings, self.tips = ([], []), ([], []), ([], [])
        self.states = ([], [])   # ~/controller_state's (part, message) pairs (``state_parts``)
        for k, node in enumerate(self.nodes):
            self.spy(node, self.commands[k])
            node.warn = self.warnings[k].append
            if hasattr(node, 'task'):
                node.task.tip_pose.publish = lambda msg, k=k: self.tips[k].append(
                    copy.deepcopy(msg))
            for publisher in getattr(getattr(node, 'state', None), 'publishers', None) or ():
                part = publisher.topic_name.rsplit('/', 1)[1]
                publisher.publish = lambda msg, k=k, part=part: \
                    self.states[k].extend(state_parts(part, copy.deepcopy(msg)))

    def spy(self, node, outputs):
        node.publisher.publish = outputs.append

    def _node(self, node_class, namespace, params):
        values = {**params, 'robot_description': URDF, 'state_timeout': 0.1}
        node = node_class(namespace=namespace, parameter_overrides=[
            Parameter(k, value=v) for k, v in values.items()])
        node.monotonic_time = lambda: self.clock
        return node

    def now(self):
        """The arm's clock: wall time at the start plus the fake time elapsed."""
        return self.t0 + self.clock - 1000.0

    def state(self, msg):
        """One joint state to both (time.time() and time.monotonic() are the fake clock)."""
        self.clock += 0.001
        with mock.patch('time.time', return_value=self.now()), \
                mock.patch('time.monotonic', return_value=self.clock):
            self.nodes[0].on_joint_state(msg)
            self.nodes[1].on_serialized_joint_state(serialize_message(msg))
        self.check()

    def trajectory(self, msg):
        for node in self.nodes:
            node.on_trajectory(msg)
        self.check()

    def target(self, msg):
        """A ~/target_pose or ~/target_wrench to both, on the fake clock (a stream's timing)."""
        with mock.patch('time.monotonic', return_value=self.clock):
            for node in self.nodes:
                (node.task.on_target_pose if isinstance(msg, PoseStamped)
                 else node.task.on_target_wrench)(msg)
        self.check()

    def parameter(self, name, value):
        results = []
        for node in self.nodes:
            try:
                results.append(node.set_parameters([Parameter(name, value=value)])[0].successful)
            except Exception as error:   # rclpy refuses some values before the node sees them
                results.append(str(error).replace('/fast', '/plain'))
        assert results[0] == results[1]
        self.check()

    def wait(self, seconds):
        for _ in range(max(1, int(seconds / 0.02))):
            self.clock += min(seconds, 0.02)
            for node in self.nodes:
                node.watchdog.check()
        self.check()

    def check(self):
        """The same commands (values to the bit; a message, bytes), counters, warnings."""
        plain, fast = self.commands
        assert len(plain) == len(fast)
        for message, data in zip(plain[-1:], fast[-1:]):
            assert isinstance(message, Float64MultiArray) and isinstance(data, bytes)
            decoded = deserialize_message(data, Float64MultiArray)
            assert (not decoded.layout.dim and decoded.layout.data_offset == 0
                    and message.layout == decoded.layout)
            assert np.array_equal(np.array(message.data), np.array(decoded.data)), (
                message.data, decoded.data)
        a, b = (node.diagnostics.counts for node in self.nodes)
        assert a == b
        assert self.warnings[0] == self.warnings[1]
        assert self.tips[0] == self.tips[1]
        assert self.states[0] == self.states[1]
        laws = [node.task.law for node in self.nodes]
        if laws[0] is not None:   # the condition number /diagnostics reports
            assert np.array_equal(laws[0].condition, laws[1].condition, equal_nan=True)
        s, t = (node.identification.samples for node in self.nodes)
        assert s.count == t.count and np.array_equal(s.speed, t.speed, equal_nan=True)
        for x, y in zip(s.window(), t.window()):
            assert np.array_equal(x, y, equal_nan=True)

    def close(self):
        for node in self.nodes:
            node.destroy_node()


class EstimatorTwin(Twin):
    """Two wrench estimators, plain and fast: the same torques and wrenches, stamps included."""

    def __init__(self, overrides):
        super().__init__(overrides, WrenchEstimator, ESTIMATOR_PARAMS)

    def spy(self, node, outputs):
        fast = node.get_namespace() == '/fast'

        def publish(message, kind):   # the fast path's outputs are bytes, the plain's messages
            assert isinstance(message, bytes) == fast
            outputs.append(deserialize_message(message, kind) if fast else copy.deepcopy(message))
        for publisher, kind in ((node.torque_publisher, JointState),
                                (node.wrench_publisher, WrenchStamped)):
            publisher.publish = lambda m, kind=kind: publish(m, kind)

    def wait(self, seconds):
        self.clock += seconds

    def check(self):
        plain, fast = self.commands
        assert len(plain) == len(fast)
        for a, b in zip(plain[-2:], fast[-2:]):
            assert a == b   # every field: names, stamps, values (never NaN: checked first)
        a, b = (node.diagnostics.counts for node in self.nodes)
        assert a == b
        assert self.warnings[0] == self.warnings[1]


def joint_state(names, position, velocity=(), effort=(), stamp=None):
    msg = JointState(name=list(names), position=list(position), velocity=list(velocity),
                     effort=list(effort))
    if stamp is not None:
        msg.header.stamp = to_time(max(stamp, 0.0))
    return msg


def target_pose(offset, angle, stamp=None, frame_id=''):
    """A ~/target_pose in ``frame_id`` (at POSE).

    The tip at POSE moved by ``offset`` (m, in frame_id's axes), turned by ``angle`` (rad) about
    the base's z.
    """
    T = rd.frame_pose(MODEL, POSE, MODEL.tip)
    if frame_id in MODEL.frame_names:
        T = np.linalg.solve(rd.frame_pose(MODEL, POSE, frame_id), T)
    msg = PoseStamped()
    msg.header.frame_id = frame_id
    if stamp is not None:
        msg.header.stamp = to_time(stamp)
    p, o = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z = (T[:3, 3] + offset).tolist()
    turned = Rotation.from_rotvec([0.0, 0.0, angle]) * Rotation.from_matrix(T[:3, :3])
    o.x, o.y, o.z, o.w = turned.as_quat().tolist()
    return msg


def target_wrench(force, frame_id=''):
    msg = WrenchStamped()
    msg.header.frame_id = frame_id
    msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = force
    msg.wrench.torque.z = 0.1 * force[0]
    return msg


def trajectory(start):
    """Two points away from POSE and back, on the states' clock from ``start``."""
    points = [JointTrajectoryPoint(positions=list(POSE + d), time_from_start=to_duration(t))
              for d, t in ((0.1, 0.05), (0.0, 0.1))]
    msg = JointTrajectory(joint_names=JOINTS, points=points)
    msg.header.stamp = to_time(start)
    return msg


def targets(twin, k):
    """The task-space modes' targets during the motion.

    A pose, a stream of stamped poses (a target twist), a pose in a moving frame, a wrench in
    the tip's axes.
    """
    if k == 30:
        twin.target(target_pose([0.02, -0.01, 0.03], 0.1))
    elif 100 <= k < 160 and k % 10 == 0:
        twin.target(target_pose([0.02 + 1e-3 * (k - 100), -0.01, 0.03], 0.1, twin.now()))
    elif k == 200:
        twin.target(target_pose([0.0, 0.05, 0.0], -0.1, frame_id='panda_link7'))
    elif k == 250:
        twin.target(target_wrench([1.0, -2.0, 3.0], frame_id=MODEL.tip))


@pytest.mark.parametrize('config', [*CONFIGS, 'wrench_estimator'])
def test_a_motion_gives_the_same_commands(ros_in_process, config):
    """A smooth motion (with a trajectory to track, or task targets) at 1 kHz.

    The compiled reader reads it, and the compiled cycle serves every state but the first.
    """
    twin = Twin(CONFIGS[config]) if config in CONFIGS else EstimatorTwin({})
    rng = np.random.default_rng(1)
    cycle = CommandCycle if config in CONFIGS else EstimatorCycle
    served, run = [], cycle.run

    def counted(self, *args):   # served: a command's status >= 0, the estimator's τ_ext
        result = run(self, *args)
        served.append(result >= 0 if cycle is CommandCycle else result is not None)
        return result
    try:
        with mock.patch.object(cycle, 'run', counted):
            for k in range(300):
                t = 1e-3 * k
                q = POSE + 0.05 * np.sin(2 * math.pi * t + np.arange(7))
                v = 0.1 * math.pi * np.cos(2 * math.pi * t + np.arange(7))
                effort = rd.gravity(MODEL, q) + rng.normal(0.0, 0.05, 7)
                order = [6, 0, 5, 1, 4, 2, 3]   # the driver's order, with a gripper joint
                twin.state(joint_state([JOINTS[i] for i in order] + ['panda_finger_joint1'],
                                       [*q[order], 0.01], [*v[order], 0.0],
                                       [*effort[order], 0.0], twin.now()))
                if k == 20 and config in CONFIGS:
                    twin.trajectory(trajectory(twin.now()))
                if CONFIGS.get(config, {}).get('mode') in TASK_MODES:
                    targets(twin, k)
        assert len(served) == (299 if config in COMPILED else 0) and all(served)
        assert len(twin.commands[0]) == 300 * (1 if config in CONFIGS else 2)
        if config in CONFIGS:   # ~/controller_state at 50 Hz: the first state, 14-15 more
            parts = [part for part, _ in twin.states[0]]
            published = parts.count('feedback')
            assert published in (15, 16) and parts.count('output') == published
            tracking = CONFIGS[config]['mode'] == 'computed_torque'
            assert parts.count('reference') == parts.count('error') == tracking * published
        if config in CONFIGS and CONFIGS[config]['mode'] in TASK_MODES:
            # ~/tip_pose every TIP_POSE_PERIOD, on the states' 1 ms steps
            assert len(twin.tips[0]) >= 0.299 / (TIP_POSE_PERIOD + 1e-3)
            assert not [w for w in twin.warnings[0] if 'target' in w]   # targets taken
        assert twin.nodes[1].reader.plain_reads == 1   # the first: its names mapped, then compiled
    finally:
        twin.close()


BAD = st.sampled_from([math.nan, math.inf, -math.inf, 1e300, 0.0])
EXTRA = ['panda_finger_joint1', 'unknown_joint']


@st.composite
def fuzzed_state(draw):
    """A joint state near POSE, sometimes broken in one of the ways joint_states can be."""
    names = list(draw(st.permutations(JOINTS))) + draw(st.lists(st.sampled_from(EXTRA),
                                                                max_size=2, unique=True))
    kind = draw(st.integers(0, 12))
    if kind == 0:
        names = names[:draw(st.integers(0, 6))]        # partial (or none of ours, or empty)
    elif kind == 1:
        names.append(draw(st.sampled_from(JOINTS)))    # a joint twice
    elif kind == 2:
        names = EXTRA                                  # only someone else's joints
    n = len(names)

    def field(scale):
        size = draw(st.sampled_from([n] * 8 + [0, max(n - 1, 0), n + 1]))
        x = [float(POSE[i % 7]) * scale + draw(st.floats(-0.2, 0.2)) for i in range(size)]
        for i in draw(st.lists(st.integers(0, size - 1), max_size=1)) if size else []:
            x[i] = draw(BAD)
        return x
    stamp = draw(st.sampled_from([None, -10.0, -0.01, -0.0005, 0.0, 0.0, 0.0, 0.002, 10.0]))
    return names, field(1.0), field(0.1), field(10.0), stamp


@st.composite
def fuzzed_target(draw):
    """A target pose (unstamped, or stamped near now: a stream, stale) or wrench, maybe bad."""
    frame_id = draw(st.sampled_from(['', '', 'panda_link0', 'panda_link7', 'no_such_frame']))
    if draw(st.booleans()):
        return 'target', target_wrench([draw(st.sampled_from([0.0, 2.0, math.nan])), 1.0, -1.0],
                                       frame_id)
    offset = [draw(st.floats(-0.05, 0.05)) for _ in range(3)]
    stamp = draw(st.sampled_from([None, -0.05, -0.001, 0.0, 0.0, 0.01, 0.2]))
    msg = target_pose(offset, draw(st.floats(-0.3, 0.3)), None, frame_id)
    if draw(st.integers(0, 7)) == 0:
        msg.pose.orientation.w = msg.pose.orientation.x = draw(BAD)
    return 'target', msg, stamp


ACTIONS = st.one_of(
    fuzzed_state(), fuzzed_state(), fuzzed_state(), fuzzed_target(),
    st.tuples(st.just('state'), st.floats(-0.1, 0.1)),   # a good one, as the first three
    st.tuples(st.just('wait'), st.sampled_from([0.001, 0.05, 0.3])),
    st.tuples(st.just('trajectory'), st.sampled_from([0.0, 0.05])),
    st.tuples(st.just('parameter'), st.sampled_from([
        ('effort_limits', [5.0] * 7), ('effort_limits', []), ('max_effort_rate', 10.0),
        ('max_effort_rate', 1000.0), ('mode', 'computed_torque'),
        ('mode', 'gravity_compensation'), ('mode', 'cartesian_impedance'),
        ('mode', 'operational_space'), ('cartesian.coriolis_compensation', True),
        ('cartesian.max_velocity', [0.1, 0.2]), ('operational_space.inertia_shaping', False),
        ('nullspace.posture', list(POSE)), ('nullspace.posture', []), ('payload.mass', 1.0),
        ('kp', [-1.0] * 7)])))


@pytest.mark.parametrize('config', [*CONFIGS, 'wrench_estimator'])
@given(actions=st.lists(ACTIONS, min_size=1, max_size=30))
@FUZZ
def test_fuzzed_states_give_the_same_commands(ros_in_process, config, actions):
    twin = Twin(CONFIGS[config]) if config in CONFIGS else EstimatorTwin({})

    def good(dq=0.0):   # a joint state in the order of the first, stamped now
        twin.state(joint_state(JOINTS, POSE + dq, np.full(7, dq), rd.gravity(MODEL, POSE),
                               twin.now()))
    try:
        for _ in range(3):   # commanding, so that stamps are checked
            good()
        for action in actions:
            if action[0] == 'wait':
                twin.wait(action[1])
            elif action[0] == 'trajectory' and config in CONFIGS:
                twin.trajectory(trajectory(twin.now() + action[1]))
            elif action[0] == 'parameter' and config in CONFIGS:
                twin.parameter(*action[1])
            elif action[0] == 'state':
                good(action[1])
            elif action[0] == 'target' and config in CONFIGS:
                if action[2:] and action[2] is not None:   # a pose stamped near now
                    action[1].header.stamp = to_time(twin.now() + action[2])
                twin.target(action[1])
            elif action[0] not in ('trajectory', 'parameter', 'target'):   # a fuzzed state
                names, position, velocity, effort, offset = action
                twin.state(joint_state(names, position, velocity, effort,
                                       None if offset is None else twin.now() + offset))
        for _ in range(3):   # what the compiled cycles make of the state the actions left
            good(0.01)
    finally:
        twin.close()


def test_both_paths_over_dds_answer_alike(ros):
    """Over loopback DDS, fast_path true and false answer the same states with the same commands.

    Both controllers in gravity compensation; the states scrambled, with a gripper joint, one
    with a NaN in between (no command). The fast path is the default, which the other node
    tests run; this one also runs the plain path end to end.
    """
    probe, recorders, publishers = ros.probe, {}, {}
    specs = []
    for path in ('fast', 'plain'):
        specs += bringup.nodes('gravity_compensation', namespace=path, overrides={
            'dynamics_controller': {'fast_path': path == 'fast', 'max_effort_rate': 1e9,
                                    'state_timeout': 1.0}})
        recorders[path] = probe.record(Float64MultiArray, f'/{path}/effort_controller/commands')
        publishers[path] = probe.create_publisher(JointState, f'/{path}/joint_states', 10)
    launch = ros.launch(specs)
    try:
        launch.ready()
        for path in publishers:
            probe.wait_for_subscribers(publishers[path])
            probe.wait_for_publishers(recorders[path])
        order = [3, 0, 6, 1, 5, 2, 4]

        def state(q):
            return joint_state([JOINTS[i] for i in order] + ['panda_finger_joint1'],
                               [*np.asarray(q)[order], 0.0], [0.0] * 8, [0.0] * 8, time.time())

        def send(q, answered=True):
            msg = state(q)
            counts = {path: len(recorders[path]) for path in publishers}
            for path in publishers:
                publishers[path].publish(msg)
            if not answered:
                time.sleep(0.2)
            return {path: recorders[path].wait(counts[path] + 1, 0.2 if not answered else 5.0)
                    and np.array(recorders[path].messages[counts[path]].data)
                    for path in publishers}

        for path in publishers:
            probe.until_answered(publishers[path], lambda: state(POSE), recorders[path])
        time.sleep(0.5)   # any late answer to a state sent before discovery completed
        for q in (POSE, POSE[::-1] * 0.5, [math.nan, *POSE[1:]], POSE + 0.1):
            commands = send(q, answered=np.isfinite(q).all())
            if np.isfinite(q).all():
                assert np.array_equal(commands['fast'], commands['plain'])
            else:
                assert commands == {'fast': False, 'plain': False}
        for path in publishers:
            assert 'non-finite position' in launch.log(f'{path}.dynamics_controller')
    finally:
        codes = launch.stop()
        probe.stop_recording(*recorders.values())
        probe.remove_publishers(*publishers.values())
    assert set(codes.values()) == {0}, launch.logs()
