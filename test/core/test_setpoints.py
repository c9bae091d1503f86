"""SetpointLimiter: streamed targets reached within velocity and acceleration limits."""
import numpy as np
import pytest

import robot_dynamics as rd
from robot_dynamics.core.setpoints import SetpointLimiter

PANDA = rd.load_urdf(rd.robot_urdf('panda'), base='panda_link0', tip='panda_hand')
Q0 = np.array([0.0, -0.4, 0.0, -2.1, 0.0, 1.7, 0.8])
DT = 1e-3


def run(limiter, targets):
    """Rows of (q, q̇, q̈), one per target (a target per step)."""
    return [np.array(x) for x in zip(*(limiter.step(target, DT) for target in targets))]


def test_step_target_is_reached_in_near_minimum_time_within_the_limits():
    limiter = SetpointLimiter(PANDA, acceleration_limit=5.0)
    limiter.reset(Q0)
    target = Q0 + np.array([1.0, 0.5, -1.5, 0.5, 0.01, -1.0, 2.0])
    q, v, a = run(limiter, [target] * 3000)
    assert (np.abs(v) <= PANDA.velocity_limit * (1 + 1e-12)).all()
    assert (np.abs(a) <= 5.0 * (1 + 1e-9)).all()
    np.testing.assert_allclose(q[-1], target, atol=1e-12)
    np.testing.assert_allclose(v[-1], 0.0, atol=1e-12)
    # monotone: never past the target (it moves one way only)
    e = (target - q) * np.sign(target - Q0)
    assert (e >= -1e-12).all()
    # time to arrive vs the continuous bang-bang (triangle or trapezoid) minimum
    d, v_max, a_max = np.abs(target - Q0), PANDA.velocity_limit, 5.0
    t_min = np.where(d < v_max**2 / a_max, 2 * np.sqrt(d / a_max), d / v_max + v_max / a_max)
    arrived = np.array([np.flatnonzero(np.abs(q[:, j] - target[j]) > 1e-12).max() + 1
                        for j in range(7)]) * DT
    # (the discrete profile, position advanced with the new velocity, is O(Δt) off it)
    assert (np.abs(arrived - t_min) <= 3 * DT).all(), (arrived, t_min)


def test_a_moving_target_is_tracked_and_a_reversal_is_braked():
    limiter = SetpointLimiter(PANDA, acceleration_limit=[8.0] * 7, velocity_limit=1.0)
    limiter.reset(Q0)
    t = np.arange(1, 3001) * DT
    targets = Q0 + 0.3 * np.sin(2 * t)[:, None]   # 0.6 rad/s, 1.2 rad/s²: within the limits
    q, v, a = run(limiter, targets)
    assert (np.abs(v) <= 1.0 + 1e-12).all() and (np.abs(a) <= 8.0 * (1 + 1e-9)).all()
    # it aims to stop on the latest target: at target speed u it trails by about u² / 2 a_max
    lag = np.abs(q[1500:] - targets[1500:]).max()
    assert 0.5 * 0.6**2 / (2 * 8.0) < lag <= 0.6**2 / (2 * 8.0) + 2 * 0.6 * DT
    # the target jumps backwards while the joints run at full speed: braked within a_max
    limiter.reset(Q0, v=np.full(7, 1.0))
    q, v, a = run(limiter, [Q0 - 0.2] * 1000)
    assert (np.abs(a) <= 8.0 * (1 + 1e-9)).all()
    assert q[:, 0].max() == pytest.approx(Q0[0] + 1.0**2 / (2 * 8.0), abs=2e-3)   # v²/2a
    np.testing.assert_allclose(q[-1], Q0 - 0.2, atol=1e-12)


def test_targets_are_clamped_into_the_position_limits_and_bad_input():
    limiter = SetpointLimiter(PANDA, acceleration_limit=10.0)
    limiter.reset(Q0)
    q, _, _ = run(limiter, [Q0 + 10.0] * 2000)
    np.testing.assert_allclose(q[-1], PANDA.upper, atol=1e-12)
    assert (q <= PANDA.upper + 1e-12).all()
    with pytest.raises(ValueError, match='acceleration_limit must be finite and > 0'):
        SetpointLimiter(PANDA, acceleration_limit=0.0)
    with pytest.raises(RuntimeError, match='before reset'):
        SetpointLimiter(PANDA, acceleration_limit=1.0).step(Q0, DT)
    with pytest.raises(ValueError, match='dt must be finite and > 0'):
        limiter.step(Q0, 0.0)
    with pytest.raises(ValueError, match='target contains NaN'):
        limiter.step(Q0 * np.nan, DT)
