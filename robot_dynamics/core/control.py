"""Joint-space control laws as plain objects: gravity compensation and computed torque.

Equation of motion: M(q) q̈ + C(q, q̇) q̇ + g(q) + τ_f(q̇) = τ + τ_ext, M with the joints'
armature and τ_f their friction (model.py).
"""
import numpy as np

from .algorithms.computed_torque import commanded_acceleration
from .algorithms.crba import mass_matrix
from .algorithms.friction import joint_friction, sign_friction
from .algorithms.rnea import gravity, rnea
from .arguments import all_finite, joint_vector
from .model import Data


def finite_joint_vector(model, x, name):
    """x as a finite float (nv,) array, or a ValueError naming it."""
    x = joint_vector(model, x, name)
    if not all_finite(x):
        raise ValueError(f"{name} contains NaN or Inf: {x}")
    return x


def joint_gains(model, x, name):
    """Per-joint gains: a scalar (the same for every joint) or (nv,), finite and >= 0."""
    x = finite_joint_vector(model, np.full(model.nv, x, dtype=float) if np.ndim(x) == 0 else x,
                            name)
    if (x < 0).any():
        raise ValueError(f"{name} must be >= 0, got {x}")
    return x.copy()


class ModelBound:
    """A law on a Model that may be replaced by another of the same size (a payload, a fit).

    Assigning ``model`` checks the size (ValueError) and binds through ``_bind``, which a
    subclass extends with what depends on the model.
    """

    @property
    def model(self):
        """The dynamics model the law computes with."""
        return self._model

    @model.setter
    def model(self, model):
        if model.nv != self._model.nv:
            raise ValueError(f'model: expected nv = {self._model.nv}, got {model.nv}')
        self._bind(model)

    def _bind(self, model):
        self._model, self._data = model, Data(model)


class JointGains:
    """A per-joint gain attribute of a control law, checked by ``joint_gains`` when assigned.

    Assigned a scalar or (nv,), kept as a finite (nv,) array >= 0 in ``_<name>``; the law's
    model is its ``_model``.
    """

    def __set_name__(self, owner, name):
        self.name, self.slot = name, '_' + name

    def __get__(self, law, owner=None):
        return self if law is None else getattr(law, self.slot)

    def __set__(self, law, value):
        setattr(law, self.slot, joint_gains(law._model, value, self.name))


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


def deadband_weight(v, deadband):
    """w(q̇): 0 for |q̇| ≤ v_d, 1 for |q̇| ≥ 2 v_d, the smoothstep 3x² − 2x³ between.

    x = |q̇| / v_d − 1; w is C¹. v_d = 0 gives w = 1 everywhere (no deadband).
    """
    if deadband <= 0.0:
        return np.ones_like(v)
    x = np.clip(np.abs(v) / deadband - 1.0, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


class GravityCompensation:
    """τ = g(q): holds the arm still in any pose (a payload rides on the model: rd.with_payload).

    With ``friction_compensation``, τ = g(q) + τ_f(q̇) when q̇ is given: the model's joint
    friction is cancelled too, so that a hand guiding the arm feels its rigid-body inertia only
    (light, but then nothing damps the arm: it coasts). Off by default.

    ``friction_deadband`` v_d (rad/s, m/s; 0: none): the part following the sign (Coulomb and
    stiction) is compensated with the weight w(q̇) of ``deadband_weight``, τ = g(q) + f_v q̇ +
    w(q̇) [f_c + f_s e^{−(q̇/v_s)²}] tanh(q̇ / ε): at rest, where a measured q̇ is mostly noise,
    the smooth sign would turn that noise into torque chatter of up to ±(f_c + f_s); the viscous
    part, small at noise level, stays.
    """

    def __init__(self, model, friction_compensation=False, friction_deadband=0.0):
        self.model = model
        self.friction_compensation = bool(friction_compensation)
        self.friction_deadband = float(friction_deadband)
        if not (0.0 <= self.friction_deadband < np.inf):
            raise ValueError(f'friction_deadband must be >= 0 and finite, got {friction_deadband}')

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
            m, v = self._model, finite_joint_vector(self._model, v, "v")
            tau += joint_friction(m, v)
            if self.friction_deadband > 0.0:   # take back the sign part inside the deadband
                tau -= (1.0 - deadband_weight(v, self.friction_deadband)) * sign_friction(m, v)
        return tau


class ComputedTorque(ModelBound):
    """τ = M(q) (q̈_d + K_p e + K_d ė + z) + C(q, q̇) q̇ + g(q) + τ_f(q̇), e = q_d − q (wrapped).

    Computed torque (Lynch & Park, Modern Robotics §11.4.1) in one inverse-dynamics call,
    rnea(q, q̇, q̈_d + K_p e + K_d ė + z), the joints' armature and friction included. With an
    exact model and z = 0 the error obeys
    ë + K_d ė + K_p e = 0 per joint; K_p = ω², K_d = 2ω is critically damped.

    On a plant that is not its model, a torque d the model misses (mass errors, friction) leaves
    the steady error e = K_p⁻¹ M⁻¹ d. The integral term z = K_I ∫ e dt (``ki`` K_I, 1/s³; 0:
    off) removes it: the error obeys e⃛ + K_d ë + K_p ė + K_I e = 0 per joint (stable for
    K_I < K_p K_d, Routh-Hurwitz), and at rest its torque τ_I = M(q) z equals d. z sits inside
    the acceleration, where M decouples the joints (kept as a torque per joint, the integrals of
    two nearly parallel joints wound up against each other through M's off-diagonal terms).
    Anti-windup: when τ_I would exceed ±``integral_limit`` (N m) on some joint, z is scaled down
    until it does not (same direction, the largest joint at its limit). z integrates over the
    time between calls (``t``, s; a step longer than MAX_INTEGRATION_STEP counts as that) and
    is 0 after ``reset()``, which the caller invokes on a new hold, a mode switch or a lost state.
    A disturbance observer would estimate the same d from the momentum, but needs measured
    efforts and a right model of the momentum; the integral needs only q.
    """

    MAX_INTEGRATION_STEP = 0.01   # s
    kp, kd, ki = JointGains(), JointGains(), JointGains()

    def __init__(self, model, kp, kd, ki=0.0, integral_limit=np.inf):
        self._model, self._data = model, Data(model)
        self.kp, self.kd, self.ki, self.integral_limit = kp, kd, ki, integral_limit
        self.reset()

    @property
    def integral_limit(self):
        return self._integral_limit

    @integral_limit.setter
    def integral_limit(self, limit):
        limit = np.full(self._model.nv, limit, dtype=float) if np.ndim(limit) == 0 else \
            np.array(limit, dtype=float)
        if limit.shape != (self._model.nv,) or np.isnan(limit).any() or (limit < 0).any():
            raise ValueError(f"integral_limit must be >= 0 (inf: none), a scalar or one per "
                             f"joint ({self._model.nv}), got {limit}")
        self._integral_limit = limit

    @property
    def integral(self):
        """z = K_I ∫ e dt, rad/s² (m/s²), anti-windup applied."""
        return self._z.copy()

    def reset(self):
        """z = 0, and the next call starts a new integration (no step before it)."""
        self._z, self._t, self._a = np.zeros(self._model.nv), None, np.zeros(self._model.nv)

    def continue_from(self, other):
        """Take over another law's integral (a reconfiguration)."""
        self._z, self._t = other._z.copy(), other._t

    def __call__(self, q, v, q_d, v_d, a_d, t=None):
        m = self._model
        q, v = finite_joint_vector(m, q, "q"), finite_joint_vector(m, v, "v")
        q_d, v_d = finite_joint_vector(m, q_d, "q_d"), finite_joint_vector(m, v_d, "v_d")
        a_d = finite_joint_vector(m, a_d, "a_d")
        if self._ki.any() and t is not None:
            self._integrate(q, position_error(m, q_d, q), float(t))
        return rnea(m, q, v, self.acceleration(q, v, q_d, v_d, a_d), data=self._data)

    def acceleration(self, q, v, q_d, v_d, a_d):
        """q̈_d + K_p e + K_d ė + z (float (nv,) arrays, unchecked); the array is reused."""
        commanded_acceleration(q, v, q_d, v_d, a_d, self._kp, self._kd, self._z,
                               self._model.continuous, self._a)
        return self._a

    def _integrate(self, q, e, t):
        """z += dt K_I e, scaled down so that |M(q) z| ≤ integral_limit on every joint."""
        dt = 0.0 if self._t is None else min(max(t - self._t, 0.0), self.MAX_INTEGRATION_STEP)
        self._t = t
        if dt > 0.0:
            self._z = self._z + dt * self._ki * e
        if np.isfinite(self._integral_limit).any() and self._z.any():
            excess = np.abs(mass_matrix(self._model, q, data=self._data) @ self._z) / \
                np.maximum(self._integral_limit, 1e-300)
            if excess.max() > 1.0:
                self._z = self._z / excess.max()


class VelocityFilter:
    """First-order low-pass of measured velocities, y_k = y_{k−1} + α (x_k − y_{k−1}).

    α = 1 − exp(−2π f_c Δt): the exact discretisation of ẏ = 2π f_c (x − y) with x held over
    the Δt between samples (their stamps), so a late sample is weighted as its gap deserves. At
    a fixed Δt it is H(z) = α / (1 − (1 − α) z⁻¹): white velocity noise of σ leaves
    σ √(α / (2 − α)), at the price of a lag of about 1 / (2π f_c) at low frequencies. The first
    sample, and the first after ``reset()``, passes unchanged. ``cutoff`` f_c in Hz, > 0.
    """

    def __init__(self, cutoff):
        self.cutoff = float(cutoff)
        if not (0.0 < self.cutoff < np.inf):
            raise ValueError(f'velocity filter cutoff must be > 0 Hz and finite, got {cutoff}')
        self.reset()

    def reset(self):
        self.y = self._t = None

    def __call__(self, v, t):
        """The filtered velocity after the sample v at time t (s)."""
        v = np.asarray(v, dtype=float)
        if self.y is None:
            self.y = v.copy()
        else:   # a stamp not after the last: α = 0
            alpha = -np.expm1(-2.0 * np.pi * self.cutoff * max(t - self._t, 0.0))
            self.y = self.y + alpha * (v - self.y)
        self._t = t
        return self.y.copy()


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
