"""First-order generalized-momentum observer: external joint torques and the wrench behind them.

With p = M(q) q̇ and M q̈ + C q̇ + g + τ_f = τ + τ_ext (M with the joints' armature, τ_f(q̇) their
friction, model.py), ṗ = β + τ_ext with β = τ + Cᵀ q̇ − g − τ_f (Ṁ = C + Cᵀ: the armature is
constant), so the residual r = K (p(t) − p(0) − ∫ (β + r) dt) obeys ṙ = K (τ_ext − r): every joint
sees τ_ext through a first-order lag of time constant 1/K_i (De Luca, Albu-Schäffer, Haddadin
and Hirzinger, "Collision detection and safe reaction with the DLR-III lightweight manipulator
arm", IROS 2006).

Discretization, between two samples dt apart: the mean external torque over the step is
u = (p₁ − p₀) / dt − β̄, with β averaged by the trapezoidal rule, and the lag is
advanced exactly for u held over the step: r₁ = e^(−K dt) r₀ + (1 − e^(−K dt)) u. A constant
τ_ext therefore gives r = τ_ext (1 − e^(−K t)) at the samples, whatever the (variable) dt.
"""
import numpy as np

from .algorithms.crba import mass_matrix
from .algorithms.jacobians import LOCAL_WORLD_ALIGNED, frame_jacobian
from .algorithms.momentum import advance_residual, damped_wrench, momentum_terms
from .control import ModelBound, finite_joint_vector, joint_gains
from .model import Data


class MomentumObserver(ModelBound):
    """τ_ext estimate from q, q̇ and the measured joint torques τ; `gain` K (nv,) in 1/s."""

    def __init__(self, model, gain, max_dt=0.1):
        self._model, self._data = model, Data(model)
        self.gain, self.max_dt = gain, float(max_dt)
        self.bias = np.zeros(model.nv)
        self.residual = np.zeros(model.nv)  # r, before the tare bias is subtracted
        self._anchor = None                  # (p, β) at the previous sample

    @property
    def gain(self):
        return self._gain

    @gain.setter
    def gain(self, gain):
        gain = joint_gains(self._model, gain, "gain")
        if not (gain > 0).all():
            raise ValueError(f"gain must be > 0 (1/s), got {gain}")
        self._gain = gain

    def _bind(self, model):
        """A new model re-anchors the momentum at the next update."""
        super()._bind(model)
        self._anchor = None

    @property
    def data(self):
        """The observer's Data (workspace) for its model."""
        return self._data

    @property
    def anchor(self):
        """(p, β) at the previous sample (β None after ``reset``); None before the first."""
        return self._anchor

    def take_step(self, p, beta, residual):
        """Take a step computed elsewhere with update's kernels (a node's compiled cycle)."""
        self._anchor, self.residual = (p, beta), residual

    def reset(self, q, v):
        """Restart the integral at the current momentum, with r = 0 (the bias is kept)."""
        m = self._model
        q, v = finite_joint_vector(m, q, "q"), finite_joint_vector(m, v, "v")
        self._anchor = mass_matrix(m, q, self._data) @ v, None  # β unknown: rectangle rule next
        self.residual = np.zeros(m.nv)

    def update(self, q, v, tau, dt):
        """Advance by dt (s) to the sample (q, q̇, τ); returns τ_ext − bias, (nv,).

        The first sample, dt <= 0, a non-finite dt or dt > max_dt only re-anchor the momentum
        integral at this sample and return the held estimate.
        """
        m, data = self._model, self._data
        q, v = finite_joint_vector(m, q, "q"), finite_joint_vector(m, v, "v")
        tau = finite_joint_vector(m, tau, "tau")
        p, beta = momentum_terms(m, q, v, tau, data)
        if self._anchor is not None and 0.0 < dt <= self.max_dt:
            p0, beta0 = self._anchor   # β₀ None after reset: the rectangle rule, β̄ = β
            residual = np.empty(m.nv)
            advance_residual(p, beta, p0, beta if beta0 is None else beta0, float(dt),
                             self._gain, self.residual, residual)
            self.residual = residual
        self._anchor = p, beta
        return self.residual - self.bias

    def tare(self):
        """The current estimate becomes the bias subtracted from now on (unknown payload, cable)."""
        self.bias = self.residual.copy()

    def wrench(self, q, tau_ext, frame, reference=LOCAL_WORLD_ALIGNED, damping=1e-3):
        """Wrench at `frame` behind τ_ext (``wrench_from_torques`` with this observer's model)."""
        return wrench_from_torques(self._model, q, tau_ext, frame, reference, damping, self._data)


def wrench_from_torques(model, q, tau_ext, frame, reference=LOCAL_WORLD_ALIGNED, damping=1e-3,
                        data=None):
    """Wrench F = (moment, force) at `frame` with τ_ext = Jᵀ F, by damped least squares.

    F = (J Jᵀ + λ² I)⁻¹ J τ_ext with λ = damping · σ_max(J): `damping` is relative to the
    largest singular value of J, so along each left singular vector of J the estimate is
    scaled by σ²/(σ² + λ²); damping = 0 is the minimum-norm least-squares solution.
    reference: LOCAL_WORLD_ALIGNED gives the wrench at the frame origin in base axes,
    LOCAL in the frame's own axes (WORLD: at the base origin, base axes).
    """
    J = frame_jacobian(model, finite_joint_vector(model, q, "q"), frame, reference, data)
    tau_ext = finite_joint_vector(model, tau_ext, "tau_ext")
    if not damping >= 0:
        raise ValueError(f"damping must be >= 0, got {damping}")
    if damping == 0:
        return np.linalg.lstsq(J.T, tau_ext, rcond=None)[0]
    return damped_wrench(J, tau_ext, float(damping))


def held_friction_error(model, q, breakaway, frame, damping=1e-3, exact_up_to=16):
    """Largest error of the force estimated at ``frame`` that friction holding at rest can cause.

    A joint held by dry friction carries a torque τ_h,j anywhere in [−f_s,j, f_s,j] (f_s its
    ``breakaway`` torque): the motor's effort includes it and no model of the joint's velocity
    does, so the momentum observer reads it as external, and ``wrench_from_torques`` maps it to
    the force part F(τ_h) of the wrench. At rest nothing tells it from an external force
    (τ_meas = g + τ_h − Jᵀ F_ext: any F_ext with Jᵀ F_ext within the box is unobservable). The
    result is max |F(τ_h)| over the box, in N: a bound on the bias at rest and on the error of
    a push held at rest. F is linear and |·| convex, so the maximum is at a vertex: exact over
    the 2ⁿ vertices for n ≤ ``exact_up_to`` joints, else the upper bound Σ_j f_s,j |F(e_j)|.
    """
    breakaway = np.broadcast_to(np.asarray(breakaway, dtype=float), (model.nv,))
    if not np.all(np.isfinite(breakaway) & (breakaway >= 0)):
        raise ValueError(f'breakaway torques must be finite and >= 0, got {breakaway}')
    columns = np.column_stack([
        wrench_from_torques(model, q, e, frame, damping=damping)[3:] for e in np.eye(model.nv)])
    columns = columns * breakaway
    if model.nv > exact_up_to:
        return float(np.linalg.norm(columns, axis=0).sum())
    signs = 1.0 - 2.0 * ((np.arange(2 ** model.nv)[:, None] >> np.arange(model.nv)) & 1)
    return float(np.linalg.norm(signs @ columns.T, axis=1).max())
