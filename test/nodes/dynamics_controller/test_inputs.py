"""dynamics_controller alone, fed by the test (about 20 s).

The commands against Pinocchio, bad joint states, parameter validation, stale states, QoS, the
model from the robot_description topic, and a configuration error at start.

The joint states the test sends are reordered and carry extra joints; every command is checked
against Pinocchio on the same URDF (g(q), and M(q) K_p e + g(q) for computed torque at rest).
"""
import pathlib
import time

import numpy as np
import pinocchio as pin
import pytest
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.nodes.common.joint_states import DESCRIPTION_QOS
from ros_harness import to_time

CONFIG = bringup.load_config(bringup.config_file('panda.yaml'))
JOINTS = CONFIG['dynamics_controller']['ros__parameters']['joints']
KP = np.array(CONFIG['dynamics_controller']['ros__parameters']['kp'])
EXTRA = ['panda_finger_joint1', 'gripper_camera_joint']
POSE = np.array([0.3, -0.5, 0.2, -2.0, 0.4, 1.6, -0.7])
TIMEOUT = 1.0   # state_timeout, s: longer than any pause between two states of these tests


class Pinocchio:
    """Independent reference: Pinocchio on the whole URDF, fingers at 0."""

    def __init__(self):
        self.model = pin.buildModelFromUrdf(rd.robot_urdf('panda'))
        self.data = self.model.createData()
        self.index = [self.model.joints[self.model.getJointId(j)].idx_v for j in JOINTS]

    def configuration(self, q):
        full = pin.neutral(self.model)
        full[self.index] = q
        return full

    def gravity(self, q):
        return pin.computeGeneralizedGravity(self.model, self.data, self.configuration(q))[
            self.index]

    def mass_matrix(self, q):
        M = pin.crba(self.model, self.data, self.configuration(q))
        M = np.triu(M) + np.triu(M, 1).T
        return M[np.ix_(self.index, self.index)]


class Controller:
    def __init__(self, ros):
        self.ros, self.probe = ros, ros.probe
        self.commands = self.probe.record(Float64MultiArray, 'effort_controller/commands')
        self.states = self.probe.create_publisher(JointState, 'joint_states', 10)
        self.launch = ros.launch(bringup.nodes('gravity_compensation', robot='panda', overrides={
            'dynamics_controller': {'state_timeout': TIMEOUT,
                                    # single commands against Pinocchio: no rate limit here
                                    # (tested in test_faults.py)
                                    'max_effort_rate': 1e9}}))
        self.pinocchio = Pinocchio()

    def state(self, q, v=None, names=None):
        """A JointState in a scrambled order with extra joints, as a robot might publish."""
        names = names or [JOINTS[i] for i in (3, 0, 6, 1, 5, 2, 4)] + EXTRA
        values = dict(zip(JOINTS, q)), dict(zip(JOINTS, np.zeros(7) if v is None else v))
        msg = JointState(name=names)
        msg.header.stamp = to_time(time.time())
        msg.position = [float(values[0].get(n, 0.0)) for n in names]
        msg.velocity = [float(values[1].get(n, 0.0)) for n in names]
        msg.effort = [0.0] * len(names)
        return msg

    def send(self, msg, answered=True):
        """Publish one joint state; returns the command answering it (None if it must not)."""
        count = len(self.commands)
        self.states.publish(msg)
        if answered:
            assert self.commands.wait(count + 1, timeout=5), self.launch.logs()
            return np.array(self.commands.messages[count].data)
        time.sleep(0.1)
        assert len(self.commands) == count, f'a command answered {msg}'

    def set(self, **values):
        """Set parameters ('__' for '.'); returns the results."""
        return self.probe.set_parameters('dynamics_controller',
                                         {k.replace('__', '.'): v for k, v in values.items()})


@pytest.fixture(scope='module')
def controller(ros):
    c = Controller(ros)
    try:
        c.startup = c.launch.ready()
        c.probe.wait_for_subscribers(c.states)
        c.probe.wait_for_publishers(c.commands)
        c.probe.until_answered(c.states, lambda: c.state(POSE), c.commands)
        time.sleep(0.2)
        yield c
    finally:
        codes = c.launch.stop()
        c.probe.stop_recording(c.commands)
        c.probe.remove_publishers(c.states)
    assert codes == {'dynamics_controller': 0}, c.launch.logs()


def test_gravity_compensation_command_matches_pinocchio(controller):
    startup = controller.startup['dynamics_controller']
    # start-up time is a benchmark figure (make bench), not a test bound: printed only
    print(f'dynamics_controller alone: ready {startup:.2f} s after its process started')
    for q in (POSE, POSE[::-1] * 0.5):
        tau = controller.send(controller.state(q))
        assert tau.shape == (7,)
        np.testing.assert_allclose(tau, controller.pinocchio.gravity(q), rtol=1e-9, atol=1e-9)


def test_bad_joint_states_get_no_command_and_a_named_warning(controller):
    c = controller
    nan, inf = c.state(POSE), c.state(POSE)
    nan.position[2] = float('nan')
    inf.velocity[0] = float('inf')
    missing = c.state(POSE, names=JOINTS[:5] + EXTRA)
    short = c.state(POSE)
    short.velocity = short.velocity[:4]
    twice = c.state(POSE, names=JOINTS + [JOINTS[2]])
    bad = {'non-finite position': nan, 'missing joints': missing,
           'velocity has 4 values for 9 joint names': short, 'empty JointState': JointState(),
           'appears twice': twice}
    for problem, msg in bad.items():
        c.send(msg, answered=False)
        np.testing.assert_allclose(c.send(c.state(POSE)), c.pinocchio.gravity(POSE), atol=1e-9)
    c.send(inf, answered=False)   # gravity compensation ignores velocities, but not Inf ones
    log = c.launch.log('dynamics_controller')
    for problem in bad:
        assert c.launch.count('dynamics_controller', f'joint_states ignored: .*{problem}') == 1, \
            (problem, log)
    nan_warnings = c.launch.count('dynamics_controller', 'non-finite position')
    for _ in range(100):                  # a flood of one problem: one warning per second
        c.states.publish(nan)
        time.sleep(0.002)
    c.send(c.state(POSE))
    assert c.launch.count('dynamics_controller', 'non-finite position') <= nan_warnings + 1


def test_messages_without_our_joints_are_not_for_us(controller):
    gripper = JointState(name=EXTRA, position=[0.01, 0.0], velocity=[0.0, 0.0])
    controller.send(gripper, answered=False)
    assert 'gripper_camera_joint' not in controller.launch.log('dynamics_controller')


def test_best_effort_and_reliable_publishers_are_both_heard(controller):
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    publisher = controller.probe.create_publisher(JointState, 'joint_states', qos)
    controller.probe.wait_for_subscribers(publisher)
    controller.probe.until_answered(publisher, lambda: controller.state(POSE),
                                    controller.commands)
    time.sleep(0.1)
    controller.probe.remove_publishers(publisher)


def test_bad_parameters_are_rejected_with_a_reason_and_change_nothing(controller):
    c = controller
    rejected = {
        'kp needs 7 values': c.set(kp=[1.0, 2.0]),
        'effort_limits must be > 0': c.set(effort_limits=[-1.0] * 7),
        'mode must be one of': c.set(mode='impedance'),
        'read-only': c.set(joints=JOINTS[::-1]),
        'out of range': c.set(payload__mass=-1.0),
        'positive semi-definite': c.set(payload__inertia=[1.0, 0.0, 0.0, -1.0, 0.0, 1.0]),
        'kd must be >= 0': c.set(kd=[-1.0] * 7),
    }
    for reason, results in rejected.items():
        assert not results[0].successful and reason in results[0].reason, (reason, results)
    kept = c.probe.get_parameters('dynamics_controller', 'kp', 'mode', 'payload.mass', 'joints')
    assert list(kept['kp']) == list(KP) and kept['mode'] == 'gravity_compensation'
    assert kept['payload.mass'] == 0.0 and list(kept['joints']) == JOINTS
    np.testing.assert_allclose(c.send(c.state(POSE)), c.pinocchio.gravity(POSE), atol=1e-9)


def test_effort_limits_clamp_the_command(controller):
    c = controller
    assert c.set(effort_limits=[5.0] * 7)[0].successful
    tau = c.send(c.state(POSE))
    np.testing.assert_allclose(tau, np.clip(c.pinocchio.gravity(POSE), -5, 5), atol=1e-9)
    assert 'effort clamped' in c.launch.log('dynamics_controller')
    empty = Parameter('effort_limits', Parameter.Type.DOUBLE_ARRAY, []).to_parameter_msg()
    from rcl_interfaces.srv import SetParameters
    result = c.probe.call(SetParameters, '/dynamics_controller/set_parameters',
                          SetParameters.Request(parameters=[empty])).results[0]
    assert result.successful, result.reason
    np.testing.assert_allclose(c.send(c.state(POSE)), c.pinocchio.gravity(POSE), atol=1e-9)


def test_computed_torque_reference_matches_pinocchio(controller):
    """At rest, τ = M(q) K_p (q_ref − q) + g(q); without a reference it holds where it was.

    A streamed reference is reached within the limits (test_contact_safety.py): the
    check is once it rests on q_ref.
    """
    c = controller
    c.send(c.state(POSE))
    assert c.set(mode='computed_torque')[0].successful
    np.testing.assert_allclose(c.send(c.state(POSE)), c.pinocchio.gravity(POSE), atol=1e-9)
    q = POSE + 0.01 * np.arange(7)         # the arm moved away from the held position
    expected = c.pinocchio.mass_matrix(q) @ (KP * (POSE - q)) + c.pinocchio.gravity(q)
    np.testing.assert_allclose(c.send(c.state(q)), expected, rtol=1e-9, atol=1e-9)

    q_ref = POSE - 0.02
    reference = c.probe.create_publisher(JointState, '/dynamics_controller/reference', 10)
    c.probe.wait_for_subscribers(reference)
    reference.publish(c.state(q_ref))
    time.sleep(0.2)
    for _ in range(4):   # the reference moves to q_ref within the limits, then rests there
        c.send(c.state(q))
        time.sleep(0.1)
    expected = c.pinocchio.mass_matrix(q) @ (KP * (q_ref - q)) + c.pinocchio.gravity(q)
    np.testing.assert_allclose(c.send(c.state(q)), expected, rtol=1e-9, atol=1e-9)
    assert c.set(mode='gravity_compensation')[0].successful
    c.probe.remove_publishers(reference)


def test_stale_states_end_with_one_gravity_command(controller):
    """No state for state_timeout: one final τ = g(q_last), then silence; states resume it."""
    c = controller
    c.send(c.state(POSE))
    count = len(c.commands)
    time.sleep(TIMEOUT + 0.4)
    assert len(c.commands) == count + 1
    np.testing.assert_allclose(c.commands.messages[-1].data, c.pinocchio.gravity(POSE),
                               atol=1e-9)
    error = rf'\[ERROR\].*no joint_states for {TIMEOUT} s'
    assert c.launch.count('dynamics_controller', error) == 1
    c.send(c.state(POSE))


def test_unknown_joints_stop_the_node_at_start_with_a_reason(ros):
    specs = bringup.nodes('gravity_compensation', robot='panda', overrides={
        'dynamics_controller': {'joints': JOINTS[:6] + ['panda_joint8']}})
    launch = ros.launch(specs)
    deadline = time.monotonic() + 60
    while not launch.processes.exited():
        assert time.monotonic() < deadline, launch.logs()
        time.sleep(0.05)
    assert launch.processes.exited() == {'dynamics_controller': 1}
    assert "unknown joints ['panda_joint8'] in joints" in launch.log('dynamics_controller')


def test_model_from_the_robot_description_topic(ros):
    """No robot_description parameter: the model comes from the latched topic.

    As robot_state_publisher publishes it.
    """
    publisher = ros.probe.create_publisher(String, '/robot_description', DESCRIPTION_QOS)
    publisher.publish(String(data=pathlib.Path(rd.robot_urdf('panda')).read_text()))
    specs = bringup.nodes('gravity_compensation', robot='panda', use_description_topic=True)
    assert 'robot_description' not in specs[0].parameters
    with ros.launch(specs) as launch:
        launch.ready()
        assert 'waiting for the robot_description topic' in launch.log('dynamics_controller')
    ros.probe.remove_publishers(publisher)
