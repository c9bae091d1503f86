"""The controller and the wrench estimator closed around MuJoCo (arm_simulator engine=mujoco).

MuJoCo integrates the same URDF with its own dynamics, so these loops cannot hide a mistake
shared by our simulator and our controller. Real processes over loopback DDS, both shipped arms,
one bring-up per arm; in order, on the arm's clock (the joint-state stamps):

1. released at config's initial pose under gravity compensation: drift over 5 s;
2. computed torque along a clamped cubic spline through 5 waypoints (4 s) to a second pose,
   gravity compensation there for 5 s; then a 2 s trajectory to a third pose, and 5 s more;
3. step wrenches at the tip (force, moment, both; base and tip axes) under computed torque:
   estimate after 0.3 s, and the observer's time constant fitted to the rise;
4. MuJoCo's arm takes a 1 kg payload at the tip the nodes' model doesn't know: the estimator
   sees its weight, 9.81 N down; after ~/tare, ~0.

About 80 s for both arms on an idle 2-core machine (the tests wait for simulated time, so more
on a loaded one). References: the poses of config/<robot>.yaml, scipy's clamped cubic spline,
the applied wrenches, m g for the payload, 1/observer_gain for the rise.
"""
import time

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from scipy.interpolate import CubicSpline
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics import bringup
from robot_dynamics.nodes.common.joint_states import trajectory_message, wrench_message
from ros_harness import BEST_EFFORT, ArmView, stamp_of, tare, trajectory_answer, window

DRIFT_WINDOW = 5.0   # s
# waypoint offsets from the initial pose, 1 s apart; the last one is the second pose
OFFSETS = np.array([[0, 0, 0, 0, 0, 0, 0], [0.3, -0.2, 0.2, 0.3, -0.3, 0.2, 0.4],
                    [-0.2, 0.2, -0.1, 0.5, 0.3, -0.2, -0.3], [0.1, 0.1, 0.2, 0.1, 0.2, 0.1, 0],
                    [0.2, 0.15, -0.1, 0.25, 0.1, -0.2, 0.3]])
THIRD_POSE = np.array([-0.3, 0.25, 0.2, 0.35, -0.2, 0.3, -0.2])   # offset from the initial pose
# (moment N m, force N, axes): step wrenches at the tip
WRENCHES = [((0.0, 0.0, 0.0, 6.0, -8.0, 12.0), 'base'),
            ((0.4, -0.3, 0.5, 0.0, 0.0, 0.0), 'base'),
            ((-0.3, 0.2, 0.4, -5.0, 3.0, 7.0), 'tip')]
SIMULATOR = {'engine': 'mujoco'}
PAYLOAD_MASS = 1.0   # kg, at the tip origin
G = 9.81


class Arm(ArmView):
    """One robot's bring-up on MuJoCo and the probe's view of it."""

    def __init__(self, ros, robot):
        self.ros, self.probe, self.robot = ros, ros.probe, robot
        config = bringup.load_config(bringup.config_file(f'{robot}.yaml'))
        self.sim = config['arm_simulator']['ros__parameters']
        self.gain = np.array(config['wrench_estimator']['ros__parameters']['observer_gain'])
        self.joints, self.q0 = self.sim['joints'], np.array(self.sim['initial_position'])
        self.states = self.probe.record(JointState, 'joint_states', BEST_EFFORT)
        self.commands = self.probe.record(Float64MultiArray, 'effort_controller/commands')
        self.wrenches = self.probe.record(WrenchStamped, '/wrench_estimator/wrench', BEST_EFFORT)
        self.trajectory = self.probe.create_publisher(
            JointTrajectory, '/dynamics_controller/joint_trajectory', 10)
        self.wrench = self.probe.create_publisher(WrenchStamped,
                                                  '/arm_simulator/external_wrench', 10)
        self.launch = ros.launch(bringup.nodes(
            'simulated_arm', robot=robot, overrides={'arm_simulator': SIMULATOR}))

    def close(self):
        codes = self.launch.processes.stop(timeout=20.0)   # a loaded machine stops slowly
        self.probe.stop_recording(self.states, self.commands, self.wrenches)
        self.probe.remove_publishers(self.trajectory, self.wrench)
        return codes

    def positions(self, since, until=np.inf):
        return self.joint_arrays(self.joints, since, until)

    def set_mode(self, mode):
        result = self.probe.set_parameters('dynamics_controller', {'mode': mode})[0]
        assert result.successful, result.reason
        return self.now() + 0.2   # the probe sees states up to ~0.1 s late: now acting

    def drift(self, start):
        """max |q(t) − q(t₀)| over at least DRIFT_WINDOW from the first state t₀ after start.

        The window ends at the first state received at or after t₀ + DRIFT_WINDOW: the probe
        may miss states on a loaded machine, and the window is then longer, never shorter.
        """
        self.wait_until(start + DRIFT_WINDOW + 0.05)
        start = self.positions(start)[0][0]
        self.wait_until(start + DRIFT_WINDOW + 0.05)
        t, q = self.positions(start)
        end = np.searchsorted(t, start + DRIFT_WINDOW) + 1
        t, q = t[:end], q[:end]
        assert t[-1] >= start + DRIFT_WINDOW and len(t) > 250 * DRIFT_WINDOW, \
            f'the probe received {len(t)} states over [{t[0]:.3f}, {t[-1]:.3f}] s'
        return np.abs(q - q[0]).max()

    def track(self, waypoints, spacing=1.0):
        """Send a trajectory through waypoints; (RMS, max) error against the clamped spline."""
        times = spacing * np.arange(len(waypoints))
        stamp = self.now() + 0.5   # the probe's clock may lag the arm's: the start it took
        msg = trajectory_message(self.joints, stamp, times, waypoints)
        start, _ = trajectory_answer(self.launch, lambda: self.trajectory.publish(msg), stamp)
        end = start + times[-1] + 0.3
        self.wait_until(end + 0.05)
        t, q = self.positions(start, end)
        assert t[-1] - t[0] > 0.5 * (end - start) and len(t) > 100 * (end - start), \
            f'the probe received {len(t)} states over [{t[0]:.3f}, {t[-1]:.3f}] s'
        error = q - CubicSpline(times, waypoints, bc_type='clamped')(np.clip(t - start, 0,
                                                                             times[-1]))
        return np.sqrt(np.mean(error ** 2)), np.abs(error).max()

    def apply(self, wrench, axes):
        frame = self.sim['base'] if axes == 'base' else self.sim['tip']
        self.wrench.publish(wrench_message(frame, wrench))

    def estimates(self, since, until=np.inf, timeout=30.0):
        """Estimates stamped in [since, until], once the estimator has reached a finite until.

        The estimator answers each joint state a little after the probe sees it, more so on a
        loaded machine or an arm faster than real time: wait for its estimates, not only for
        the arm's states.
        """
        if until < np.inf:
            self.wrenches.wait_for_stamp(until, timeout)
        picked = window(self.wrenches, since, until)
        return (np.array([stamp_of(m) for m in picked]),
                np.array([[m.wrench.torque.x, m.wrench.torque.y, m.wrench.torque.z,
                           m.wrench.force.x, m.wrench.force.y, m.wrench.force.z]
                          for m in picked]).reshape(-1, 6))

    def still_after(self, since, speed=0.01, timeout=30.0):
        """The first stamp after ``since`` ending 50 ms of states with every |q̇| < speed.

        Computed torque's stiffness is M(q) kp: on a light wrist (UR5e's last joint, 2.6e-4
        kg m²) a tip moment of 0.4 N m turns it by ~4 rad, at rest only after ~0.6 s.
        """
        deadline = time.monotonic() + timeout
        self.wait_until(since + 0.05)
        while True:
            run = None   # the start of the current run of still states
            for m in window(self.states, since):
                t = stamp_of(m)
                run = None if np.abs(m.velocity).max() >= speed else (t if run is None else run)
                if run is not None and t - run >= 0.05:
                    return t
            assert time.monotonic() < deadline, f'the arm is still moving after {since} s'
            self.wait_until(self.now() + 0.05)

    def mean_estimate(self, since, until, timeout=30.0):
        """The mean estimate stamped in [since, until]."""
        t, w = self.estimates(since, until, timeout)
        assert len(t) > 20, f'the probe received {len(t)} estimates in [{since}, {until}] s'
        return w.mean(axis=0)


def tip_rotations(arm, states):
    """The tip's orientation in base axes (rd.frame_pose) at each of the joint states."""
    import robot_dynamics as rd
    model = rd.load_urdf(rd.robot_urdf(arm.robot), arm.sim['base'], arm.sim['tip'])
    index = [list(states[0].name).index(j) for j in model.joint_names]
    return [rd.frame_pose(model, np.asarray(m.position)[index], model.tip)[:3, :3]
            for m in states]


def in_tip_axes(arm, t, w):
    """Estimates w (base axes) stamped t in the tip's axes at the joint state of the same stamp.

    Computed torque holds the wrist with a stiffness M kp only: a tip moment turns it by up to
    ~0.1 rad, and the tip's axes with it. Estimates without a received state are dropped.
    """
    states = {stamp_of(m): m for m in window(arm.states, t[0], t[-1])}
    pairs = [(k, states[s]) for k, s in enumerate(t) if s in states]
    assert pairs, 'no joint state matches the estimates'
    R = np.array(tip_rotations(arm, [m for _, m in pairs]))
    w = w[[k for k, _ in pairs]]
    return np.concatenate([np.einsum('kji,kj->ki', R, w[:, :3]),
                           np.einsum('kji,kj->ki', R, w[:, 3:])], axis=1)


def step_response(arm, wrench, axes):
    """Apply a step wrench until the arm is at rest, then remove it.

    Returns (estimate over 0.5 s once the arm is at rest, its error, both in the axes of the
    applied wrench; the rate K fitted to the rise, None for tip axes).
    """
    wrench = np.asarray(wrench, dtype=float)
    if axes == 'tip':   # the step's direction in base axes, at the current pose
        R = tip_rotations(arm, [arm.states.last()])[0]
        direction = np.concatenate([R @ wrench[:3], R @ wrench[3:]])
    else:
        direction = wrench
    before = arm.now()
    baseline = arm.mean_estimate(before - 0.2, before)
    arm.apply(wrench, axes)
    try:
        t, w, onset = rise_onset(arm, before, baseline, direction)
        still = arm.still_after(onset + 0.25)
        arm.wait_until(still + 0.5)
        t, w = arm.estimates(onset - 0.01, still + 0.5)
    finally:
        arm.apply(np.zeros(6), 'base')
    late = t >= still
    settled = in_tip_axes(arm, t[late], w[late]) if axes == 'tip' else w[late]
    assert len(settled) > 20, 'the probe missed the estimates after the arm came to rest'
    settled = settled.mean(axis=0)
    arm.wait_until(arm.still_after(arm.now() + 0.3))
    if axes == 'tip':   # the tip turns while the estimate rises: no clean first-order rise
        return settled, settled - wrench, None
    # first-order rise: 1 − rise = exp(−K (t − t₀)); fit K between 10 % and 90 %
    rise = (w - baseline) @ wrench / (wrench @ wrench)
    window = (rise > 0.1) & (rise < 0.9) & (t < onset + 0.15)
    K = -np.polyfit(t[window], np.log(1.0 - rise[window]), 1)[0]
    return settled, settled - wrench, K


def rise_onset(arm, before, baseline, direction):
    """(t, w, onset): the estimates since ``before``; the first stamp above 5 % of the step."""
    deadline = time.monotonic() + 20.0
    while True:
        t, w = arm.estimates(before)
        rise = (w - baseline) @ direction / (direction @ direction)
        if (rise > 0.05).any():
            return t, w, t[np.argmax(rise > 0.05)]
        assert time.monotonic() < deadline, 'no response of the wrench estimator'
        time.sleep(0.01)


@pytest.fixture(scope='module', params=bringup.ROBOTS)
def arm(ros, request):
    arm = Arm(ros, request.param)
    try:
        arm.launch.ready()
        arm.probe.wait_for_subscribers(arm.trajectory)
        arm.probe.wait_for_subscribers(arm.wrench)
        assert arm.commands.wait(1, timeout=30), arm.launch.logs()
        arm.released = arm.now()   # the brakes hold the arm at q0 until the first command
        arm.probe.stop_recording(arm.commands)
        yield arm
    finally:
        codes = arm.close()
    assert codes == {'arm_simulator': 0, 'dynamics_controller': 0, 'wrench_estimator': 0}, \
        arm.launch.logs()


def test_mujoco_engine_runs(arm):
    assert arm.launch.wait_for_log('arm_simulator', 'brakes released'), arm.launch.logs()
    log = arm.launch.log('arm_simulator')
    assert 'diverged' not in log


def test_gravity_compensation_and_computed_torque_on_mujoco(arm):
    """Drift < 1e-3 rad over 5 s at three poses; tracking RMS < 1e-3 rad, max < 5e-3 rad."""
    n = len(arm.joints)
    drifts = [arm.drift(arm.released)]
    assert np.abs(arm.positions(arm.released, arm.released + 0.01)[1][0] - arm.q0).max() < 1e-6
    tracking = []
    for waypoints, spacing in ((arm.q0 + OFFSETS[:, :n], 1.0), (None, 2.0)):
        arm.set_mode('computed_torque')
        q_now = arm.positions(arm.now() - 0.01)[1][-1]
        if waypoints is None:
            waypoints = np.array([q_now, arm.q0 + THIRD_POSE[:n]])
        waypoints[0] = q_now
        tracking.append(arm.track(waypoints, spacing))
        drifts.append(arm.drift(arm.set_mode('gravity_compensation')))
    print(f'{arm.robot} on MuJoCo: gravity compensation drift over {DRIFT_WINDOW:.0f} s at three '
          f'poses {", ".join(f"{d:.1e}" for d in drifts)} rad; computed torque tracking '
          + '; '.join(f'RMS {rms:.1e} max {worst:.1e} rad' for rms, worst in tracking))
    assert max(drifts) < 1e-3
    for rms, worst in tracking:
        assert rms < 1e-3 and worst < 5e-3


def test_step_wrenches_on_mujoco(arm):
    """Force within 2 % (0.2 N when none), moment within 0.05 N m, once the arm is at rest.

    The rise is first order with rate K = observer_gain (equal on every joint): K fitted to
    ln(1 − rise) within 15 % (the probe may miss states, the arm moves a little), for the
    wrenches in base axes.
    """
    arm.set_mode('computed_torque')   # held: the arm yields to a wrench by millimetres
    arm.wait_until(arm.now() + 0.3)
    K_expected = arm.gain.mean()
    assert np.ptp(arm.gain) == 0
    for wrench, axes in WRENCHES:
        estimate, error, K = step_response(arm, wrench, axes)
        force_norm = np.linalg.norm(wrench[3:])
        np.set_printoptions(precision=3, suppress=True)
        print(f'{arm.robot} on MuJoCo, wrench {np.array(wrench)} in {axes} axes: estimate '
              f'{estimate} ({axes} axes), force error {np.linalg.norm(error[3:]):.3f} N, moment '
              f'error {np.linalg.norm(error[:3]):.4f} N m; 63 % time '
              f'{1e3 / K if K else float("nan"):.1f} ms (1/K = {1e3 / K_expected:.1f} ms)')
        assert np.linalg.norm(error[3:]) <= 0.02 * max(force_norm, 10.0)
        assert np.linalg.norm(error[:3]) <= 0.05
        assert K is None or K == pytest.approx(K_expected, rel=0.15)


def test_unknown_payload_on_mujoco_then_tare(arm):
    """MuJoCo's arm takes 1 kg at the tip: the estimate is its weight (0, 0, −m g), then 0."""
    arm.set_mode('computed_torque')
    result = arm.probe.set_parameters('arm_simulator', {
        'payload.mass': PAYLOAD_MASS, 'payload.inertia': [1e-4, 0.0, 0.0, 1e-4, 0.0, 1e-4]})
    assert all(r.successful for r in result), result
    # the engine is rebuilt with the payload; the simulator then catches up with the wall clock
    # (steps back to back, up to 0.5 s of them), faster than the estimator takes states
    t0 = arm.now() + 0.8
    estimate = arm.mean_estimate(t0 + 0.3, t0 + 1.0)   # > 20 estimates: a wide window
    weight = np.array([0.0, 0.0, 0.0, 0.0, 0.0, -PAYLOAD_MASS * G])
    t1 = tare(arm.probe)
    tared = arm.mean_estimate(t1 + 0.1, t1 + 0.8)
    print(f'{arm.robot} on MuJoCo with an unknown {PAYLOAD_MASS} kg payload: estimate '
          f'{estimate} (moment, force); after tare {tared}')
    np.testing.assert_allclose(estimate[3:], weight[3:], atol=0.02 * PAYLOAD_MASS * G)
    np.testing.assert_allclose(estimate[:3], 0.0, atol=0.05)
    np.testing.assert_allclose(tared, 0.0, atol=0.02 * PAYLOAD_MASS * G)
