"""Property over DDS, both engines: random waypoint sets never drive the arm out of its limits.

The simulated_arm bring-up (computed torque, nominal plant), one per engine. Seeded numpy
waypoint sets, all inside the URDF's position limits and all too fast as timed (their intervals
are shortened until the path asks at least 1.1x a velocity limit): random ones around the pose
the arm holds, ones with joints sent to within 1 mrad of a limit, and the issue's shape (a
plateau just below a limit, whose positions-only spline overshoots it). Each set, from the pose
held before it (the controller blends from there), in order:

1. ``trajectory.time_scaling: false``: every set is rejected; the message names each joint whose
   independent path leaves a position or velocity limit, with the value, time and limit, and
   every violation it names (effort too) is checked against the independent path;
2. ``trajectory.time_scaling: true``: a set whose path overshoots a position limit is still
   rejected (no timing cures it); the others are slowed down and followed, and the arm, as the
   simulator reports it on ``/joint_states``, stays inside its position and velocity limits
   within the tracking tolerances ``POSITION_TOLERANCE`` and ``VELOCITY_TOLERANCE``.

Independent references: the path is scipy's clamped cubic spline through the positions (or
smoothstep quintics between points at rest: references.reference_path), sampled densely;
efforts from Pinocchio's RNEA; limits from Pinocchio's URDF parser.
About 25 s per engine on an idle machine.
"""
import re
import time

import numpy as np
import pinocchio as pin
import pytest
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import robot_dynamics as rd
from references import reference_path
from robot_dynamics import bringup
from ros_harness import BEST_EFFORT, ArmView, to_duration, to_time, trajectory_answer

CONFIG = bringup.load_config(bringup.config_file('panda.yaml'))
JOINTS = CONFIG['dynamics_controller']['ros__parameters']['joints']
Q0 = np.array(CONFIG['arm_simulator']['ros__parameters']['initial_position'])
_FULL = pin.buildModelFromUrdf(rd.robot_urdf('panda'))
PIN = pin.buildReducedModel(_FULL, [_FULL.getJointId(n) for n in _FULL.names
                                    if n not in JOINTS and n != 'universe'], pin.neutral(_FULL))
assert [PIN.names[i] for i in range(1, PIN.njoints)] == JOINTS
LOWER, UPPER = PIN.lowerPositionLimit, PIN.upperPositionLimit
SPEED, EFFORT = PIN.velocityLimit, PIN.effortLimit
# Tracking allowances of computed torque (kp 400, kd 40) on the nominal plant. Measured over DDS
# on both engines, 3 undisturbed runs each on a loaded machine: the arm stayed inside every
# limit, its speeds at least 0.020 rad/s below them (the time scaling's 1 % headroom), its
# positions at least 0.18 mrad inside a limit it was sent to within 1 mrad of.
POSITION_TOLERANCE = 0.005   # rad
VELOCITY_TOLERANCE = 0.05    # rad/s
# a loaded machine stalls the simulator for up to a second: the controller keeps tracking then
# rather than stopping after the default 0.1 s (and holding wherever the arm stands on return)
STATE_TIMEOUT = 5.0          # s
SAMPLES = 20_001             # independent samples per path
SEEDS = {'internal': 19, 'mujoco': 20}
# (kind, waypoints at rest): each engine's sets, in order
KINDS = [('random', False), ('random', True), ('near a limit', True), ('plateau', False),
         ('near a limit', False)]
VIOLATION = re.compile(r'(panda_joint\d): (position|velocity|acceleration|effort) (-?[\d.]+) '
                       r'(?:rad|rad/s|N m)(?: \(\+[^)]*\))? at t = ([\d.]+) s beyond its limit '
                       r'(-?[\d.]+)')


def path(start, times, positions, at_rest):
    """Independent (t, q, q̇, q̈) of a set blended from ``start`` at rest, SAMPLES points."""
    times, positions = np.r_[0.0, times], np.vstack([start, positions])
    t = np.linspace(0.0, times[-1], SAMPLES)
    return (t, *reference_path(times, positions, at_rest, t))


def speed_ratio(start, waypoint_set):
    _, _, v, _ = path(start, *waypoint_set)
    return (np.abs(v) / SPEED).max()


def overshoot(start, waypoint_set):
    """How far the path leaves the position limits, rad (≤ 0: it does not)."""
    _, q, _, _ = path(start, *waypoint_set)
    return np.maximum(q - UPPER, LOWER - q).max()


def waypoint_set(rng, kind, at_rest, held):
    """(times, positions, at_rest) of one kind, from the pose ``held``, inside the limits."""
    k = 3
    positions = np.clip(held + rng.uniform(-0.5, 0.5, (k, 7)), LOWER, UPPER)
    times = np.cumsum(rng.uniform(0.15, 0.35, k))
    if kind == 'near a limit':   # two joints to within 1 mrad of their nearer limit, and held
        for j in rng.choice(7, 2, replace=False):
            lower_nearer = held[j] - LOWER[j] < UPPER[j] - held[j]
            positions[:, j] = (LOWER[j] + rng.uniform(0, 1e-3) if lower_nearer else
                               UPPER[j] - rng.uniform(0, 1e-3))
    elif kind == 'plateau':      # the shape: to 2 mrad below a limit, held, back
        j = rng.integers(7)
        positions = np.tile(held, (k, 1))
        positions[:2, j] = UPPER[j] - 0.002 if UPPER[j] - held[j] > held[j] - LOWER[j] else \
            LOWER[j] + 0.002
        times = np.array([1.0, 1.1, 2.0]) * rng.uniform(0.4, 0.8)
    return times, positions, at_rest


def waypoint_sets(engine):
    """Each engine's sets and the pose held before each (a set that runs ends where it ends).

    Too fast as timed from Q0 (phase 1 sends them all from there) and from the held pose.
    """
    rng, held, sets = np.random.default_rng(SEEDS[engine]), Q0.copy(), []
    for kind, at_rest in KINDS:
        times, positions, at_rest = waypoint_set(rng, kind, at_rest, held)
        while min(speed_ratio(held, (times, positions, at_rest)),
                  speed_ratio(Q0, (times, positions, at_rest))) < 1.1:
            times = times * 0.7
        sets.append((kind, held, (times, positions, at_rest)))
        if overshoot(held, (times, positions, at_rest)) <= 0:
            held = positions[-1]
    return sets


class Arm(ArmView):
    """One engine's bring-up; the probe records the simulator's joint states."""

    def __init__(self, ros, engine):
        self.ros, self.probe, self.engine = ros, ros.probe, engine
        self.states = self.probe.record(JointState, 'joint_states', BEST_EFFORT)
        self.trajectory = self.probe.create_publisher(
            JointTrajectory, '/dynamics_controller/joint_trajectory', 10)
        self.launch = ros.launch(bringup.nodes(
            'simulated_arm', robot='panda', mode='computed_torque',
            overrides={'arm_simulator': {'engine': engine},
                       'dynamics_controller': {'state_timeout': STATE_TIMEOUT}}))

    def close(self):
        codes = self.launch.processes.stop(timeout=20.0)
        self.probe.stop_recording(self.states)
        self.probe.remove_publishers(self.trajectory)
        return codes

    def states_in(self, since, until=np.inf, least=10):
        """(stamps, q, q̇) in JOINTS order of the recorded states in [since, until]."""
        return self.joint_arrays(JOINTS, since, until, ('position', 'velocity'), least)

    def send(self, times, positions, at_rest, delay=0.3, timeout=10.0):
        """The set as a trajectory starting ``delay`` s from now; (start, the controller's answer).

        The answer: the log lines the controller writes about it (rejected, or accepted with
        its duration, and a time-scaling factor); None when there is none within ``timeout``.
        The start: the one the controller took (``trajectory_answer``).
        """
        stamp = self.now() + delay
        msg = JointTrajectory(joint_names=JOINTS)
        msg.header.stamp = to_time(stamp)
        msg.points = [JointTrajectoryPoint(positions=list(p), time_from_start=to_duration(t),
                                           velocities=[0.0] * 7 if at_rest else [])
                      for p, t in zip(positions, times)]
        return trajectory_answer(self.launch, lambda: self.trajectory.publish(msg), stamp,
                                 timeout)

    def time_scaling(self, on):
        result = self.probe.set_parameters('dynamics_controller', {'trajectory.time_scaling': on})
        assert result[0].successful, result[0].reason


@pytest.fixture(scope='module', params=['internal', 'mujoco'])
def arm(ros, request):
    arm = Arm(ros, request.param)
    try:
        arm.launch.ready()
        arm.wait_until(arm.now() + 0.3)
        arm.probe.wait_for_subscribers(arm.trajectory)
        deadline = time.monotonic() + 30   # until the controller has joint states to track
        while True:                        # from: it takes the trajectory, not 'ignored: ...'
            start, answer = arm.send([1.0], [Q0], False, timeout=0.5)
            if answer and 'ignored' not in answer:
                break
            assert time.monotonic() < deadline, f'{answer}\n{arm.launch.logs()}'
        arm.wait_until(start + 1.2)   # now holding Q0 exactly: the first set's start
        yield arm
    finally:
        codes = arm.close()
    assert codes == {'arm_simulator': 0, 'dynamics_controller': 0, 'wrench_estimator': 0}


def check_rejection(message, start, waypoint_set, quantities=('position', 'velocity')):
    """The message names each joint leaving a limit (of ``quantities``) on the independent path.

    Every violation it names is checked: the extreme value, where the path has it, the limit.
    """
    t, q, v, _ = path(start, *waypoint_set)
    named = VIOLATION.findall(message)
    assert named, message
    for joint, quantity, value, at, limit in named:
        j, value, at, limit = JOINTS.index(joint), float(value), float(at), float(limit)
        # the quantity around the time named (rounded to 0.1 ms) on the independent path, whose
        # efforts have kinks at the knots (q⃛ jumps there)
        times, positions, at_rest = waypoint_set
        rounded = np.linspace(at - 5e-5, at + 5e-5, 201)
        q_at, v_at, a_at = reference_path(np.r_[0.0, times], np.vstack([start, positions]),
                                          at_rest, rounded)
        if quantity == 'effort':
            data = PIN.createData()
            at_time = [pin.rnea(PIN, data, *x)[j] for x in zip(q_at, v_at, a_at)]
            bound = (-EFFORT[j], EFFORT[j])
        else:
            assert quantity in ('position', 'velocity'), message   # no acceleration limits
            x = (q if quantity == 'position' else v)[:, j]
            at_time = (q_at if quantity == 'position' else v_at)[:, j]
            bound = ((LOWER[j], UPPER[j]) if quantity == 'position' else (-SPEED[j], SPEED[j]))
            worst = x.max() if value > bound[1] else x.min()   # the checker names the extreme
            assert value == pytest.approx(worst, abs=2e-4), (joint, quantity, message)
        assert min(at_time) - 1e-3 <= value <= max(at_time) + 1e-3, (joint, at_time, message)
        assert limit == pytest.approx(bound[1] if value > 0 else bound[0], abs=1e-4), message
        assert not bound[0] <= value <= bound[1], message
    for quantity, x, bound in (('position', q, (LOWER, UPPER)), ('velocity', v, (-SPEED, SPEED))):
        if quantity not in quantities:
            continue
        over = np.maximum(x.max(axis=0) - bound[1], bound[0] - x.min(axis=0))
        for j in np.flatnonzero(over > 1e-3):
            assert f'{JOINTS[j]}: {quantity}' in message, (JOINTS[j], quantity, message)


def follow(arm, held, waypoint_set, answer, start):
    """The slowed-down set as followed: factor, duration and how well the arm followed it.

    How well: the largest tracking error against the independent path (rad), how far the arm
    ended from the last waypoint (rad), and how far it went beyond a position limit (rad) and a
    velocity limit (rad/s), negative when it stayed inside.
    """
    factor = float(re.search(r'by a factor ([\d.]+)', answer).group(1))
    duration = float(re.search(r'joint_trajectory: \d+ points, ([\d.]+) s', answer).group(1))
    t_ref, q_ref, v_ref, a_ref = path(held, waypoint_set[0] * factor, *waypoint_set[1:])
    # the factor: the independent path slowed by it fits, with at most 3 % to spare
    data = PIN.createData()
    tau = np.array([pin.rnea(PIN, data, *x) for x in zip(q_ref[::10], v_ref[::10], a_ref[::10])])
    fit = max((np.abs(v_ref) / SPEED).max(), (np.abs(tau) / EFFORT).max())
    assert 0.97 < fit <= 1.0, (factor, fit)
    assert duration == pytest.approx(t_ref[-1], abs=2e-3)
    arm.wait_until(start + duration + 0.3)
    t, q, v = arm.states_in(start, start + duration + 0.3, least=100)
    reference = np.array([np.interp(np.clip(t - start, 0, duration), t_ref, x) for x in q_ref.T])
    return factor, duration, (np.abs(q - reference.T).max(), np.abs(q[-1] - q_ref[-1]).max(),
                              np.maximum(q - UPPER, LOWER - q).max(), (np.abs(v) - SPEED).max())


def good(followed):
    """Whether the arm followed the set to its end and stayed within the limits' tolerances.

    The tracking error allows a lag where max_effort_rate (1000 N m/s) holds the feedforward
    back: the time scaling bounds efforts, not their rate.
    """
    error, end, position, speed = followed
    return (error < 0.1 and end < 0.01 and position <= POSITION_TOLERANCE and
            speed <= VELOCITY_TOLERANCE)


def test_random_waypoint_sets_never_drive_the_arm_outside_its_limits(arm):
    sets = waypoint_sets(arm.engine)
    arm.time_scaling(False)
    for kind, _, waypoint_set in sets:   # all from Q0: none runs
        _, answer = arm.send(*waypoint_set)
        assert answer and 'rejected: trajectory exceeds the limits' in answer, (kind, answer)
        check_rejection(answer, Q0, waypoint_set)

    arm.time_scaling(True)
    ran, rejected, repeated = 0, 0, 0
    for kind, held, waypoint_set in sets:
        start, answer = arm.send(*waypoint_set)
        assert answer, f'no answer to a trajectory\n{arm.launch.log("dynamics_controller")}'
        if overshoot(held, waypoint_set) > 1e-6:   # the path leaves a position limit
            assert 'no time scaling cures a position violation' in answer, (kind, answer)
            check_rejection(answer, held, waypoint_set, ('position',))
            rejected += 1
            continue
        assert 'rejected' not in answer, (kind, answer)
        factor, duration, followed = follow(arm, held, waypoint_set, answer, start)
        if not good(followed):
            # a loaded machine can stall the loop: the controller stops commanding after
            # state_timeout, the simulator runs on its last command after 0.1 s without one.
            # Once more from the same pose: a real violation repeats.
            print(f'{arm.engine}, {kind}: {followed}; controller timeouts '
                  f'{arm.launch.count("dynamics_controller", "no joint_states for")}; once more')
            start, answer = arm.send([1.5], [held], True)
            arm.wait_until(start + float(re.search(r'points, ([\d.]+) s', answer).group(1)) + 0.3)
            start, answer = arm.send(*waypoint_set)
            factor, duration, followed = follow(arm, held, waypoint_set, answer, start)
            repeated += 1
        print(f'{arm.engine}, {kind}{" at rest" if waypoint_set[2] else ""}: slowed by '
              f'{factor:.3f} to {duration:.3f} s; tracking error {followed[0]:.1e} rad, '
              f'{followed[1]:.1e} rad at the end; beyond the position limits {followed[2]:+.1e} '
              f'rad, the velocity limits {followed[3]:+.3f} rad/s')
        assert good(followed), (kind, followed, arm.launch.logs())
        ran += 1
    print(f'{arm.engine}: {ran} sets followed ({repeated} once more), {rejected} rejected')
    assert ran == 3 and rejected == 2
