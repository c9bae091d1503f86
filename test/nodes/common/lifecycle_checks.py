"""The controller and the estimator as managed nodes: their lifecycle transitions over DDS.

Each node starts with ``autostart: false`` from a parameter file on example-robot-data's UR10
(the minimal-parameters test's arm) and is driven through lifecycle_msgs' ~/change_state as a
lifecycle manager would: a configure refused for a bad per-joint parameter leaves it
unconfigured with the reason in its log; once the parameter is fixed it configures (inactive:
joint states get no answer), activates (the controller answers a state with τ = g(q), checked
against Pinocchio; the estimator publishes), deactivates (silent again) and cleans up.
Every other node test starts the nodes with the default ``autostart: true``.
"""
import time

import numpy as np
import pytest
from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ros_harness import file_specs, session
from test_minimal_parameters import JOINTS, URDF, Pinocchio, state

Q = np.array([0.3, -1.2, 1.0, -0.8, 0.5, 0.2])
NAMESPACE = 'managed'
NODES = {   # label: (namespace, executable, its parameter file's ros__parameters beyond the URDF)
    'dynamics_controller': (NAMESPACE, 'dynamics_controller',
                            {'mode': 'gravity_compensation', 'autostart': False,
                             'effort_limits': [100.0]}),   # one limit for six joints: refused
    'wrench_estimator': (NAMESPACE, 'wrench_estimator', {'autostart': False})}


class Managed:
    """The two nodes, unconfigured, and the probe's topics and lifecycle clients for them."""

    def __init__(self, ros):
        self.ros, self.probe = ros, ros.probe
        specs = file_specs(ros.work / 'lifecycle', NODES,
                           {'robot_description': URDF.read_text()})
        self.states = self.probe.create_publisher(JointState, f'/{NAMESPACE}/joint_states', 10)
        self.commands = self.probe.record(
            Float64MultiArray, f'/{NAMESPACE}/effort_controller/commands')
        self.torques = self.probe.record(
            JointState, f'/{NAMESPACE}/wrench_estimator/external_joint_torques')
        self.launch = ros.launch(specs)

    def change(self, label, transition):
        """One transition through ~/change_state (sent once: it is not idempotent)."""
        request = ChangeState.Request(transition=Transition(id=transition))
        return self.probe.call(ChangeState, f'/{NAMESPACE}/{label}/change_state', request,
                               timeout=60.0, retry=60.0).success

    def state(self, label):
        return self.probe.call(GetState, f'/{NAMESPACE}/{label}/get_state',
                               GetState.Request()).current_state.id

    def stream(self, seconds=0.3):
        """Joint states at Q (efforts g(Q)) every 10 ms for ``seconds``."""
        effort = Pinocchio().gravity(Q)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.states.publish(state(Q, effort=effort))
            time.sleep(0.01)

    def log(self, label):
        return self.launch.log(f'{NAMESPACE}.{label}')

    def waiting_log(self, label, text, timeout=60.0):
        deadline = time.monotonic() + timeout
        while text not in self.log(label):
            assert time.monotonic() < deadline, f'no {text!r}\n{self.launch.logs()}'
            time.sleep(0.05)

    def close(self):
        codes = self.launch.stop()
        self.probe.stop_recording(self.commands, self.torques)
        self.probe.remove_publishers(self.states)
        return codes


@pytest.fixture(scope='module')
def managed():
    m = Managed(session())
    try:
        for label in NODES:
            m.waiting_log(label, 'unconfigured (autostart false)')
        m.probe.wait_for_subscribers(m.states, count=2)
        yield m
    finally:
        codes = m.close()
    assert codes == {f'{NAMESPACE}.{label}': 0 for label in NODES}, m.launch.logs()


def test_a_refused_configure_leaves_the_controller_unconfigured_with_its_reason(managed):
    label = 'dynamics_controller'
    assert managed.state(label) == State.PRIMARY_STATE_UNCONFIGURED
    assert not managed.change(label, Transition.TRANSITION_CONFIGURE)
    assert managed.state(label) == State.PRIMARY_STATE_UNCONFIGURED
    log = managed.log(label)
    assert 'configure refused: ' in log and 'effort_limits' in log.split('configure refused: ')[1]
    assert ']: ready: ' not in log


def test_the_controller_commands_only_while_active(managed):
    label = 'dynamics_controller'
    result = managed.probe.set_parameters(f'{NAMESPACE}/{label}',
                                          {'effort_limits': [300.0] * 6})[0]
    assert result.successful, result.reason
    assert managed.change(label, Transition.TRANSITION_CONFIGURE), managed.log(label)
    assert managed.state(label) == State.PRIMARY_STATE_INACTIVE
    assert ']: ready: 6 joints' in managed.log(label)
    managed.stream()
    assert len(managed.commands) == 0   # inactive: states are not answered

    assert managed.change(label, Transition.TRANSITION_ACTIVATE)
    assert managed.state(label) == State.PRIMARY_STATE_ACTIVE
    managed.stream()
    assert managed.commands.wait(1, timeout=10), managed.log(label)
    np.testing.assert_allclose(managed.commands.messages[-1].data, Pinocchio().gravity(Q),
                               rtol=1e-9, atol=1e-9)

    assert managed.change(label, Transition.TRANSITION_DEACTIVATE)
    assert managed.state(label) == State.PRIMARY_STATE_INACTIVE
    time.sleep(0.5)   # the final command, g(q_last), may still be on its way
    after = len(managed.commands)
    np.testing.assert_allclose(managed.commands.messages[-1].data, Pinocchio().gravity(Q),
                               rtol=1e-9, atol=1e-9)
    managed.stream()
    time.sleep(0.2)
    assert len(managed.commands) == after   # silent once deactivated

    assert managed.change(label, Transition.TRANSITION_CLEANUP)
    assert managed.state(label) == State.PRIMARY_STATE_UNCONFIGURED


def test_the_estimator_publishes_only_while_active(managed):
    label = 'wrench_estimator'
    assert managed.change(label, Transition.TRANSITION_CONFIGURE), managed.log(label)
    managed.stream()
    assert len(managed.torques) == 0
    assert managed.change(label, Transition.TRANSITION_ACTIVATE)
    managed.stream()
    assert managed.torques.wait(1, timeout=10), managed.log(label)
    assert list(managed.torques.messages[-1].name) == JOINTS
    assert managed.change(label, Transition.TRANSITION_DEACTIVATE)
    time.sleep(0.3)
    after = len(managed.torques)
    managed.stream()
    time.sleep(0.2)
    assert len(managed.torques) == after
    assert managed.state(label) == State.PRIMARY_STATE_INACTIVE
