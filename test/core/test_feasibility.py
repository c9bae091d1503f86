"""Feasibility of interpolated trajectories and time scaling, against dense independent sampling.

Independent references: positions-only trajectories are scipy's clamped CubicSpline (trajectory.py),
sampled every 10 µs here; effort is rnea on a grid 20x finer than the checker's.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.interpolate import CubicSpline

import robot_dynamics as rd
from references import reference_path
from robot_dynamics.core.feasibility import (EffortSamples, InfeasibleTrajectory,
                                             check_trajectory, extrema, time_scaling,
                                             trajectory_violations)
from robot_dynamics.core.trajectory import JointTrajectory

PANDA = rd.load_urdf(rd.robot_urdf('panda'), base='panda_link0', tip='panda_hand')
Q0 = np.array([0.0, -0.4, 0.0, -2.1, 0.0, 1.7, 0.8])
ISSUE_TIMES = [0.0, 1.0, 1.1, 2.0]
ISSUE_JOINT2 = [0.0, 1.7528, 1.7528, 0.0]


def issue_positions(joint2=ISSUE_JOINT2):
    """The issue's example: joint 2 through 0 -> 1.7528 -> 1.7528 -> 0 rad, others fixed."""
    positions = np.tile(Q0, (4, 1))
    positions[:, 1] = joint2
    return positions


def dense(trajectory, step=1e-4):
    """(t, q, v, a) sampled every `step` s over the trajectory (its polynomials, via sample)."""
    t = np.arange(trajectory.times[0], trajectory.duration, step)
    q, v, a = (np.array(x) for x in zip(*(trajectory.sample(ti) for ti in t)))
    return t, q, v, a


def test_issue_example_numbers_from_an_independent_spline():
    spline = CubicSpline(ISSUE_TIMES, ISSUE_JOINT2, bc_type='clamped')
    t = np.linspace(0.0, 2.0, 2_000_001)   # 1 µs
    q, v = spline(t), spline(t, 1)
    assert q.max() == pytest.approx(1.7649, abs=1e-4)
    assert np.abs(v).max() == pytest.approx(2.80, abs=5e-3)
    (t_max, q_max, _, _), (_, v_max, t_min, v_min) = (
        extrema(JointTrajectory(ISSUE_TIMES, issue_positions()), order) for order in (0, 1))
    assert q_max[1] == pytest.approx(q.max(), abs=1e-10)
    assert t_max[1] == pytest.approx(t[q.argmax()], abs=2e-6)
    assert v_min[1] == pytest.approx(v.min(), abs=1e-9)
    assert t_min[1] == pytest.approx(t[v.argmin()], abs=2e-6)
    assert v_max[1] == pytest.approx(v.max(), abs=1e-9)


def test_issue_example_is_rejected_naming_joint_time_and_limit():
    trajectory = JointTrajectory(ISSUE_TIMES, issue_positions())
    with pytest.raises(InfeasibleTrajectory) as error:
        check_trajectory(PANDA, trajectory)
    message = str(error.value)
    assert ('panda_joint2: position 1.7649 rad at t = 1.0509 s beyond its limit 1.7628 rad'
            in message)
    assert ('panda_joint2: velocity -2.8019 rad/s at t = 1.5278 s beyond its limit '
            '-2.1750 rad/s' in message)
    assert [(v.quantity, v.joint) for v in error.value.violations] == [
        ('position', 'panda_joint2'), ('velocity', 'panda_joint2')]


def test_issue_example_position_overshoot_has_no_time_scaling_cure():
    """Uniform time scaling keeps the path: its overshoot stays, so it is rejected."""
    trajectory = JointTrajectory(ISSUE_TIMES, issue_positions())
    with pytest.raises(InfeasibleTrajectory, match='no time scaling cures a position violation'
                       '.*panda_joint2: position 1.7649'):
        time_scaling(PANDA, trajectory)
    _, q, _, _ = dense(trajectory.time_scaled(3.0), 1e-3)
    assert q[:, 1].max() > PANDA.upper[1]   # slower: the same overshoot


def test_issue_waypoints_at_rest_are_time_scaled_within_both_limits():
    """The issue's waypoints with zero velocities (a stop at each): no overshoot, too fast."""
    positions = issue_positions()
    trajectory = JointTrajectory(ISSUE_TIMES, positions, np.zeros_like(positions))
    (violation,) = trajectory_violations(PANDA, trajectory)
    assert (violation.quantity, violation.joint) == ('velocity', 'panda_joint2')
    # quintic rest-to-rest: peak speed 15/8 of the mean, on the way back (1.7528 rad in 0.9 s)
    peak = 15 / 8 * 1.7528 / 0.9
    assert abs(violation.value) == pytest.approx(peak, rel=1e-12)
    assert violation.time == pytest.approx(1.55, abs=1e-12)
    factor = time_scaling(PANDA, trajectory)
    assert factor == pytest.approx(peak / 2.175, rel=1e-12)   # closed form
    scaled = trajectory.time_scaled(factor)
    assert scaled.duration == pytest.approx(2.0 * factor)
    _, q, v, _ = dense(scaled)
    assert q[:, 1].max() <= PANDA.upper[1]
    assert np.abs(v[:, 1]).max() <= PANDA.velocity_limit[1] * (1 + 1e-12)
    assert np.abs(v[:, 1]).max() == pytest.approx(PANDA.velocity_limit[1], rel=1e-6)
    check_trajectory(PANDA, scaled)


def test_time_scaled_is_the_same_path_slower():
    rng = np.random.default_rng(3)
    times = np.array([0.2, 0.7, 1.0, 1.6])
    trajectory = JointTrajectory(times, rng.uniform(-1, 1, (4, 7)), rng.uniform(-1, 1, (4, 7)),
                                 rng.uniform(-3, 3, (4, 7)))
    scaled = trajectory.time_scaled(1.7)
    for t in np.linspace(0.2, 1.59, 29):
        q, v, a = trajectory.sample(t)
        q_s, v_s, a_s = scaled.sample(1.7 * t)
        np.testing.assert_allclose(q_s, q, atol=1e-12)
        np.testing.assert_allclose(v_s, v / 1.7, atol=1e-12)
        np.testing.assert_allclose(a_s, a / 1.7**2, atol=1e-11)
    with pytest.raises(ValueError, match='factor must be finite and > 0'):
        trajectory.time_scaled(0.0)


def test_effort_violation_and_its_scaling_with_a_payload():
    """A fast move with 3 kg at the hand: effort beyond the limits, cured by slowing down."""
    model = rd.with_payload(PANDA, mass=3.0, com=[0.0, 0.0, 0.1])
    positions = issue_positions([0.0, 1.2, 1.2, 0.0])
    trajectory = JointTrajectory([0.0, 0.45, 0.5, 0.95], positions)
    limit = model.effort_limit
    t, q, v, a = dense(trajectory)   # 20x the checker's grid
    tau = rd.rnea(model, q, v, a)
    worst = np.abs(tau).max(axis=0)
    found = {v.joint: v for v in trajectory_violations(model, trajectory)
             if v.quantity == 'effort'}
    assert found and set(found) == {model.joint_names[j] for j in np.flatnonzero(worst > limit)}
    for name, violation in found.items():
        j = model.joint_names.index(name)
        assert abs(violation.value) == pytest.approx(worst[j], rel=1e-3)
        assert violation.limit == pytest.approx(np.copysign(limit[j], violation.value))
        assert violation.margin < 1e-2 * limit[j]
    factor = time_scaling(model, trajectory)
    assert factor > 1
    for scale, fits in ((factor, True), (factor * 0.995, False)):
        _, q, v, a = dense(trajectory.time_scaled(scale))
        tau = rd.rnea(model, q, v, a)
        within = ((np.abs(tau) <= limit).all() and (np.abs(v) <= model.velocity_limit).all())
        assert within == fits, scale


def test_an_effort_too_large_to_evaluate_is_a_violation_not_a_pass():
    """A waypoint at 1e300 rad (a fuzzer's): τ along the path is NaN, which fails the check."""
    positions = np.tile(Q0, (3, 1))
    positions[1, 4] = 1e300
    trajectory = JointTrajectory([0.0, 0.1, 0.2], positions)
    found = {v.quantity: v for v in trajectory_violations(PANDA, trajectory)
             if v.joint == 'panda_joint5'}
    assert set(found) == {'position', 'velocity', 'effort'}
    assert math.isnan(found['effort'].value + found['effort'].margin)


@pytest.mark.parametrize('spacing', [0.002, 0.02, 0.05])
def test_effort_grid_plus_margin_bounds_the_peak_between_samples(spacing):
    """On grids up to 25x coarser than the default, sampled |τ| + margin ≥ the dense peak."""
    rng = np.random.default_rng(11)
    times = np.array([0.0, 0.3, 0.5, 0.9, 1.2])
    trajectory = JointTrajectory(times, Q0 + rng.uniform(-0.5, 0.5, (5, 7)),
                                 rng.uniform(-1.5, 1.5, (5, 7)), rng.uniform(-10, 10, (5, 7)))
    samples = EffortSamples(PANDA, trajectory, spacing)
    tau = samples.effort()
    bound = np.abs(tau) + samples.margin(tau)
    _, q, v, a = dense(trajectory, 1e-4)
    tau_dense = np.abs(rd.rnea(PANDA, q, v, a))
    for k in range(len(times) - 1):
        t = np.arange(len(q)) * 1e-4
        peak = tau_dense[(t >= times[k]) & (t < times[k + 1])].max(axis=0)
        excess = bound[samples.segment == k].max(axis=0) - peak
        assert (excess >= 0).all(), (k, excess)
        if spacing == 0.002:   # the default grid: the bound within 0.1 % of the effort limits
            assert (excess <= 1e-3 * PANDA.effort_limit).all(), (k, excess)


def test_acceleration_limit_and_bad_input():
    trajectory = JointTrajectory([0.0, 1.0], np.array([Q0, Q0 + 0.5]))
    # rest-to-rest cubic: q̈ peaks at 6 Δq / T² = 3 rad/s² at both ends
    (t_max, a_max, t_min, a_min) = extrema(trajectory, 2)
    np.testing.assert_allclose(a_max, 3.0, rtol=1e-12)
    np.testing.assert_allclose(a_min, -3.0, rtol=1e-12)
    found = trajectory_violations(PANDA, trajectory, acceleration_limit=2.0, effort=False)
    assert {v.quantity for v in found} == {'acceleration'} and len(found) == 7
    assert time_scaling(PANDA, trajectory, acceleration_limit=2.0) == pytest.approx(
        np.sqrt(1.5), rel=1e-12)
    with pytest.raises(ValueError, match='acceleration_limit must be > 0'):
        trajectory_violations(PANDA, trajectory, acceleration_limit=0.0)
    with pytest.raises(ValueError, match='trajectory has 2 joints, the model 7'):
        trajectory_violations(PANDA, JointTrajectory([0.0, 1.0], [[0, 0], [1, 1]]))
    with pytest.raises(InfeasibleTrajectory, match='slower than max_factor = 1.1'):
        time_scaling(PANDA, trajectory, acceleration_limit=1.0, max_factor=1.1)
    single = JointTrajectory([0.0], [Q0])   # one point: held at rest
    assert trajectory_violations(PANDA, single) == [] and time_scaling(PANDA, single) == 1.0
    with pytest.raises(InfeasibleTrajectory, match='panda_joint4: position 0.0000 rad'):
        check_trajectory(PANDA, JointTrajectory([0.0], [np.r_[Q0[:3], 0.0, Q0[4:]]]))


def test_gravity_beyond_the_limit_cannot_be_slowed_into_it():
    model = rd.with_payload(PANDA, mass=40.0, com=[0.0, 0.0, 0.1])
    q = np.array([0.0, 1.0, 0.0, -0.5, 0.0, 1.7, 0.8])
    trajectory = JointTrajectory([0.0, 1.0], np.array([q, q + 0.1]))
    assert np.abs(rd.gravity(model, q)[1]) > model.effort_limit[1]
    with pytest.raises(InfeasibleTrajectory, match='no time scaling up to max_factor'):
        time_scaling(model, trajectory, max_factor=8.0)


waypoint_sets = st.integers(2, 5).flatmap(lambda k: st.tuples(
    st.lists(st.floats(0.15, 1.0), min_size=k - 1, max_size=k - 1),
    st.lists(st.lists(st.floats(0.0, 1.0), min_size=7, max_size=7), min_size=k, max_size=k),
    st.booleans()))


def assert_checked_or_scaled_within_limits(times, positions, at_rest, acceleration=15.0):
    """Checked or scaled, the path stays inside every limit, at 20 001 independent samples.

    Positions only (clamped spline) may overshoot a limit between waypoints: then rejected, and
    the independent path does overshoot. Waypoints at rest (zero velocities) never overshoot.
    Returns 'rejected', 'too slow' (over 100x slower needed), 'scaled' or 'feasible'.
    """
    lower, upper = PANDA.lower, PANDA.upper
    trajectory = JointTrajectory(times, positions,
                                 np.zeros_like(positions) if at_rest else None)
    try:
        factor = time_scaling(PANDA, trajectory, acceleration_limit=acceleration)
    except InfeasibleTrajectory as error:
        with pytest.raises(InfeasibleTrajectory):
            check_trajectory(PANDA, trajectory)
        q, v, a = reference_path(times, positions, at_rest, np.linspace(0, times[-1], 20_001))
        if 'max_factor' in str(error):   # beyond 100x slower: v and a need more
            assert max((np.abs(v) / PANDA.velocity_limit).max(),
                       np.sqrt(np.abs(a).max() / acceleration)) > 100 * (1 - 1e-3)
            return 'too slow'
        assert not at_rest
        assert {v.quantity for v in error.violations} == {'position'}
        assert ((q < lower - 1e-9) | (q > upper + 1e-9)).any()
        return 'rejected'
    if factor == 1.0:
        check_trajectory(PANDA, trajectory, acceleration_limit=acceleration)
    t = np.linspace(0.0, times[-1] * factor, 20_001)
    q, v, a = reference_path(times * factor, positions, at_rest, t)
    assert ((q >= lower - 3e-9) & (q <= upper + 3e-9)).all()   # feasibility.ROUNDING
    assert (np.abs(v) <= PANDA.velocity_limit * (1 + 1e-9)).all()
    assert (np.abs(a) <= acceleration * (1 + 1e-9)).all()
    tau = rd.rnea(PANDA, q[::4], v[::4], a[::4])
    assert (np.abs(tau) <= PANDA.effort_limit).all()
    return 'scaled' if factor > 1.0 else 'feasible'


@settings(max_examples=30, deadline=None, derandomize=True)
@given(waypoint_sets)
def test_random_waypoints_inside_the_limits_never_leave_them(waypoints):
    steps, fractions, at_rest = waypoints
    times = np.concatenate([[0.0], np.cumsum(steps)])
    lower, upper = PANDA.lower, PANDA.upper
    positions = np.clip(lower + np.array(fractions) * (upper - lower), lower, upper)
    assert_checked_or_scaled_within_limits(times, positions, at_rest)


def test_adversarial_waypoints_never_leave_the_limits():
    """Seeded sets the uniform draws rarely make: joints at their limits, 20-300 ms intervals.

    Every joint at or within 1 mrad of a limit half the time: the positions-only quintics
    overshoot it, and over-speed on the short intervals.
    """
    rng = np.random.default_rng(19)
    lower, upper = PANDA.lower, PANDA.upper
    outcomes = []
    for _ in range(40):
        k = rng.integers(2, 6)
        near = np.where(rng.random((k, 7)) < 0.5, lower + rng.uniform(0, 1e-3, (k, 7)),
                        upper - rng.uniform(0, 1e-3, (k, 7)))
        positions = np.where(rng.random((k, 7)) < 0.5, near, rng.uniform(lower, upper, (k, 7)))
        times = np.concatenate([[0.0], np.cumsum(rng.uniform(0.02, 0.3, k - 1))])
        outcomes.append(assert_checked_or_scaled_within_limits(times, positions,
                                                               bool(rng.random() < 0.5)))
    print({o: outcomes.count(o) for o in set(outcomes)})
    assert {'rejected', 'scaled'} <= set(outcomes), outcomes
