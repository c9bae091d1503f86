"""Every mode from its minimal parameter file, over DDS, on a URDF no other node test uses.

example-robot-data's UR10 (ur10_robot.urdf, the whole tree from 'world': no base, no tip) is
given to each node in a file holding only ``robot_description`` and, for the controller,
``mode`` (doc/guides/minimal_parameters.md), as a new user would start it. Gravity compensation
answers a joint state with τ = g(q), computed torque with its default gains (ω = 20 rad/s,
ζ = 1: kp = ω², kd = 2 ζ ω) τ = rnea(q, q̇, kp e − kd q̇), the estimator publishes the external
joint torques (and no wrench: it has no tip), all checked against Pinocchio on the same file.
A joint state carrying none of the node's joints (a prefix mismatch) gets one throttled WARN
naming the joints expected and those that came.
"""
import importlib.metadata
import time
from unittest import mock

import numpy as np
import pinocchio as pin
import pytest
from geometry_msgs.msg import WrenchStamped
from rclpy.parameter import Parameter
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics.nodes.dynamics_controller import DynamicsController
from robot_dynamics.nodes.common.node import FOREIGN_PERIOD
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator
from ros_harness import file_specs, session, stamp_of, to_time

URDF = next(f.locate() for f in importlib.metadata.distribution('example-robot-data').files
            if f.name == 'ur10_robot.urdf')
JOINTS = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
          'wrist_2_joint', 'wrist_3_joint']
OMEGA, ZETA = 20.0, 1.0                   # rad/s, 1: the documented default of computed torque
KP, KD = OMEGA ** 2, 2.0 * ZETA * OMEGA
Q0 = np.array([0.3, -1.2, 1.0, -0.8, 0.5, 0.2])
PERIOD = 0.01   # s between the states the test streams (state_timeout is 0.1 s by default)
NODES = {   # label: (namespace, executable, its whole parameter file's ros__parameters)
    'gravity.dynamics_controller': ('gravity', 'dynamics_controller',
                                    {'mode': 'gravity_compensation'}),
    'computed.dynamics_controller': ('computed', 'dynamics_controller',
                                     {'mode': 'computed_torque'}),
    'estimator.wrench_estimator': ('estimator', 'wrench_estimator', {})}


class Pinocchio:
    """The independent reference: Pinocchio on the same URDF, vectors in JOINTS order."""

    def __init__(self):
        self.model = pin.buildModelFromUrdf(str(URDF))
        self.data = self.model.createData()
        joints = [self.model.joints[self.model.getJointId(j)] for j in JOINTS]
        self.idx_q, self.nq = [j.idx_q for j in joints], [j.nq for j in joints]
        self.idx_v = [j.idx_v for j in joints]

    def configuration(self, q):
        """q (one angle a joint) as Pinocchio's configuration: (cos, sin) for a continuous one."""
        full = pin.neutral(self.model)
        for i, n, x in zip(self.idx_q, self.nq, q):
            full[i:i + n] = [x] if n == 1 else [np.cos(x), np.sin(x)]
        return full

    def joints(self, x):
        return np.asarray(x)[self.idx_v]

    def tangent(self, x):
        full = np.zeros(self.model.nv)
        full[self.idx_v] = x
        return full

    def gravity(self, q):
        return self.joints(pin.computeGeneralizedGravity(self.model, self.data,
                                                         self.configuration(q)))

    def rnea(self, q, v, a):
        return self.joints(pin.rnea(self.model, self.data, self.configuration(q),
                                    self.tangent(v), self.tangent(a)))


def state(q, v=None, effort=None, names=JOINTS, stamp=None):
    msg = JointState(name=list(names), position=[float(x) for x in q],
                     velocity=[float(x) for x in (np.zeros(len(q)) if v is None else v)])
    if effort is not None:
        msg.effort = [float(x) for x in effort]
    msg.header.stamp = to_time(time.time() if stamp is None else stamp)
    return msg


class Nodes:
    """The three nodes, each from its minimal file, and the probe's topics to and from them."""

    def __init__(self, ros):
        self.ros, self.probe = ros, ros.probe
        specs = file_specs(ros.work / 'minimal_parameters', NODES,
                           {'robot_description': URDF.read_text()})
        self.states = {label: self.probe.create_publisher(
            JointState, f'/{namespace}/joint_states', 10)
            for label, (namespace, *_) in NODES.items()}
        self.fed = {}   # label -> time.monotonic() of the last state with its joints sent
        self.commands = {label: self.probe.record(
            Float64MultiArray, f'/{NODES[label][0]}/effort_controller/commands')
            for label in NODES if label.endswith('dynamics_controller')}
        self.torques = self.probe.record(
            JointState, '/estimator/wrench_estimator/external_joint_torques')
        self.wrench = self.probe.record(WrenchStamped, '/estimator/wrench_estimator/wrench')
        self.launch = ros.launch(specs)
        self.pinocchio = Pinocchio()

    def stream(self, label, make_state, seconds):
        """Publish a state every PERIOD for ``seconds``; the command answering the last one."""
        commands, publisher = self.commands[label], self.states[label]
        end = time.monotonic() + seconds
        while True:
            count = len(commands)
            publisher.publish(make_state())
            self.fed[label] = time.monotonic()
            if self.fed[label] >= end:
                break
            time.sleep(PERIOD)
        assert commands.wait(count + 1, timeout=10), self.launch.logs()
        return np.array(commands.messages[count].data)

    def close(self):
        codes = self.launch.stop()
        self.probe.stop_recording(*self.commands.values(), self.torques, self.wrench)
        self.probe.remove_publishers(*self.states.values())
        return codes


@pytest.fixture(scope='module')
def nodes(ros):
    n = Nodes(ros)
    try:
        n.launch.ready(timeout=300)   # a cold numba cache: three nodes compile at once
        for label, publisher in n.states.items():
            n.probe.wait_for_subscribers(publisher)
        for recorder in (*n.commands.values(), n.torques):
            n.probe.wait_for_publishers(recorder)
        # matched on both sides: each node has answered a state (ros_harness.until_answered)
        for label, recorder in (*n.commands.items(), ('estimator.wrench_estimator', n.torques)):
            n.probe.until_answered(n.states[label], lambda: state(Q0, effort=np.zeros(6)),
                                   recorder)
            n.fed[label] = time.monotonic()
        yield n
    finally:
        codes = n.close()
    assert codes == {label: 0 for label in NODES}, n.launch.logs()


def test_gravity_compensation_from_robot_description_and_mode(nodes):
    label = 'gravity.dynamics_controller'
    for q in (Q0, np.array([-1.0, -0.4, -1.9, 0.7, -1.2, 2.5])):
        # streamed: a jump of g(q) between the poses may take the rate limit a few states
        tau = nodes.stream(label, lambda: state(q), 0.5)
        np.testing.assert_allclose(tau, nodes.pinocchio.gravity(q), rtol=1e-9, atol=1e-9)


def test_computed_torque_from_robot_description_and_mode(nodes):
    """The held position q0, then the arm away from it: τ = rnea(q, q̇, kp (q0 − q) − kd q̇).

    With the default gains kp = ω², kd = 2 ζ ω. States that pause for state_timeout restart the
    hold from the pose they bring: the test raises it from 0.1 to 1 s at run time (a loaded
    machine pauses the probe for more than 0.1 s), makes one pause on purpose before each
    attempt, and repeats an attempt whose log shows another.
    """
    label, pinocchio = 'computed.dynamics_controller', nodes.pinocchio
    assert nodes.probe.set_parameters('computed/dynamics_controller',
                                      {'state_timeout': 1.0})[0].successful
    q1, v1 = Q0 + 0.01 * np.arange(1, 7), np.array([0.05, -0.03, 0.02, 0.04, -0.05, 0.06])
    at_rest = pinocchio.gravity(Q0)
    away = pinocchio.rnea(q1, v1, KP * (Q0 - q1) - KD * v1)
    assert (np.abs(away) < [330, 330, 150, 54, 54, 54]).all()   # the URDF's effort limits
    lost = r'no joint_states for 1.0 s'
    for attempt in range(3):
        time.sleep(1.5)   # no states: the controller stops; the next state is held
        before = nodes.launch.count(label, lost)
        tau_rest = nodes.stream(label, lambda: state(Q0), 0.3)
        tau_away = nodes.stream(label, lambda: state(q1, v1), 0.4)
        time.sleep(1.5)
        if nodes.launch.count(label, lost) == before + 1:   # only the one after the stream
            break
    else:
        pytest.fail(f'states paused longer than state_timeout in every attempt\n'
                    f'{nodes.launch.logs()}')
    np.testing.assert_allclose(tau_rest, at_rest, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(tau_away, away, rtol=1e-9, atol=1e-9)


def test_estimator_publishes_the_external_joint_torques_and_no_wrench(nodes):
    """At rest with efforts g(q) − τ_x, the observer converges to τ_ext = τ_x.

    Stamps 10 ms apart (its integration step), so it converges as e^(−50 t) on the states'
    clock, whatever the wall clock does: by 1.49 s, to e^(−74.5).
    """
    tau_x = np.array([2.0, -3.0, 1.5, 0.5, -0.4, 0.3])
    q = np.array([0.1, -1.6, 1.4, -1.0, 1.5, 0.0])
    effort = nodes.pinocchio.gravity(q) - tau_x
    publisher, t0, t_end = nodes.states['estimator.wrench_estimator'], time.time(), 1.49
    deadline, k = time.monotonic() + 30.0, 0
    # 150 states 2 ms apart, then on (20 ms apart) until one stamped t_end or later is answered:
    # a best-effort state lost on a busy loopback must not leave the test waiting for it
    while not (len(nodes.torques) and stamp_of(nodes.torques.messages[-1]) > t0 + t_end - 1e-6):
        assert time.monotonic() < deadline, \
            f'no estimate stamped after {t0 + t_end}\n{nodes.launch.logs()}'
        publisher.publish(state(q, effort=effort, stamp=t0 + PERIOD * k))
        k += 1
        time.sleep(0.002 if k < 150 else 0.02)
    nodes.fed['estimator.wrench_estimator'] = time.monotonic()
    last = nodes.torques.messages[-1]
    steps = (stamp_of(last) - t0) / PERIOD   # the state it answers: an integer, 149 or more
    assert abs(steps - round(steps)) * PERIOD < 1e-6 and round(steps) < k
    estimate = dict(zip(last.name, last.effort))
    np.testing.assert_allclose([estimate[j] for j in JOINTS], tau_x, atol=1e-6)
    assert len(nodes.wrench) == 0   # the wrench needs a tip
    assert "publishing ~/external_joint_torques only; ~/wrench needs the tip parameter" in \
        nodes.launch.log('estimator.wrench_estimator')


def test_an_empty_tip_is_the_whole_tree_for_both_nodes(nodes):
    for label, (namespace, executable, _) in NODES.items():
        node = f'{namespace}/{executable}'
        assert nodes.probe.get_parameters(node, 'tip', 'base') == {'tip': '', 'base': ''}
        assert f"ready: 6 joints {JOINTS}, world -> (whole tree)" in nodes.launch.log(label)


def test_states_naming_none_of_the_joints_get_a_throttled_warning(nodes):
    """Prefixed names, as a second arm's driver sends them: one WARN a FOREIGN_PERIOD.

    Only while none of the node's own joints came for that long (a gripper's states beside the
    arm's stay quiet: test_inputs.py); the test waits that long after its own states.
    """
    foreign = [f'left_{j}' for j in JOINTS]
    labels = ('gravity.dynamics_controller', 'estimator.wrench_estimator')
    quiet_since = max(nodes.fed.get(label, -np.inf) for label in labels)
    time.sleep(max(0.0, quiet_since + FOREIGN_PERIOD + 0.2 - time.monotonic()))
    commands = len(nodes.commands['gravity.dynamics_controller'])
    for _ in range(50):   # 0.5 s of them: within the throttle period
        for label in labels:
            nodes.states[label].publish(state(Q0, effort=np.zeros(6), names=foreign))
        time.sleep(PERIOD)
    expected = f"joint_states carry none of the joints {JOINTS}, got {foreign}"
    deadline = time.monotonic() + 10
    while not all(expected in nodes.launch.log(label) for label in labels):
        assert time.monotonic() < deadline, nodes.launch.logs()
        time.sleep(0.05)
    time.sleep(0.2)
    for label in labels:
        assert nodes.launch.count(label, r'\[WARN\].*carry none of the joints') == 1, \
            nodes.launch.log(label)
    assert len(nodes.commands['gravity.dynamics_controller']) == commands


# -- in process (no DDS): both reading paths, and what each feature asks for when on ----------

def in_process(node_class, name, **values):
    """A node on the UR10 with ``tip`` and ``base`` given empty, its clocks and logger faked."""
    session()   # rclpy
    values = {'robot_description': URDF.read_text(), 'base': '', 'tip': '', **values}
    node = node_class(namespace=f'/minimal_{name}', parameter_overrides=[
        Parameter(k, value=v) for k, v in values.items()])
    node.clock, node.logger = 1000.0, mock.Mock()
    node.monotonic_time = lambda: node.clock
    node.get_logger = lambda: node.logger
    return node


def foreign_warnings(node):
    return [c for c in node.logger.warning.call_args_list if 'carry none of' in c.args[0]]


@pytest.mark.parametrize('node_class', [DynamicsController, WrenchEstimator])
def test_states_naming_none_of_the_joints_warn_on_the_plain_and_the_compiled_reader(node_class):
    """Each path warns, naming what it expected and what came, while its own joints stay away.

    The second serialized state with the same names is read by the compiled reader (no plain
    read): it warns too. After an own state, none until FOREIGN_PERIOD without them.
    """
    node = in_process(node_class, node_class.NAME, mode='gravity_compensation') \
        if node_class is DynamicsController else in_process(node_class, node_class.NAME)
    foreign = [f'left_{j}' for j in JOINTS]
    expected = f"joint_states carry none of the joints {JOINTS}, got {foreign}"
    stamp = time.time()

    def feed(names, how):
        node.clock += 0.01
        msg = state(Q0, effort=np.zeros(6), names=names, stamp=stamp + node.clock - 1000.0)
        with mock.patch('time.perf_counter', return_value=node.clock), \
                mock.patch('time.monotonic', return_value=node.clock):
            if how == 'plain':
                node.on_joint_state(msg)
            else:
                node.on_serialized_joint_state(serialize_message(msg))

    feed(foreign, 'plain')
    feed(foreign, 'serialized')   # new names: mapped by the plain reader
    plain_reads = node.reader.plain_reads
    feed(foreign, 'serialized')   # the same names: the compiled reader
    assert node.reader.plain_reads == plain_reads
    warnings = foreign_warnings(node)
    assert [c.args[0].startswith(expected) for c in warnings] == [True] * 3, warnings
    assert {c.kwargs['throttle_duration_sec'] for c in warnings} == {FOREIGN_PERIOD}
    feed(JOINTS, 'serialized')   # the arm's own states come: a foreign one is no news
    feed(foreign, 'serialized')
    assert len(foreign_warnings(node)) == 3
    node.clock += FOREIGN_PERIOD
    feed(foreign, 'serialized')
    assert len(foreign_warnings(node)) == 4
    node.destroy_node()


def test_features_ask_for_the_tip_only_when_on():
    """On the whole tree each feature that needs a frame says so when switched on, and why."""
    node = in_process(DynamicsController, 'features', mode='gravity_compensation')
    refused = {
        'mode cartesian_impedance needs the tip parameter': {'mode': 'cartesian_impedance'},
        'mode operational_space needs the tip parameter': {'mode': 'operational_space'},
        'pfl.enable needs contact points: set pfl.frames, or the tip parameter':
            {'pfl.enable': True},
        'payload.*: the payload sits at the tip: it needs the tip parameter':
            {'payload.mass': 1.0},
        'collision.force_threshold > 0 needs the tip parameter':
            {'collision.enable': True, 'collision.force_threshold': 50.0}}
    for reason, values in refused.items():
        result = node.set_parameters_atomically([Parameter(k, value=v)
                                                 for k, v in values.items()])
        assert not result.successful and reason in result.reason, (reason, result.reason)
    for values in ({'mode': 'computed_torque'}, {'collision.enable': True},
                   {'pfl.frames': ['tool0'], 'pfl.enable': True}):
        result = node.set_parameters_atomically([Parameter(k, value=v)
                                                 for k, v in values.items()])
        assert result.successful, (values, result.reason)
    result = node.set_parameters_atomically([   # no contact points again: PFL off, s = 1
        Parameter('pfl.enable', value=False),
        Parameter('pfl.frames', Parameter.Type.STRING_ARRAY, [])])
    assert result.successful, result.reason
    commands = []
    node.publisher.publish = commands.append
    with mock.patch('time.monotonic', return_value=node.clock):
        node.on_joint_state(state(Q0, effort=np.zeros(6)))   # collision detection is on
    assert len(commands) == 1 and node.limiter.s == 1.0
    node.destroy_node()
    estimator = in_process(WrenchEstimator, 'frame', reference_frame='')
    result = estimator.set_parameters([Parameter('reference_frame', value='world')])[0]
    assert not result.successful
    assert "reference_frame 'world': ~/wrench needs the tip parameter" in result.reason
    estimator.destroy_node()
    with_tip = in_process(WrenchEstimator, 'tip', tip='tool0')
    result = with_tip.set_parameters([Parameter('reference_frame', value='ee_link')])[0]
    assert result.reason == ("reference_frame must be the base link 'world' or the tip link "
                             "'tool0' (empty: the base), got 'ee_link'")
    with_tip.destroy_node()


@pytest.mark.parametrize('node_class', [DynamicsController, WrenchEstimator])
def test_states_before_the_model_are_ignored_with_a_warning(node_class):
    """robot_description from its topic, joint states first (a driver up before it): no crash."""
    node = in_process(node_class, f'early_{node_class.NAME}', robot_description='')
    node.warn = node.logger.warning   # unthrottled, into the fake logger
    msg = state(Q0, effort=np.zeros(6))
    node.on_joint_state(msg)
    node.on_serialized_joint_state(serialize_message(msg))
    warned = [c.args[0] for c in node.logger.warning.call_args_list]
    assert 'no model yet: joint states ignored until robot_description arrives' in warned
    node.destroy_node()


def test_pfl_on_at_configure_stays_on_and_off_at_configure_may_come_and_go():
    """The run-time ceiling (dynamics_controller.limits) on power and force limiting."""
    def change(node, **values):
        return node.set_parameters_atomically([
            Parameter(k.replace('__', '.'), value=v) for k, v in values.items()])

    on = in_process(DynamicsController, 'pfl_on', tip='tool0', **{
        'pfl.enable': True, 'pfl.body_regions': ['chest']})
    off = change(on, pfl__enable=False)
    assert not off.successful and 'pfl.enable was on at configure' in off.reason
    other = change(on, pfl__body_regions=['hand'])
    assert not other.successful and 'pfl.body_regions sets the PFL speed limits' in other.reason
    on.destroy_node()
    free = in_process(DynamicsController, 'pfl_off', tip='tool0')
    for values in ({'pfl__enable': True, 'pfl__body_regions': ['hand']},
                   {'pfl__body_regions': ['chest']}, {'pfl__enable': False}):
        result = change(free, **values)
        assert result.successful, (values, result.reason)
    free.destroy_node()
