"""Can the arm follow a JointTrajectory? Limits checked along the whole interpolated path.

Position, velocity and acceleration are polynomials on each segment (trajectory.py: quintics),
so their extrema are exact: the segment ends and the real roots of the next derivative inside
the segment. The effort the model predicts, τ(t) = rnea(q, q̇, q̈) (payload, armature and
friction included when the Model has them), is not a polynomial: it is sampled on a grid of
spacing Δ ≤ ``max_spacing`` per segment, and a peak between grid points is bounded with a
margin. Near an interior maximum t* (τ̇ = 0) of a C² function, the nearest grid point t_k is
within Δ/2, so τ(t*) − τ(t_k) ≤ max|τ̈| Δ²/8; max|τ̈| Δ² is estimated by the largest second
difference |τ_k+1 − 2 τ_k + τ_k−1| on the segment (a mean of τ̈ Δ² over two cells), doubled for
the variation of τ̈ between grid points: margin = max|δ²τ| / 4 per joint and segment. The arm
also holds the end points at rest, so g(q) there is checked too.

Time scaling: a violation of velocity, acceleration or effort is cured by tracing the same path
s times slower (JointTrajectory.time_scaled): q̇ / s, q̈ / s² and
τ(s) = g(q) + (M(q) q̈ + C(q, q̇) q̇) / s² + τ_f(q̇ / s). Uniform scaling keeps the path and the
ratios between its timings (what a user planned, reaches the waypoints at proportionally later
times) and needs no new dependency; a time-optimal parametrisation under torque limits (TOPP-RA,
Pham & Pham 2018, ``toppra`` on PyPI) would be faster along the path but re-times the segments
non-uniformly, returns a different (sampled) trajectory representation, and adds a compiled
dependency to the arm's controller. Velocity and acceleration give s in closed form
(s ≥ max|q̇| / q̇_max, s ≥ sqrt(max|q̈| / q̈_max)); the effort's s is found by bisection on the
cached samples (their rnea terms split once into g, the s⁻² part and friction). Position
violations have no cure by timing: the trajectory is rejected.
"""
import dataclasses
import math

import numpy as np

from .algorithms.friction import joint_friction
from .algorithms.rnea import gravity, rnea
from .layout import PRISMATIC

QUANTITIES = ('position', 'velocity', 'acceleration', 'effort')
_UNITS = {'position': ('rad', 'm'), 'velocity': ('rad/s', 'm/s'),
          'acceleration': ('rad/s²', 'm/s²'), 'effort': ('N m', 'N')}
MAX_SPACING = 0.002   # s, effort grid spacing (Δ)
ROUNDING = 1e-9       # relative: a waypoint on a limit is not beyond it


@dataclasses.dataclass(frozen=True)
class Violation:
    """The worst excursion of one quantity of one joint beyond its limit."""

    quantity: str   # one of QUANTITIES
    joint: str
    time: float     # s from the trajectory start
    value: float
    limit: float    # the bound crossed, signed like value
    unit: str
    margin: float = 0.0   # effort only: the sampling margin added to |value|

    def __str__(self):
        margin = f' (+{self.margin:.3g} sampling margin)' if self.margin else ''
        return (f'{self.joint}: {self.quantity} {self.value:.4f} {self.unit}{margin} at '
                f't = {self.time:.4f} s beyond its limit {self.limit:.4f} {self.unit}')


class InfeasibleTrajectory(ValueError):
    """A trajectory the arm cannot follow; ``violations`` lists what is wrong."""

    def __init__(self, violations, prefix='trajectory exceeds the limits'):
        self.violations = list(violations)
        super().__init__(f'{prefix}: ' + '; '.join(map(str, self.violations)))


def _limits(model, acceleration_limit):
    acc = np.full(model.nv, math.inf) if acceleration_limit is None else np.broadcast_to(
        np.asarray(acceleration_limit, dtype=float), (model.nv,))
    if not (acc > 0).all():
        raise ValueError(f'acceleration_limit must be > 0 (inf: none), got {acc}')
    return acc


def _violation(model, quantity, j, t, value, limit, margin=0.0):
    unit = _UNITS[quantity][int(model.joint_type[j] == PRISMATIC)]
    return Violation(quantity, model.joint_names[j], float(t), float(value),
                     float(math.copysign(limit, value)) if quantity != 'position' else
                     float(limit), unit, float(margin))


def extrema(trajectory, order):
    """Exact (t, value) of the max and min of the `order`-th derivative (0, 1, 2) per joint.

    Returns t_max, max, t_min, min, each (nv,); times from the trajectory start. Per segment the
    candidates are its ends and the real roots of the next derivative inside it (eigenvalues of
    its companion matrix, all segments and joints of one degree in one batch).
    """
    c, t_knots, nv = trajectory.coefficients, trajectory.times, trajectory.nv
    if c.shape[0] == 0:   # a single point: held at rest
        q = trajectory.positions[0] if order == 0 else np.zeros(nv)
        return [np.full(nv, t_knots[0]), q, np.full(nv, t_knots[0]), q]
    h = np.diff(t_knots)
    # in σ = (t − t_k) / h ∈ [0, 1] the coefficients are comparable: negligible leading ones (a
    # cubic stored as a quintic) are trimmed, else their roots are ill-posed
    p = np.moveaxis(c * h[:, None, None] ** np.arange(6)[:, None], 2, 1).reshape(-1, 6)
    for _ in range(order):
        p = p[:, 1:] * np.arange(1, p.shape[1])
    sigma = np.concatenate([np.tile([0.0, 1.0], (len(p), 1)), _unit_roots(
        p[:, 1:] * np.arange(1, p.shape[1]))], axis=1)
    values = np.polynomial.polynomial.polyval(sigma.T, p.T, tensor=False).T
    values = (values / np.repeat(h, nv)[:, None] ** order).reshape(len(h), nv, -1)
    times = (t_knots[:-1, None, None] + h[:, None, None] * sigma.reshape(len(h), nv, -1))
    values, times = np.moveaxis(values, 1, 0).reshape(nv, -1), \
        np.moveaxis(times, 1, 0).reshape(nv, -1)
    i, m, rows = np.nanargmax(values, axis=1), np.nanargmin(values, axis=1), np.arange(nv)
    return [times[rows, i], values[rows, i], times[rows, m], values[rows, m]]


def _unit_roots(slope):
    """The real roots in (0, 1) of each row's polynomial (ascending coefficients), NaN-padded."""
    n, degree = slope.shape[0], slope.shape[1] - 1
    roots = np.full((n, max(degree, 0)), np.nan)
    scale = np.abs(slope).max(axis=1, initial=0.0)
    kept = np.abs(slope) > 1e-12 * scale[:, None]
    effective = np.where(kept.any(axis=1), degree - np.argmax(kept[:, ::-1], axis=1), 0)
    for d in range(1, degree + 1):
        rows = np.flatnonzero(effective == d)
        if not len(rows):
            continue
        monic = slope[rows, :d] / slope[rows, d:d + 1]
        companion = np.zeros((len(rows), d, d))
        companion[:, np.arange(1, d), np.arange(d - 1)] = 1.0
        companion[:, :, -1] = -monic
        r = np.linalg.eigvals(companion)
        inside = (np.abs(r.imag) <= 1e-9) & (r.real > 0) & (r.real < 1)
        roots[rows, :d] = np.where(inside, r.real, np.nan)
    return roots


class EffortSamples:
    """The path on the effort grid, τ split as g(q) + d / s² + τ_f(q̇ / s) for time scaling s.

    ``segment`` (N,) numbers each sample's segment (−1: the end points held at rest), ``t`` (N,)
    the times at s = 1.
    """

    def __init__(self, model, trajectory, max_spacing=MAX_SPACING):
        if not max_spacing > 0:
            raise ValueError(f'max_spacing must be > 0 s, got {max_spacing}')
        nv, c, knots = trajectory.nv, trajectory.coefficients, trajectory.times
        rest = np.zeros((2, nv))   # the end points, held at rest
        q, v, a = [trajectory.positions[[0, -1]]], [rest], [rest]
        t, segment = [knots[[0, -1]]], [[-1, -1]]
        for k, h in enumerate(np.diff(knots)):
            s = np.linspace(0.0, h, max(5, math.ceil(h / max_spacing) + 1))
            powers = s[:, None] ** np.arange(6)   # q(s) = powers @ c[k]
            q.append(powers @ c[k])
            v.append(powers[:, :5] @ (np.arange(1, 6)[:, None] * c[k, 1:]))
            a.append(powers[:, :4] @ (np.array([2, 6, 12, 20])[:, None] * c[k, 2:]))
            t.append(knots[k] + s)
            segment.append(np.full(s.size, k))
        q, v, a = np.concatenate(q), np.concatenate(v), np.concatenate(a)
        self.model, self.q, self.v = model, q, v
        self.t, self.segment = np.concatenate(t), np.concatenate(segment).astype(int)
        self.g = gravity(model, q)
        self.d = rnea(model, q, v, a) - self.g - joint_friction(model, v)

    def effort(self, factor=1.0):
        """τ at every sample of the path traced `factor` times slower, (N, nv)."""
        return self.g + self.d / factor**2 + joint_friction(self.model, self.v / factor)

    def margin(self, tau):
        """Per sample (N, nv): max|δ²τ| / 4 over the sample's segment (0 at rest points)."""
        margin = np.zeros_like(tau)
        for k in np.unique(self.segment[self.segment >= 0]):
            rows = np.flatnonzero(self.segment == k)
            with np.errstate(invalid='ignore'):   # inf - inf: NaN, a violation below
                second = np.abs(np.diff(tau[rows], 2, axis=0)).max(axis=0)
            margin[rows] = second / 4
        return margin


def _effort_violations(model, samples, factor):
    tau = samples.effort(factor)
    margin = samples.margin(tau)
    with np.errstate(invalid='ignore', over='ignore'):   # a path too fast to evaluate
        excess = np.abs(tau) + margin - model.effort_limit
    found = []
    for j in np.flatnonzero((~(excess <= 0)).any(axis=0)):   # NaN: a violation, not a pass
        i = excess[:, j].argmax()   # the first NaN if any
        found.append(_violation(model, 'effort', j, samples.t[i] * factor, tau[i, j],
                                model.effort_limit[j], margin[i, j]))
    return found


def _kinematic_violations(model, trajectory, acceleration_limit, quantities):
    found = []
    bounds = {'position': (model.lower, model.upper),
              'velocity': (-model.velocity_limit, model.velocity_limit),
              'acceleration': (-acceleration_limit, acceleration_limit)}
    for order, quantity in enumerate(QUANTITIES[:3]):
        if quantity not in quantities:
            continue
        t_max, high, t_min, low = extrema(trajectory, order)
        lower, upper = bounds[quantity]
        for j in range(model.nv):
            over, under = high[j] - upper[j], lower[j] - low[j]
            tolerance = ROUNDING * max(1.0, abs(upper[j]), abs(lower[j]))
            if not (over <= tolerance and under <= tolerance):   # NaN: a violation, not a pass
                t, value, limit = ((t_max[j], high[j], upper[j]) if over >= under else
                                   (t_min[j], low[j], lower[j]))
                found.append(_violation(model, quantity, j, t, value, abs(limit)
                                        if quantity != 'position' else limit))
    return found


def trajectory_violations(model, trajectory, acceleration_limit=None, effort=True,
                          max_spacing=MAX_SPACING):
    """Every joint's worst excursion beyond its position, velocity, acceleration, effort limit.

    Limits: model.lower/upper, model.velocity_limit, `acceleration_limit` (scalar or (nv,),
    None: none), model.effort_limit against rnea along the path (``effort=False``: skipped).
    Returns a list of Violation, sorted by time; empty when the arm can follow the trajectory.
    """
    if trajectory.nv != model.nv:
        raise ValueError(f'trajectory has {trajectory.nv} joints, the model {model.nv}')
    found = _kinematic_violations(model, trajectory, _limits(model, acceleration_limit),
                                  QUANTITIES[:3])
    if effort:
        found += _effort_violations(model, EffortSamples(model, trajectory, max_spacing), 1.0)
    return sorted(found, key=lambda v: v.time)


def check_trajectory(model, trajectory, acceleration_limit=None, effort=True,
                     max_spacing=MAX_SPACING):
    """Raise InfeasibleTrajectory (a ValueError) naming joint, time and limit of each violation."""
    found = trajectory_violations(model, trajectory, acceleration_limit, effort, max_spacing)
    if found:
        raise InfeasibleTrajectory(found)


def time_scaling(model, trajectory, acceleration_limit=None, effort=True,
                 max_spacing=MAX_SPACING, max_factor=100.0, tolerance=1e-3):
    """Smallest uniform slow-down s ≥ 1 (to `tolerance`, relative) after which the path fits.

    Returns s (1.0: feasible as it is); trajectory.time_scaled(s) is the trajectory to run.
    Raises InfeasibleTrajectory on a position violation, or when even s = `max_factor` does
    not fit (e.g. g(q) beyond an effort limit: no timing helps). The effort's s is bisected:
    feasible at the returned s, smallest when the feasible factors form an interval (always
    so without friction: τ is affine in s⁻²).
    """
    acc = _limits(model, acceleration_limit)
    found = _kinematic_violations(model, trajectory, acc, ('position',))
    if found:
        raise InfeasibleTrajectory(found, 'no time scaling cures a position violation')
    (_, v_high, _, v_low), (_, a_high, _, a_low) = (extrema(trajectory, i) for i in (1, 2))
    s = max(1.0, (np.maximum(v_high, -v_low) / model.velocity_limit).max(),
            math.sqrt((np.maximum(a_high, -a_low) / acc).max()))
    if s > max_factor:
        raise InfeasibleTrajectory(_kinematic_violations(
            model, trajectory.time_scaled(max_factor), acc, QUANTITIES[1:3]),
            f'slower than max_factor = {max_factor} needed')
    if not effort:
        return s
    samples = EffortSamples(model, trajectory, max_spacing)
    if not _effort_violations(model, samples, s):
        return s
    high = s
    while _effort_violations(model, samples, high):
        if high >= max_factor:
            raise InfeasibleTrajectory(_effort_violations(model, samples, max_factor),
                                       f'no time scaling up to max_factor = {max_factor} fits')
        s, high = high, min(2 * high, max_factor)
    while high - s > tolerance * s:
        mid = 0.5 * (s + high)
        s, high = (s, mid) if not _effort_violations(model, samples, mid) else (mid, high)
    return high
