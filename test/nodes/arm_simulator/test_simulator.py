"""arm_simulator alone, driven by the test as its controller (about 10 s).

Brakes, command checks, and the arm's dynamics against Pinocchio: the load of a wrench at the tip
in either frame, and the accelerations from joint torques.
"""
import time

import numpy as np
import pinocchio as pin
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.nodes.common.joint_states import wrench_message
from ros_harness import BEST_EFFORT, stamp_of

SIM = bringup.load_config(bringup.config_file('panda.yaml'))['arm_simulator']['ros__parameters']
JOINTS, Q0 = SIM['joints'], np.array(SIM['initial_position'])


class Pinocchio:
    def __init__(self):
        self.model = pin.buildModelFromUrdf(rd.robot_urdf('panda'))
        self.data = self.model.createData()
        self.index = [self.model.joints[self.model.getJointId(j)].idx_v for j in JOINTS]
        self.q = pin.neutral(self.model)
        self.q[self.index] = Q0
        self.M = pin.crba(self.model, self.data, self.q)
        self.M = (np.triu(self.M) + np.triu(self.M, 1).T)[np.ix_(self.index, self.index)]
        self.g = pin.computeGeneralizedGravity(self.model, self.data, self.q)[self.index]

    def tip_jacobian(self, reference):
        """6 x 7, angular rows first (Pinocchio's are linear first)."""
        frame = self.model.getFrameId('panda_hand_tcp')
        J = pin.computeFrameJacobian(self.model, self.data, self.q, frame, reference)
        return np.vstack([J[3:], J[:3]])[:, self.index]


class Simulator:
    """The simulator process, and the probe's recorders and publishers facing it."""

    def __init__(self, ros):
        self.probe = ros.probe
        self.states = self.probe.record(JointState, 'joint_states', BEST_EFFORT)
        self.diagnostics = self.probe.record(DiagnosticArray, '/diagnostics')
        self.commands = self.probe.create_publisher(Float64MultiArray,
                                                    'effort_controller/commands', 10)
        self.wrench = self.probe.create_publisher(WrenchStamped, '/arm_simulator/external_wrench',
                                                  10)
        self.launch = ros.launch([s for s in bringup.nodes('simulated_arm', robot='panda')
                                  if s.name == 'arm_simulator'])

    def close(self):
        codes = self.launch.stop()
        self.probe.stop_recording(self.states, self.diagnostics)
        self.probe.remove_publishers(self.commands, self.wrench)
        return codes


@pytest.fixture(scope='module')
def sim(ros):
    sim = Simulator(ros)
    try:
        sim.launch.ready()
        sim.probe.wait_for_subscribers(sim.commands)
        sim.probe.wait_for_subscribers(sim.wrench)
        sim.states.wait(10)
        yield sim
    finally:
        codes = sim.close()
    assert codes == {'arm_simulator': 0}, sim.launch.logs()


def latest(sim, field):
    return np.array(getattr(sim.states.last(), field))


def test_brakes_hold_the_initial_pose_and_report_the_gravity_load(sim):
    reference = Pinocchio()
    np.testing.assert_array_equal(latest(sim, 'position'), Q0)
    np.testing.assert_array_equal(latest(sim, 'velocity'), np.zeros(7))
    np.testing.assert_allclose(latest(sim, 'effort'), reference.g, rtol=1e-9, atol=1e-9)
    assert list(sim.states.last().name) == JOINTS


def test_bad_commands_are_ignored(sim):
    sim.commands.publish(Float64MultiArray(data=[0.0] * 6))
    sim.commands.publish(Float64MultiArray(data=[float('nan')] * 7))
    deadline = time.monotonic() + 10.0   # the log line comes when the simulator gets to it
    while 'command ignored: needs 7 finite values' not in sim.launch.log('arm_simulator'):
        assert time.monotonic() < deadline, sim.launch.log('arm_simulator')
        time.sleep(0.05)
    np.testing.assert_array_equal(latest(sim, 'velocity'), np.zeros(7))


def apply_wrench(sim, wrench, frame):
    sim.wrench.publish(wrench_message(frame, wrench))


def eventually_effort(sim, expected, timeout=10.0):
    """Wait until the newest effort equals ``expected`` (to 1e-9); states may arrive late."""
    deadline = time.monotonic() + timeout
    while not np.allclose(latest(sim, 'effort'), expected, rtol=1e-9, atol=1e-9):
        if time.monotonic() > deadline:
            np.testing.assert_allclose(latest(sim, 'effort'), expected, rtol=1e-9, atol=1e-9)
        time.sleep(0.01)


@pytest.mark.parametrize('frame, reference', [('panda_link0', pin.LOCAL_WORLD_ALIGNED),
                                              ('panda_hand_tcp', pin.LOCAL)])
def test_braked_arm_reports_the_load_of_a_tip_wrench(sim, frame, reference):
    """The brakes hold g(q) − Jᵀ F; J of the tip in the wrench's frame (Pinocchio's)."""
    pinocchio = Pinocchio()
    wrench = np.array([0.5, -0.2, 0.3, 4.0, 7.0, -9.0])   # moment, force
    apply_wrench(sim, wrench, frame)
    eventually_effort(sim, pinocchio.g - pinocchio.tip_jacobian(reference).T @ wrench)
    apply_wrench(sim, np.zeros(6), frame)
    eventually_effort(sim, pinocchio.g)


def accelerations(sim, command):
    """Joint accelerations over the first 20 steps after the command releases the brakes.

    From the velocities (semi-implicit Euler: v_n = v_0 + n dt q̈ while q barely moves).
    """
    start = len(sim.states)
    sim.commands.publish(Float64MultiArray(data=list(command)))
    sim.states.wait(start + 200)
    moving = [m for m in sim.states.messages[start:] if np.any(m.velocity)]
    first, later = moving[0], moving[20]
    dt = stamp_of(later) - stamp_of(first)
    return (np.array(later.velocity) - np.array(first.velocity)) / dt


def test_accelerations_match_pinocchio(sim):
    """Released by τ = g(q0) + δτ: q̈ = M(q0)⁻¹ δτ (joint order, mass matrix, integrator)."""
    reference = Pinocchio()
    extra = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.3, -0.2])
    qdd, expected = accelerations(sim, reference.g + extra), np.linalg.solve(reference.M, extra)
    error = np.abs(qdd - expected).max() / np.abs(expected).max()
    print(f'simulated accelerations vs Pinocchio: {100 * error:.3f} % of the largest')
    assert error < 0.01
    report = {}
    deadline = time.monotonic() + 5
    while 'real_time_factor' not in report and time.monotonic() < deadline:
        sim.diagnostics.wait_for_more(1, timeout=2)
        report = {kv.key: kv.value for m in sim.diagnostics.messages for s in m.status
                  if s.name.startswith('arm_simulator') for kv in s.values}
    assert float(report['real_time_factor']) > 0.2, report
