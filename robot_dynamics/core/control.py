"""Joint-space control laws as plain objects: gravity compensation and computed torque.

Equation of motion: M(q) q̈ + C(q, q̇) q̇ + g(q) + τ_f(q̇) = τ + τ_ext, M with the joints'
armature and τ_f their friction (model.py).
"""
import numpy as np

from .algorithms.friction import joint_friction
from .algorithms.rnea import gravity, rnea
from .arguments import joint_vector
from .model import Data


def finite_joint_vector(model, x, name):
    """x as a finite float (nv,) array, or a ValueError naming it."""
    x = joint_vector(model, x, name)
    if not np.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or Inf: {x}")
    return x


def joint_gains(model, x, name):
    """Per-joint gains: a scalar (the same for every joint) or (nv,), finite and >= 0."""
    x = finite_joint_vector(model, np.full(model.nv, x, dtype=float) if np.ndim(x) == 0 else x,
                            name)
    if (x < 0).any():
        raise ValueError(f"{name} must be >= 0, got {x}")
    return x.copy()


def position_error(model, q_d, q):
    """e = q_d − q; on continuous joints wrapped into [−π, π): the short way round.

    A continuous joint's position may be reported wrapped (±π) or accumulated; either way its
    orientation is what the error is about, as in ros2_controllers' angle wrap-around.
    """
    e = np.asarray(q_d, dtype=float) - q
    if model.continuous.any():
        e = np.where(model.continuous, (e + np.pi) % (2 * np.pi) - np.pi, e)
    return e


def unwrap_positions(model, q_start, points):
    """Waypoints with continuous joints shifted by whole turns: each the short way from the last.

    ``q_start`` precedes the first waypoint; other joints are returned as given.
    """
    unwrapped, previous = [], np.asarray(q_start, dtype=float)
    for q in points:
        previous = np.where(model.continuous, previous + position_error(model, q, previous), q)
        unwrapped.append(previous)
    return unwrapped


class GravityCompensation:
    """τ = g(q): holds the arm still in any pose (a payload rides on the model: rd.with_payload).

    With ``friction_compensation``, τ = g(q) + τ_f(q̇) when q̇ is given: the model's joint
    friction is cancelled too, so that a hand guiding the arm feels its rigid-body inertia only
    (light, but then nothing damps the arm: it coasts). Off by default.
    """

    def __init__(self, model, friction_compensation=False):
        self.model = model
        self.friction_compensation = bool(friction_compensation)

    @property
    def model(self):
        return self._model

    @model.setter
    def model(self, model):
        self._model, self._data = model, Data(model)

    def __call__(self, q, v=None):
        """g(q), plus τ_f(q̇) with friction compensation and a q̇."""
        tau = gravity(self._model, finite_joint_vector(self._model, q, "q"), data=self._data)
        if self.friction_compensation and v is not None:
            tau += joint_friction(self._model, finite_joint_vector(self._model, v, "v"))
        return tau


class ComputedTorque:
    """τ = M(q) (q̈_d + K_p e + K_d ė) + C(q, q̇) q̇ + g(q) + τ_f(q̇), e = position_error(q_d, q).

    Computed torque (Lynch & Park, Modern Robotics §11.4.1) in one inverse-dynamics call,
    rnea(q, q̇, q̈_d + K_p e + K_d ė), the joints' armature and friction included. With an exact
    model the error obeys
    ë + K_d ė + K_p e = 0 per joint; K_p = ω², K_d = 2ω is critically damped.
    """

    def __init__(self, model, kp, kd):
        self._model, self._data = model, Data(model)
        self.kp, self.kd = kp, kd

    @property
    def model(self):
        return self._model

    @model.setter
    def model(self, model):
        if model.nv != self._model.nv:
            raise ValueError(f"model: expected nv = {self._model.nv}, got {model.nv}")
        self._model, self._data = model, Data(model)

    @property
    def kp(self):
        return self._kp

    @kp.setter
    def kp(self, kp):
        self._kp = joint_gains(self._model, kp, "kp")

    @property
    def kd(self):
        return self._kd

    @kd.setter
    def kd(self, kd):
        self._kd = joint_gains(self._model, kd, "kd")

    def __call__(self, q, v, q_d, v_d, a_d):
        m = self._model
        q, v = finite_joint_vector(m, q, "q"), finite_joint_vector(m, v, "v")
        e = position_error(m, finite_joint_vector(m, q_d, "q_d"), q)
        e_dot = finite_joint_vector(m, v_d, "v_d") - v
        a = finite_joint_vector(m, a_d, "a_d") + self._kp * e + self._kd * e_dot
        return rnea(m, q, v, a, data=self._data)


def clamp_effort(tau, limits):
    """Clip τ elementwise to ±limits (inf: no limit); returns (τ_clamped, clamped-joint mask).

    A NaN or Inf in τ raises ValueError: such a command must never reach an arm.
    """
    tau = np.asarray(tau, dtype=float)
    limits = np.asarray(limits, dtype=float)
    if tau.shape != limits.shape or tau.ndim != 1:
        raise ValueError(f"clamp_effort: tau {tau.shape} and limits {limits.shape} "
                         "must be 1-D of the same length")
    if not np.isfinite(tau).all():
        raise ValueError(f"clamp_effort: tau contains NaN or Inf: {tau}")
    if not (limits >= 0).all():
        raise ValueError(f"clamp_effort: limits must be >= 0, got {limits}")
    clamped = np.abs(tau) > limits
    return np.clip(tau, -limits, limits), clamped
