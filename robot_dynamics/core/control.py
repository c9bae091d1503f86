"""Joint-space control laws as plain objects: gravity compensation and computed torque.

Equation of motion: M(q) q̈ + C(q, q̇) q̇ + g(q) = τ + τ_ext.
"""
import numpy as np

from .algorithms import gravity, rnea


def as_vector(x, n, name):
    """x as a float array of shape (n,), finite, or a ValueError naming it."""
    x = np.asarray(x, dtype=float)
    if x.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name}: contains NaN or Inf")
    return x


def as_gains(x, n, name):
    """Per-joint gains: a scalar (same for every joint) or (n,), finite and >= 0."""
    x = as_vector(np.full(n, x, dtype=float) if np.ndim(x) == 0 else x, n, name)
    if (x < 0).any():
        raise ValueError(f"{name}: must be >= 0, got {x}")
    return x.copy()


class GravityCompensation:
    """τ = g(q): holds the arm still in any pose (a payload rides on the model: rd.with_payload)."""

    def __init__(self, model):
        self.model = model

    def __call__(self, q, v=None):
        return gravity(self.model, as_vector(q, self.model.nv, "q"))


class ComputedTorque:
    """τ = M(q) (q̈_d + K_p e + K_d ė) + C(q, q̇) q̇ + g(q), e = q_d − q
    (computed torque, Lynch & Park, Modern Robotics §11.4.1).

    One inverse-dynamics call: rnea(q, q̇, q̈_d + K_p e + K_d ė). With an exact model the
    error obeys ë + K_d ė + K_p e = 0 per joint; K_p = ω², K_d = 2ω is critically damped.
    """

    def __init__(self, model, kp, kd):
        self._model = model
        self.kp, self.kd = kp, kd

    @property
    def model(self):
        return self._model

    @model.setter
    def model(self, model):
        if model.nv != self._model.nv:
            raise ValueError(f"model: expected nv = {self._model.nv}, got {model.nv}")
        self._model = model

    @property
    def kp(self):
        return self._kp

    @kp.setter
    def kp(self, kp):
        self._kp = as_gains(kp, self._model.nv, "kp")

    @property
    def kd(self):
        return self._kd

    @kd.setter
    def kd(self, kd):
        self._kd = as_gains(kd, self._model.nv, "kd")

    def __call__(self, q, v, q_d, v_d, a_d):
        n = self._model.nv
        q, v = as_vector(q, n, "q"), as_vector(v, n, "v")
        e = as_vector(q_d, n, "q_d") - q
        e_dot = as_vector(v_d, n, "v_d") - v
        a = as_vector(a_d, n, "a_d") + self._kp * e + self._kd * e_dot
        return rnea(self._model, q, v, a)


def clamp_effort(tau, limits):
    """Clip τ elementwise to ±limits (inf: no limit); returns (τ_clamped, mask of clamped joints)."""
    tau = np.asarray(tau, dtype=float)
    limits = np.asarray(limits, dtype=float)
    if tau.shape != limits.shape or tau.ndim != 1:
        raise ValueError(f"clamp_effort: tau {tau.shape} and limits {limits.shape} "
                         "must be 1-D of the same length")
    if np.isnan(limits).any() or (limits < 0).any():
        raise ValueError(f"clamp_effort: limits must be >= 0, got {limits}")
    clamped = np.abs(tau) > limits
    return np.clip(tau, -limits, limits), clamped
