"""JointTrajectory: interpolation, C2 continuity at knots, polynomial reproduction, errors."""
import numpy as np
import pytest
from numpy.polynomial import Polynomial
from scipy.interpolate import CubicSpline

from robot_dynamics.core.trajectory import JointTrajectory

TIMES = np.array([0.3, 0.8, 1.1, 2.0, 2.4])  # first point after 0, uneven spacing
RNG = np.random.default_rng(7)
Q = RNG.uniform(-1, 1, (5, 3))
V = RNG.uniform(-1, 1, (5, 3))
A = RNG.uniform(-3, 3, (5, 3))
CASES = {"pos": (Q,), "pos_vel": (Q, V), "pos_vel_acc": (Q, V, A)}


def sampled(traj, ts):
    return [np.array(x) for x in zip(*(traj.sample(t) for t in ts))]


@pytest.mark.parametrize("case", CASES)
def test_knots_are_interpolated(case):
    data = CASES[case]
    traj = JointTrajectory(TIMES, *data)
    q, v, a = sampled(traj, TIMES[:-1])  # the last knot is the held end point
    np.testing.assert_allclose(q, Q[:-1], atol=1e-12)
    if len(data) > 1:
        np.testing.assert_allclose(v, V[:-1], atol=1e-12)
    if len(data) > 2:
        np.testing.assert_allclose(a, A[:-1], atol=1e-12)
    assert traj.duration == TIMES[-1]


@pytest.mark.parametrize("case", CASES)
def test_c2_continuity_at_interior_knots(case):
    traj = JointTrajectory(TIMES, *CASES[case])
    eps, knots = 1e-6, TIMES[1:-1]

    def limit(side):  # linear extrapolation to the knot from one side, error O(eps^2)
        near, far = sampled(traj, knots + side * eps), sampled(traj, knots + 2 * side * eps)
        return [2 * n - f for n, f in zip(near, far)]

    for lhs, rhs in zip(limit(-1), limit(+1)):
        np.testing.assert_allclose(lhs, rhs, atol=1e-6)


@pytest.mark.parametrize("case", CASES)
def test_derivatives_match_finite_differences(case):
    traj = JointTrajectory(TIMES, *CASES[case])
    h = 1e-5
    for t in np.linspace(TIMES[0] + 0.01, TIMES[-1] - 0.01, 37):
        (q0, v0, _), (q, v, a), (q1, v1, _) = (traj.sample(t + d) for d in (-h, 0, h))
        np.testing.assert_allclose(v, (q1 - q0) / (2 * h), atol=1e-6)
        np.testing.assert_allclose(a, (v1 - v0) / (2 * h), atol=1e-5)


def test_quintic_is_reproduced_exactly():
    """Knot values of one quintic polynomial -> that polynomial between the knots."""
    p = Polynomial([0.2, -1.0, 0.5, 2.0, -1.5, 0.7])
    d1, d2 = p.deriv(), p.deriv(2)
    traj = JointTrajectory(TIMES, p(TIMES)[:, None], d1(TIMES)[:, None], d2(TIMES)[:, None])
    ts = np.linspace(TIMES[0], TIMES[-1] - 1e-9, 101)
    q, v, a = sampled(traj, ts)
    np.testing.assert_allclose(q[:, 0], p(ts), atol=1e-10)
    np.testing.assert_allclose(v[:, 0], d1(ts), atol=1e-9)
    np.testing.assert_allclose(a[:, 0], d2(ts), atol=1e-8)


def test_positions_and_velocities_reproduce_a_cubic():
    p = Polynomial([0.1, 0.4, -2.0, 0.9])
    traj = JointTrajectory(TIMES, p(TIMES)[:, None], p.deriv()(TIMES)[:, None])
    ts = np.linspace(TIMES[0], TIMES[-1] - 1e-9, 101)
    q, v, a = sampled(traj, ts)
    np.testing.assert_allclose(q[:, 0], p(ts), atol=1e-10)
    np.testing.assert_allclose(a[:, 0], p.deriv(2)(ts), atol=1e-8)


def test_positions_only_is_the_clamped_cubic_spline_from_rest_to_rest():
    traj = JointTrajectory(TIMES, Q)
    spline = CubicSpline(TIMES, Q, bc_type=((1, np.zeros(3)), (1, np.zeros(3))))
    ts = np.linspace(TIMES[0], TIMES[-1] - 1e-9, 73)
    for got, nu in zip(sampled(traj, ts), range(3)):
        np.testing.assert_allclose(got, spline(ts, nu), atol=1e-10)
    np.testing.assert_allclose(traj.sample(TIMES[0])[1], 0, atol=1e-12)
    np.testing.assert_allclose(traj.sample(TIMES[-1] - 1e-12)[1], 0, atol=1e-9)


def test_holds_end_points_at_rest_outside_the_knots():
    traj = JointTrajectory(TIMES, Q, V, A)
    for t, k in ((0.0, 0), (0.29, 0), (2.4, -1), (10.0, -1)):
        q, v, a = traj.sample(t)
        np.testing.assert_array_equal(q, Q[k])
        np.testing.assert_array_equal(v, 0)
        np.testing.assert_array_equal(a, 0)


def test_single_point_and_two_points():
    q, v, a = JointTrajectory([1.0], [[0.5, -0.5]]).sample(2.0)
    np.testing.assert_array_equal(q, [0.5, -0.5])
    traj = JointTrajectory([0.0, 2.0], [[0.0], [1.0]])  # rest-to-rest cubic 3s^2/4 - s^3/4
    q, v, a = traj.sample(1.0)
    np.testing.assert_allclose([q[0], v[0], a[0]], [0.5, 0.75, 0.0], atol=1e-12)
    traj = JointTrajectory([0.0, 1.0], [[0.0], [1.0]], [[0.0], [2.0]])  # q = t^2
    np.testing.assert_allclose(np.ravel(traj.sample(0.5)), [0.25, 1.0, 2.0], atol=1e-12)


@pytest.mark.parametrize("args, match", [
    (([0.0, 1.0, 1.0], np.zeros((3, 2))), "strictly increasing"),
    (([0.0, 2.0, 1.0], np.zeros((3, 2))), "strictly increasing"),
    (([-1.0, 1.0], np.zeros((2, 2))), ">= 0"),
    (([0.0, np.nan], np.zeros((2, 2))), "times: contains NaN"),
    (([0.0, 1.0], [[0.0, np.nan], [0.0, 0.0]]), "positions: contains NaN"),
    (([0.0, 1.0], np.zeros((3, 2))), r"positions: expected shape \(2, 2\)"),
    (([0.0, 1.0], np.zeros(2)), r"positions: expected shape \(K, nv\)"),
    (([], np.zeros((0, 2))), "non-empty"),
    (([0.0, 1.0], np.zeros((2, 2)), np.zeros((2, 3))), r"velocities: expected shape \(2, 2\)"),
    (([0.0, 1.0], np.zeros((2, 2)), np.zeros((2, 2)), np.full((2, 2), np.inf)),
     "accelerations: contains"),
    (([0.0, 1.0], np.zeros((2, 2)), None, np.zeros((2, 2))), "without velocities"),
])
def test_invalid_input_raises_value_error(args, match):
    with pytest.raises(ValueError, match=match):
        JointTrajectory(*args)


def test_sample_rejects_nan_time():
    with pytest.raises(ValueError, match="finite"):
        JointTrajectory([0.0, 1.0], np.zeros((2, 1))).sample(np.nan)
