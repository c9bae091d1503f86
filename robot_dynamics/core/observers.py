"""First-order generalized-momentum observer: external joint torques and the wrench behind them.

With p = M(q) q̇ and M q̈ + C q̇ + g = τ + τ_ext, ṗ = τ + Cᵀ q̇ − g + τ_ext (Ṁ = C + Cᵀ), so the
residual r = K (p(t) − p(0) − ∫ (τ + Cᵀ q̇ − g + r) dt) obeys ṙ = K (τ_ext − r): every joint
sees τ_ext through a first-order lag of time constant 1/K_i (De Luca, Albu-Schäffer, Haddadin
and Hirzinger, "Collision detection and safe reaction with the DLR-III lightweight manipulator
arm", IROS 2006).

Discretization, between two samples dt apart: the mean external torque over the step is
u = (p₁ − p₀ − ∫β dt) / dt with β = τ + Cᵀ q̇ − g integrated by the trapezoidal rule, and the lag
is advanced exactly for u held over the step, r₁ = e^(−K dt) r₀ + (1 − e^(−K dt)) u. A constant
τ_ext therefore gives r = τ_ext (1 − e^(−K t)) at the samples, whatever the (variable) dt.
"""
import numpy as np

from .algorithms import coriolis_matrix, frame_jacobian, gravity, mass_matrix, LOCAL_WORLD_ALIGNED
from .control import as_gains, as_vector


class MomentumObserver:
    """τ_ext estimate from q, q̇ and the measured joint torques τ; `gain` K (nv,) in 1/s."""

    def __init__(self, model, gain, max_dt=0.1):
        self._model = model
        self.gain, self.max_dt = gain, float(max_dt)
        self.bias = np.zeros(model.nv)
        self.residual = np.zeros(model.nv)  # r, before the tare bias is subtracted
        self._anchor = None                  # (p, β) at the previous sample

    @property
    def gain(self):
        return self._gain

    @gain.setter
    def gain(self, gain):
        gain = as_gains(gain, self._model.nv, "gain")
        if not (gain > 0).all():
            raise ValueError(f"gain: must be > 0 (1/s), got {gain}")
        self._gain = gain

    @property
    def model(self):
        return self._model

    @model.setter
    def model(self, model):
        """A new model (e.g. a payload): the momentum is re-anchored at the next update."""
        if model.nv != self._model.nv:
            raise ValueError(f"model: expected nv = {self._model.nv}, got {model.nv}")
        self._model, self._anchor = model, None

    def _momentum_and_beta(self, q, v, tau):
        m = self._model
        p = mass_matrix(m, q) @ v
        beta = tau + coriolis_matrix(m, q, v).T @ v - gravity(m, q)
        return p, beta

    def reset(self, q, v):
        """Restart the integral at the current momentum, with r = 0 (the bias is kept)."""
        n = self._model.nv
        q, v = as_vector(q, n, "q"), as_vector(v, n, "v")
        self._anchor = mass_matrix(self._model, q) @ v, None  # β unknown: rectangle rule next
        self.residual = np.zeros(n)

    def update(self, q, v, tau, dt):
        """Advance by dt (s) to the sample (q, q̇, τ); returns τ_ext − bias, (nv,).

        The first sample, dt <= 0, a non-finite dt or dt > max_dt only re-anchor the momentum
        integral at this sample and return the held estimate.
        """
        n = self._model.nv
        p, beta = self._momentum_and_beta(
            as_vector(q, n, "q"), as_vector(v, n, "v"), as_vector(tau, n, "tau"))
        if self._anchor is not None and 0.0 < dt <= self.max_dt:
            p0, beta0 = self._anchor
            beta_mean = beta if beta0 is None else 0.5 * (beta + beta0)
            u = (p - p0) / dt - beta_mean
            decay = np.exp(-self.gain * dt)
            self.residual = decay * self.residual + (1.0 - decay) * u
        self._anchor = p, beta
        return self.residual - self.bias

    def tare(self):
        """The current estimate becomes the bias subtracted from now on (unknown payload, cable)."""
        self.bias = self.residual.copy()

    def wrench(self, q, tau_ext, frame, reference=LOCAL_WORLD_ALIGNED, damping=1e-3):
        """Wrench F = (moment, force) at `frame` with τ_ext = Jᵀ F, by damped least squares.

        F = (J Jᵀ + λ² I)⁻¹ J τ_ext with λ = damping · σ_max(J): `damping` is relative to the
        largest singular value of J, so each singular direction is scaled by σ²/(σ² + λ²).
        reference: LOCAL_WORLD_ALIGNED gives the wrench at the frame origin in base axes,
        LOCAL in the frame's own axes (WORLD: at the base origin, base axes).
        """
        n = self._model.nv
        J = frame_jacobian(self._model, as_vector(q, n, "q"), frame, reference)
        tau_ext = as_vector(tau_ext, n, "tau_ext")
        if not damping >= 0:
            raise ValueError(f"damping: must be >= 0, got {damping}")
        if damping == 0:
            return np.linalg.lstsq(J.T, tau_ext, rcond=None)[0]  # minimum-norm least squares
        lam2 = (damping * np.linalg.norm(J, 2)) ** 2
        return np.linalg.solve(J @ J.T + lam2 * np.eye(6), J @ tau_ext)
