"""Streamed setpoints reached within velocity and acceleration limits instead of stepped to.

Each joint independently moves towards its latest target as fast as its limits allow and stops
on it: the time-optimal bang-bang profile in discrete time. With period Δt, the position
advanced by the new velocity (q_k+1 = q_k + v_k+1 Δt, semi-implicit Euler) and the velocity
decreasing by a_max Δt per step, a step at v = (m + f) a_max Δt (m integer, 0 ≤ f < 1) and the
braking after it cover D(v) = a_max Δt² ((m + 1) f + m (m + 1) / 2). Each step aims at
v* = sign(e) min(v_max, D⁻¹(|e|)), the fastest velocity from which the joint still stops on the
target (the last step lands on it exactly), and takes the closest velocity to v* within
±a_max Δt of the current one.
A target that jumps backwards faster than the arm can brake is overshot by the braking
distance: the limits always win. The target is clamped into the position limits (continuous
joints go the short way round).
"""
import numpy as np

from .control import finite_joint_vector, position_error


class SetpointLimiter:
    """(q_d, q̇_d, q̈_d) moving towards a streamed target within |q̇| ≤ v_max, |q̈| ≤ a_max.

    velocity_limit: (nv,) or scalar, default model.velocity_limit; acceleration_limit: (nv,) or
    scalar (required: an acceleration limit is what makes the reference steerable by computed
    torque); both > 0 and finite.
    """

    def __init__(self, model, acceleration_limit, velocity_limit=None):
        self.model = model
        self.velocity_limit = self._positive(
            model.velocity_limit if velocity_limit is None else velocity_limit, 'velocity_limit')
        self.acceleration_limit = self._positive(acceleration_limit, 'acceleration_limit')
        self.q = self.v = None

    def _positive(self, x, name):
        x = finite_joint_vector(self.model, np.full(self.model.nv, x, dtype=float)
                                if np.ndim(x) == 0 else x, name)
        if not (x > 0).all():
            raise ValueError(f'{name} must be finite and > 0, got {x}')
        return x.copy()

    def reset(self, q, v=None):
        """Start from the reference (q, q̇) (q̇ default 0), e.g. the held position."""
        m = self.model
        self.q = finite_joint_vector(m, q, 'q').copy()
        self.v = np.zeros(m.nv) if v is None else np.clip(
            finite_joint_vector(m, v, 'v'), -self.velocity_limit, self.velocity_limit)

    def step(self, target, dt):
        """Advance by dt (s) towards `target`; returns the new (q_d, q̇_d, q̈_d)."""
        if self.q is None:
            raise RuntimeError('SetpointLimiter.step before reset(q)')
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f'dt must be finite and > 0 s, got {dt}')
        m, a_max = self.model, self.acceleration_limit
        target = np.clip(finite_joint_vector(m, target, 'target'), m.lower, m.upper)
        e = position_error(m, target, self.q)   # continuous joints: the short way round
        distance = np.abs(e) / (a_max * dt**2)   # D⁻¹: m, then f, from D / (a_max Δt²)
        m = np.floor(np.sqrt(0.25 + 2 * distance) - 0.5)
        f = np.minimum((distance - m * (m + 1) / 2) / (m + 1), 1.0)
        v_aim = np.sign(e) * np.minimum(self.velocity_limit, (m + f) * a_max * dt)
        v = np.clip(v_aim, self.v - a_max * dt, self.v + a_max * dt)
        a = (v - self.v) / dt
        self.q, self.v = self.q + v * dt, v
        return self.q.copy(), v.copy(), a
