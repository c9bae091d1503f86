"""The simulated arm bring-up as real processes over loopback DDS.

arm_simulator + dynamics_controller + wrench_estimator: gravity compensation drift, computed
torque tracking, the wrench estimate and tare, latency, startup, and the parameters the bring-up
names.

One bring-up for the module, tests in order: released under gravity compensation (fixture),
switched to computed torque, a trajectory, then a wrench at the tip. About 25 s (more on a
loaded machine: the simulated time is what the tests wait for).
References are independent of the nodes: the initial pose from config/panda.yaml, scipy's
clamped cubic spline through the waypoints, the applied wrench.
"""

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from scipy.interpolate import CubicSpline
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics import bringup
from robot_dynamics.nodes.arm_simulator import ArmSimulator
from robot_dynamics.nodes.dynamics_controller import DynamicsController
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator
from robot_dynamics.nodes.common.joint_states import trajectory_message, wrench_message
from ros_harness import BEST_EFFORT, ArmView, stamp_of, tare, trajectory_answer

CLASSES = {'arm_simulator': ArmSimulator, 'dynamics_controller': DynamicsController,
           'wrench_estimator': WrenchEstimator}
CONFIG = bringup.load_config(bringup.config_file('panda.yaml'))
Q0 = np.array(CONFIG['arm_simulator']['ros__parameters']['initial_position'])
JOINTS = CONFIG['dynamics_controller']['ros__parameters']['joints']


class Arm(ArmView):
    """The running bring-up and what the probe records from it."""

    def __init__(self, ros):
        self.ros, self.probe = ros, ros.probe
        self.states = self.probe.record(JointState, 'joint_states', BEST_EFFORT)
        self.commands = self.probe.record(Float64MultiArray, 'effort_controller/commands')
        self.diagnostics = self.probe.record(DiagnosticArray, '/diagnostics')
        self.extra_recorders = []
        self.specs = bringup.nodes('simulated_arm', robot='panda')
        self.launch = ros.launch(self.specs)

    def positions(self, since=-np.inf, until=np.inf):
        """(stamps, q (k, 7) in JOINTS order) of the recorded states in [since, until]."""
        return self.joint_arrays(JOINTS, since, until)


@pytest.fixture(scope='module')
def arm(ros):
    arm = Arm(ros)
    try:
        arm.startup = arm.launch.ready()
        assert arm.commands.wait(1, timeout=20), arm.launch.logs()
        arm.released = arm.now()  # the brakes hold the arm at Q0 until the first command
        arm.probe.stop_recording(arm.commands)  # spare the probe's CPU
        arm.wait(2.4)
        yield arm
    finally:
        codes = arm.launch.stop()
        arm.probe.stop_recording(arm.states, arm.diagnostics, *arm.extra_recorders)
    assert codes == {name: 0 for name in CLASSES}, arm.launch.logs()


def test_gravity_compensation_holds_the_released_arm(arm):
    """Released at a non-trivial pose, no damping: moves < 1e-3 rad in 2 s (checked to 2.2 s)."""
    t, q = arm.positions(arm.released, arm.released + 2.2)
    assert t[-1] - arm.released >= 2.0 and len(t) > 1000   # the probe may miss a few
    drift = np.abs(q - Q0).max()
    print(f'gravity compensation drift over {t[-1] - arm.released:.2f} s: {drift:.2e} rad')
    assert 'brakes released' in arm.launch.log('arm_simulator')
    assert drift < 1e-3


def test_switching_to_computed_torque_holds_the_position(arm):
    _, before = arm.positions(arm.now() - 0.05)
    result = arm.probe.set_parameters('dynamics_controller', {'mode': 'computed_torque'})[0]
    assert result.successful, result.reason
    arm.wait(0.3)
    _, after = arm.positions(arm.now() - 0.05)
    assert np.abs(after[-1] - before[-1]).max() < 1e-3


def test_computed_torque_tracks_a_trajectory(arm):
    """Four segments through waypoints (positions only): RMS error < 1e-3 rad, max < 5e-3."""
    q_now = arm.positions(arm.now() - 0.01)[1][-1]
    offsets = np.array([[0, 0, 0, 0, 0, 0, 0], [0.3, -0.2, 0.2, 0.3, -0.3, 0.2, 0.4],
                        [-0.2, 0.2, -0.1, 0.5, 0.3, -0.2, -0.3],
                        [0.1, 0.1, 0.2, 0.1, 0.2, 0.1, 0],
                        [0, 0, 0, 0, 0, 0, 0]])
    times = np.arange(len(offsets), dtype=float)
    waypoints = q_now + offsets
    stamp = arm.now() + 0.5   # the probe sees states up to 0.1 s late
    msg = trajectory_message(JOINTS, stamp, times, waypoints)
    publisher = arm.probe.create_publisher(JointTrajectory,
                                           '/dynamics_controller/joint_trajectory', 10)
    arm.probe.wait_for_subscribers(publisher)
    start, answer = trajectory_answer(arm.launch, lambda: publisher.publish(msg), stamp)
    assert answer and 'points' in answer, arm.launch.logs()
    arm.wait(start + times[-1] + 0.4 - arm.now())
    reference = CubicSpline(times, waypoints, bc_type='clamped')
    t, q = arm.positions(start, start + times[-1] + 0.3)
    error = q - reference(np.clip(t - start, 0, times[-1]))
    rms, worst = np.sqrt(np.mean(error ** 2)), np.abs(error).max()
    print(f'computed torque tracking over {t[-1] - t[0]:.2f} s ({len(t)} states): '
          f'RMS {rms:.2e} rad, max {worst:.2e} rad')
    assert t[-1] - t[0] > 0.75 * times[-1] and len(t) > 1000   # the probe may miss a few
    assert rms < 1e-3 and worst < 5e-3


def force_of(msg):
    f = msg.wrench.force
    return np.array([f.x, f.y, f.z])


def test_wrench_estimate_and_tare(arm):
    """A wrench at the tip (base axes): force estimate within 2 % after 0.2 s; tare zeroes it.

    The probe sees messages up to ~0.1 s late (a queue of 100 at 1 kHz), so times come from the
    stamps: the wrench acts from the first estimate above 5 % of it (the observer, K = 50/s,
    crosses 5 % within 1.1 ms of the step).
    """
    result = arm.probe.set_parameters('dynamics_controller', {'mode': 'computed_torque'})[0]
    assert result.successful, result.reason   # held against the push: a floating arm runs off
    applied = np.array([0.4, -0.3, 0.2, 6.0, -8.0, 12.0])   # moment (N m), force (N)
    msg = wrench_message('panda_link0', applied)
    publisher = arm.probe.create_publisher(WrenchStamped, '/arm_simulator/external_wrench', 10)
    arm.probe.wait_for_subscribers(publisher)
    wrenches = arm.probe.record(WrenchStamped, '/wrench_estimator/wrench', BEST_EFFORT)
    arm.extra_recorders.append(wrenches)
    wrenches.wait(1)
    before = stamp_of(wrenches.last())
    publisher.publish(msg)
    norm = np.linalg.norm(applied[3:])
    onset = None
    while onset is None:
        assert wrenches.wait_for_more(1), 'no wrench estimates'
        onset = next((stamp_of(m) for m in list(wrenches.messages)
                      if stamp_of(m) > before and np.linalg.norm(force_of(m)) > 0.05 * norm),
                     None)
    wrenches.wait_for_stamp(onset + 0.35)
    force = np.array([force_of(m) for m in list(wrenches.messages)
                      if onset + 0.2 <= stamp_of(m) <= onset + 0.35])
    assert len(force) > 50
    error = np.linalg.norm(force - applied[3:], axis=1).max() / norm
    print(f'wrench estimate 0.2-0.35 s after applying it: force error {100 * error:.3f} %')
    assert error < 0.02
    assert wrenches.last().header.frame_id == 'panda_link0'

    tared = np.linalg.norm(force_of(wrenches.wait_for_stamp(tare(arm.probe) + 0.3))) / norm
    print(f'after tare: force estimate {100 * tared:.3f} % of the applied force')
    assert tared < 0.02


def diagnostics(arm, node):
    """The newest /diagnostics values of a node, as floats where they are numbers."""
    arm.diagnostics.wait_for_more(2, timeout=5)
    status = [s for m in list(arm.diagnostics.messages) for s in m.status
              if s.name.startswith(node)][-1]
    values = {kv.key: kv.value for kv in status.values}
    return {k: float(v) if v.replace('.', '').replace('-', '').isdigit() else v
            for k, v in values.items()}


def test_latency(arm):
    """Latency, median and p99, from /diagnostics.

    Joint state received -> effort published (the controller), and the whole loop: state
    published -> effort command received (the simulator).
    """
    controller = diagnostics(arm, 'dynamics_controller')
    simulator = diagnostics(arm, 'arm_simulator')
    print(f"controller, joint state received -> effort published, last {controller['commands']:.0f}"
          f" commands: median {controller['compute_median_us']:.0f} µs, "
          f"p99 {controller['compute_p99_us']:.0f} µs")
    print(f"simulator loop, state published -> command received: median "
          f"{simulator['loop_latency_median_us']:.0f} µs, "
          f"p99 {simulator['loop_latency_p99_us']:.0f} µs; real-time factor "
          f"{simulator['real_time_factor']}, overruns {simulator['overruns']:.0f}, "
          f"slips {simulator['slips']:.0f}")
    assert controller['rejected_states'] == 0
    assert controller['compute_median_us'] < 2000
    assert simulator['loop_latency_median_us'] < 5000


def test_running_nodes_declare_what_the_bringup_names(arm):
    """Every parameter of the config file and the bring-up is declared by the running node."""
    for spec in arm.specs:
        listed = set(arm.probe.list_parameters(spec.name))
        assert {p.name for p in CLASSES[spec.name].PARAMS} <= listed
        named = set(spec.parameters) | set(CONFIG[spec.name]['ros__parameters'])
        assert named <= listed, named - listed
