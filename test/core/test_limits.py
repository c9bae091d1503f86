"""limit_command (one compiled pass) against numpy: np.clip for the rate limit, clamp_effort."""
import numpy as np
import pytest

from robot_dynamics.core.control import clamp_effort
from robot_dynamics.core.limits import CLAMPED, NON_FINITE, RATE_LIMITED, limit_command


def run(tau, previous, step, limits, order):
    command, out, clamped = previous.copy(), np.empty(len(order)), np.zeros(len(tau), bool)
    status = limit_command(tau, command, step, limits, order, out, clamped)
    return status, command, out, clamped


@pytest.mark.nojit
@pytest.mark.parametrize('seed', range(20))
def test_rate_limit_then_clamp_as_numpy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    tau, previous = rng.normal(0, 10, n), rng.normal(0, 10, n)
    limits = np.where(rng.random(n) < 0.2, np.inf, rng.uniform(0.5, 15, n))
    step, order = float(rng.choice([0.0, 0.5, 5.0, np.inf])), rng.permutation(n)
    status, command, out, clamped = run(tau, previous, step, limits, order)
    limited = np.clip(tau, previous - step, previous + step)
    expected, mask = clamp_effort(limited, limits)
    assert np.array_equal(command, expected) and np.array_equal(out, expected[order])
    assert np.array_equal(clamped, mask)
    assert status == RATE_LIMITED * (limited != tau).any() + CLAMPED * mask.any()


@pytest.mark.nojit
@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
def test_non_finite_writes_nothing(bad):
    tau, previous = np.array([1.0, bad, 2.0]), np.array([0.5, 0.5, 0.5])
    status, command, out, _ = run(tau, previous, np.inf, np.full(3, 10.0), np.arange(3))
    assert status == NON_FINITE and np.array_equal(command, previous)


def test_first_command_unlimited():
    """step inf: τ itself (clamped), whatever the previous buffer holds."""
    tau = np.array([3.0, -4.0])
    status, command, out, _ = run(tau, np.array([100.0, -100.0]), np.inf, np.array([5.0, 2.0]),
                                  np.array([1, 0]))
    assert status == CLAMPED and command.tolist() == [3.0, -2.0] and out.tolist() == [-2.0, 3.0]
