"""Joint-space trajectories through waypoints, sampled with C2 continuity.

Every segment [t_k, t_k+1] is the quintic Hermite polynomial matching position,
velocity and acceleration at both knots, so q, q̇ and q̈ are continuous wherever
the knot values are shared by neighbouring segments. The knot values come from:

- positions, velocities and accelerations given: used as they are;
- positions and velocities: accelerations are the derivative, at the knots, of
  the not-a-knot cubic spline through the velocities;
- positions only: the clamped cubic spline through the positions with zero end
  velocities (start and stop at rest). A quintic Hermite fed with a cubic's knot
  values reproduces that cubic, so this is exactly scipy's CubicSpline.

Outside [t_0, t_K-1] the trajectory holds the nearest end point at rest.

Uniform time scaling by a factor s > 0 (``time_scaled``) traces the same path s times slower:
q_s(t) = q(t / s), so q̇_s = q̇ / s and q̈_s = q̈ / s² at corresponding times. The quintic
matching the scaled knot values is exactly q(t / s) (the interpolant is unique), and a
positions-only trajectory scales to the same spline (its end velocities stay zero).
"""
import bisect
import math

import numpy as np


def _cubic_spline(*args, **kwargs):
    """scipy's CubicSpline, imported at first use (a node that runs no trajectory never pays it)."""
    from scipy.interpolate import CubicSpline
    return CubicSpline(*args, **kwargs)


def _quintic_coefficients(h, q0, v0, a0, q1, v1, a1):
    """Coefficients c_0..c_5 of q(s) = sum c_j s^j on s in [0, h] matching both ends."""
    h = h[:, None]
    dq = q1 - q0
    c3 = (20 * dq - (8 * v1 + 12 * v0) * h - (3 * a0 - a1) * h**2) / (2 * h**3)
    c4 = (-30 * dq + (14 * v1 + 16 * v0) * h + (3 * a0 - 2 * a1) * h**2) / (2 * h**4)
    c5 = (12 * dq - 6 * (v1 + v0) * h - (a0 - a1) * h**2) / (2 * h**5)
    return np.stack([q0, v0, a0 / 2, c3, c4, c5], axis=1)  # (K-1, 6, nv)


def _knot_array(x, shape, name):
    x = np.array(x, dtype=float)
    if x.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: contains NaN or Inf")
    return x


class JointTrajectory:
    """q_d(t), q̇_d(t), q̈_d(t) through waypoints; times (K,) relative to the start."""

    def __init__(self, times, positions, velocities=None, accelerations=None):
        times = np.array(times, dtype=float)
        if times.ndim != 1 or times.size == 0:
            raise ValueError(f"times: expected a non-empty 1-D array, got shape {times.shape}")
        positions = np.array(positions, dtype=float)
        if positions.ndim != 2:
            raise ValueError(f"positions: expected shape (K, nv), got {positions.shape}")
        shape = (times.size, positions.shape[1])
        times = _knot_array(times, shape[:1], "times")
        positions = _knot_array(positions, shape, "positions")
        if times[0] < 0 or np.any(np.diff(times) <= 0):
            raise ValueError(f"times: must be >= 0 and strictly increasing, got {times}")
        if accelerations is not None and velocities is None:
            raise ValueError("accelerations given without velocities")
        if velocities is None:
            if times.size > 1:
                spline = _cubic_spline(times, positions, bc_type="clamped")
                velocities, accelerations = spline(times, 1), spline(times, 2)
            else:
                velocities = accelerations = np.zeros(shape)
        velocities = _knot_array(velocities, shape, "velocities")
        if accelerations is None:
            accelerations = (_cubic_spline(times, velocities)(times, 1)
                             if times.size > 1 else np.zeros(shape))
        accelerations = _knot_array(accelerations, shape, "accelerations")

        self.times, self.positions = times, positions
        self.velocities, self.accelerations = velocities, accelerations
        self._t = times.tolist()
        self._coefficients = _quintic_coefficients(
            np.diff(times), positions[:-1], velocities[:-1], accelerations[:-1],
            positions[1:], velocities[1:], accelerations[1:])
        self._coefficients.flags.writeable = False
        self._rest = np.zeros(shape[1])

    @property
    def duration(self):
        """Time of the last point (relative to the trajectory start)."""
        return self._t[-1]

    @property
    def nv(self):
        return self.positions.shape[1]

    @property
    def coefficients(self):
        """(K-1, 6, nv): segment k is q(t) = sum_j c[k, j] (t − t_k)^j on [t_k, t_k+1]."""
        return self._coefficients

    def time_scaled(self, factor):
        """The same path `factor` times slower: times · s, velocities / s, accelerations / s²."""
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"time_scaled: factor must be finite and > 0, got {factor}")
        return JointTrajectory(self.times * factor, self.positions, self.velocities / factor,
                               self.accelerations / factor**2)

    def sample(self, t):
        """(q_d, v_d, a_d) at time t; holds the first/last point at rest outside the knots."""
        if not math.isfinite(t):
            raise ValueError(f"sample: t must be finite, got {t}")
        if t < self._t[0]:
            return self.positions[0].copy(), self._rest.copy(), self._rest.copy()
        if t >= self._t[-1]:
            return self.positions[-1].copy(), self._rest.copy(), self._rest.copy()
        k = bisect.bisect_right(self._t, t) - 1
        s = t - self._t[k]
        s2, s3, s4 = s * s, s * s * s, s * s * s * s
        basis = np.array([[1.0, s, s2, s3, s4, s4 * s],
                          [0.0, 1.0, 2 * s, 3 * s2, 4 * s3, 5 * s4],
                          [0.0, 0.0, 2.0, 6 * s, 12 * s2, 20 * s3]])
        q, v, a = basis @ self._coefficients[k]
        return q, v, a
