"""Exciting trajectories for identification: finite Fourier series (Swevers et al., IEEE TRA 1997).

Joint i follows L harmonics of the fundamental ω = 2π / period::

    q_i(t) = q0_i + Σ_l [a_il sin(lωt) - b_il (cos(lωt) - 1)] / (lω)
    q̇_i(t) = Σ_l a_il cos(lωt) + b_il sin(lωt)
    q̈_i(t) = Σ_l lω (b_il cos(lωt) - a_il sin(lωt))

It starts at q0 at rest: a_i1 = -Σ_{l>1} a_il and b_i1 = -Σ_{l>1} l b_il give q̇(0) = q̈(0) = 0,
so it can be entered from standstill and repeated. Each joint's coefficients are then scaled by
the largest factor that keeps it within its position, velocity and acceleration limits (times
a margin, checked on a fine time grid, less ALLOWANCE): feasibility holds by construction and
the optimiser only shapes the motion. ALLOWANCE keeps the peaks between the grid's points, and
the overshoot of a controller's interpolation between knots sampled from the series, inside the
limits even at a margin of 1.
``excitation_trajectory`` minimises the condition number of the base regressor stacked along
one period (scipy.optimize L-BFGS-B on log cond, finite-difference gradients, within a time
budget).
"""
import time

import numpy as np

from .regressor import base_parameters

ALLOWANCE = 0.01   # fraction of each limit kept free below margin x limit (module docstring)


class FourierTrajectory:
    """q, q̇, q̈ of the series over ``cycles`` periods, held at rest at q0 outside [0, duration].

    ``sample(t)`` answers like ``trajectory.JointTrajectory.sample``; ``sample_many(times)``
    gives (N, nv) arrays; ``coefficients`` (nv, L, 2) the scaled (a_il, b_il).
    """

    def __init__(self, q0, coefficients, period, cycles=1):
        self.q0 = np.asarray(q0, dtype=float)
        self.coefficients = np.asarray(coefficients, dtype=float)
        self.period, self.cycles = float(period), int(cycles)
        self.omega = 2.0 * np.pi / self.period
        self.condition_number = self.initial_condition_number = None   # excitation_trajectory

    @property
    def nv(self):
        """Number of joints."""
        return len(self.q0)

    @property
    def duration(self):
        """The time of the end of the last cycle."""
        return self.period * self.cycles

    def sample_many(self, times):
        """q, q̇, q̈ at each of ``times``, shape (N, nv) each."""
        t = np.asarray(times, dtype=float)
        inside = (t >= 0.0) & (t <= self.duration)
        lw = self.omega * np.arange(1, self.coefficients.shape[1] + 1)   # (L,)
        phase = np.where(inside, t, 0.0)[:, None] * lw                  # (N, L)
        s, c = np.sin(phase), np.cos(phase)
        a, b = self.coefficients[..., 0], self.coefficients[..., 1]        # (nv, L)
        q = self.q0 + (s / lw) @ a.T - ((c - 1.0) / lw) @ b.T
        v = c @ a.T + s @ b.T
        acc = (c * lw) @ b.T - (s * lw) @ a.T
        q[~inside] = self.q0   # at rest before the start and after the end (q(T) = q0)
        return q, v, acc

    def sample(self, t):
        """(q, q̇, q̈) at time t."""
        q, v, a = self.sample_many([t])
        return q[0], v[0], a[0]


def fourier_trajectory(free, q0, period, lower, upper, velocity_limit, acceleration_limit,
                       margin=0.95, grid=None, cycles=1):
    """The FourierTrajectory of free coefficients (nv, L - 1, 2), harmonics 2..L.

    Harmonic 1 is completed for a start at rest, and each joint scaled onto its tightest limit
    times ``margin`` (1 - ALLOWANCE).
    """
    L = free.shape[1] + 1
    harmonic = np.arange(2, L + 1)
    first = np.stack([-free[..., 0].sum(1), -(free[..., 1] * harmonic).sum(1)], axis=-1)
    unit = FourierTrajectory(q0, np.concatenate([first[:, None], free], axis=1), period)
    grid = np.linspace(0.0, period, 40 * L + 1) if grid is None else grid
    q, v, a = unit.sample_many(grid)
    d = q - q0
    with np.errstate(divide='ignore', invalid='ignore'):
        bounds = np.stack([
            np.where(d > 0, (upper - q0) / d, np.where(d < 0, (lower - q0) / d, np.inf)).min(0),
            (velocity_limit / np.abs(v)).min(0),
            (acceleration_limit / np.abs(a)).min(0)])
    scale = margin * (1.0 - ALLOWANCE) * np.nan_to_num(bounds.min(0), posinf=0.0)
    return FourierTrajectory(q0, unit.coefficients * scale[:, None, None], period, cycles)


class _OutOfTime(Exception):
    pass


class _BoundedSearch:
    """An objective with a budget of seconds and evaluations that remembers its best point.

    Past the budget it raises _OutOfTime, which ends any scipy optimiser.
    """

    def __init__(self, objective, seconds, evaluations):
        self.objective, self.deadline = objective, time.monotonic() + seconds
        self.left = np.inf if evaluations is None else evaluations
        self.x, self.value = None, np.inf

    def __call__(self, x):
        if self.left <= 0 or time.monotonic() > self.deadline:
            raise _OutOfTime
        self.left -= 1
        value = self.objective(x)
        if value < self.value:
            self.x, self.value = x.copy(), value
        return value


def excitation_trajectory(model, period=10.0, harmonics=5, q0=None, velocity_limit=None,
                          acceleration_limit=None, margin=0.95, samples=200, time_budget=10.0,
                          evaluations=None, seed=0, base=None, cycles=1):
    """An exciting FourierTrajectory within the limits, optimised for cond(Y_b).

    Limits default to the model's (position, velocity); ``acceleration_limit`` (URDFs have none)
    defaults to 5 s^-1 times the velocity limit: pass the arm's own. ``q0``: start and centre
    (default: mid-range, 0 where unlimited). ``samples`` states along one period make the stacked
    base regressor (``base``: a ``BaseParameters``, default the inertial one of ``model``) whose
    log condition number L-BFGS-B minimises from a seeded random start for at most
    ``time_budget`` seconds and ``evaluations`` cost evaluations (None: no limit); the best point
    seen is kept. The result carries ``condition_number`` and ``initial_condition_number``.
    """
    from scipy.optimize import minimize  # imported here: slow, offline use only
    lower, upper = model.lower, model.upper
    velocity_limit = model.velocity_limit if velocity_limit is None else np.broadcast_to(
        np.asarray(velocity_limit, dtype=float), (model.nv,))
    if not np.all(np.isfinite(velocity_limit)):
        raise ValueError(f'excitation needs finite velocity limits; the model has '
                         f'{velocity_limit}: pass velocity_limit=')
    acceleration_limit = 5.0 * velocity_limit if acceleration_limit is None else np.broadcast_to(
        np.asarray(acceleration_limit, dtype=float), (model.nv,))
    if q0 is None:
        q0 = np.where(np.isfinite(lower) & np.isfinite(upper), (lower + upper) / 2, 0.0)
    base = base or base_parameters(model)
    times = np.linspace(0.0, period, samples, endpoint=False)

    def trajectory(x):
        return fourier_trajectory(x.reshape(model.nv, harmonics - 1, 2), q0, period, lower,
                                  upper, velocity_limit, acceleration_limit, margin,
                                  cycles=cycles)

    def log_condition(x):
        """log cond(W) = log(λ_max / λ_min) / 2 of the Gram matrix W^T W (r x r, cheap)."""
        Y = base.regressor(model, *trajectory(x).sample_many(times))
        W = Y.reshape(-1, Y.shape[-1])
        eigenvalues = np.linalg.eigvalsh(W.T @ W)
        return 0.5 * np.log(eigenvalues[-1] / max(eigenvalues[0], 1e-300))

    x0 = np.random.default_rng(seed).normal(size=model.nv * (harmonics - 1) * 2)
    search = _BoundedSearch(log_condition, time_budget, evaluations)
    initial = log_condition(x0)
    try:
        minimize(search, x0, method='L-BFGS-B')
    except _OutOfTime:
        pass
    result = trajectory(x0 if search.x is None else search.x)
    result.condition_number = float(np.exp(min(search.value, initial)))
    result.initial_condition_number = float(np.exp(initial))
    return result
