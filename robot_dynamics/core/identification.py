"""Identification of inertial parameters, friction, armature and payloads: least squares, τ = Y θ.

The workflow (Gautier & Khalil's inverse-dynamics identification model):

1. log q and τ along an exciting motion (``excitation.py``);
2. ``differentiate`` q offline with a zero-phase low-pass filter into q, q̇, q̈, and filter τ
   with the same ``lowpass`` so that both keep the same delay-free bandwidth;
3. ``identify`` the base parameters θ_b (``regressor.base_parameters``), and friction and
   armature if asked, by (weighted) least squares: min Σ_k |Σ^-1 (τ_k - Y_b(q_k, q̇_k, q̈_k) θ_b)|²
   with Σ = diag(σ_i), the per-joint noise std;
4. read the report: residual RMS per joint, relative error, condition number, standard
   deviations, and the physical consistency of the full parameters nearest to the prior model.

``identify_payload`` solves the smaller problem of a rigid load at the tip: mass and centre of
mass from static poses (gravity only), and its inertia too from a motion that excites it.
"""
import dataclasses

import numpy as np

from .algorithms.rnea import gravity, rnea
from .regressor import base_parameters, parameter_map, parameter_vector, regressor, skew


# ---- offline filtering and differentiation ----

def lowpass(x, dt, cutoff, order=4):
    """x (N, ...) through a Butterworth low-pass of ``cutoff`` Hz, forwards and backwards.

    scipy.signal.sosfiltfilt: zero phase (no delay), the magnitude response squared.
    """
    from scipy import signal  # imported here: 1.4 s at import, and nodes never filter
    sos = signal.butter(order, cutoff, fs=1.0 / dt, output='sos')
    return signal.sosfiltfilt(sos, np.asarray(x, dtype=float), axis=0)


def differentiate(q, dt, cutoff, order=4):
    """(q, q̇, q̈) from positions sampled every dt: ``lowpass``, then central differences.

    np.gradient, second order. Filter the logged τ with the same ``lowpass``; the first and
    last few 1 / cutoff seconds carry the filter's edge effects: drop them before fitting.
    """
    q = lowpass(q, dt, cutoff, order)
    v = np.gradient(q, dt, axis=0)
    return q, v, np.gradient(v, dt, axis=0)


# ---- physical consistency ----

def physical_consistency(theta_body, tol=0.0):
    """Physical checks of one body's standard parameters (m, h, I about the origin).

    Mass > 0, inertia about the centre of mass I_c = I + [h][h] / m positive definite, and its
    principal moments obeying the triangle inequality λ_i <= λ_j + λ_k. Returns a dict of the
    checks and the values (mass, principal_moments).
    """
    m = theta_body[0]
    report = dict(mass=m, positive_mass=bool(m > tol))
    if not report['positive_mass']:
        return report | dict(principal_moments=None, positive_definite=False, triangle=False)
    moments = np.linalg.eigvalsh(inertia_about_com(theta_body))
    return report | dict(principal_moments=moments, positive_definite=bool(moments[0] > tol),
                         triangle=bool(moments[2] <= moments[0] + moments[1] + tol))


def inertia_about_com(theta_body):
    """I_c = I + [h][h] / m (3x3), the rotational inertia about the centre of mass (m > 0)."""
    Ixx, Iyy, Izz, Ixy, Ixz, Iyz = theta_body[4:10]
    H = skew(np.asarray(theta_body[1:4], dtype=float))
    inertia = np.array([[Ixx, Ixy, Ixz], [Ixy, Iyy, Iyz], [Ixz, Iyz, Izz]])
    return inertia + H @ H / theta_body[0]


# ---- least squares on the base parameters ----

@dataclasses.dataclass
class Identification:
    """What ``identify`` found; θ in the order of ``regressor.parameter_vector``.

    ``theta_base`` (r,) and ``std_base`` its standard deviations; ``theta`` the full parameters
    nearest to the prior's that reproduce θ_b (P θ = θ_b; distance measured relative to each
    body's size, ``_body_scales``; joint terms in SI units), ``model`` the prior with those
    inertias, ``viscous``/``coulomb``/``armature`` (nv,) or None; ``residual_rms`` (nv,) of
    τ - Y_b θ_b, ``relative_error`` |τ - Y_b θ_b| / |τ|, ``condition_number`` of the weighted
    Y_b; ``consistency`` one ``physical_consistency`` dict per body, with ``determined`` True
    where the data fix all ten parameters of that body (else the prior chose among the
    combinations).
    """

    base: object
    theta_base: np.ndarray
    std_base: np.ndarray
    theta: np.ndarray
    model: object
    viscous: np.ndarray
    coulomb: np.ndarray
    armature: np.ndarray
    residual_rms: np.ndarray
    relative_error: float
    condition_number: float
    consistency: list

    @property
    def consistent(self):
        """Every body has positive mass, a positive definite inertia and the triangle inequality."""
        return all(c['positive_definite'] and c['triangle'] for c in self.consistency)

    def predict(self, q, v, a):
        """τ = Y_b θ_b at the given states."""
        return self.base.regressor(self.model, q, v, a) @ self.theta_base

    def summary(self):
        """A few lines for a human."""
        bad = [name for name, c in zip(self.model.joint_names, self.consistency)
               if not (c['positive_definite'] and c['triangle'])]
        return (f'{self.base.count} base parameters, condition number '
                f'{self.condition_number:.3g}, relative error {self.relative_error:.3g}\n'
                f'residual RMS per joint: {np.array2string(self.residual_rms, precision=4)}\n'
                f'physically inconsistent bodies: {", ".join(bad) or "none"}')


def identify(model, q, v, a, tau, viscous=False, coulomb=False, armature=False, noise_std=None,
             base=None):
    """Least-squares θ_b from logged states q, q̇, q̈ and torques τ, all (N, nv).

    ``model`` gives the kinematics and the prior inertias; ``noise_std``: None (ordinary least
    squares), per-joint σ (nv,) (rows of joint i weighted by 1 / σ_i) or 'estimate' (Gautier's
    two steps: σ_i from the unweighted residuals, then weighted). ``base``: a
    ``BaseParameters`` to reuse (default: ``base_parameters(model, viscous, coulomb, armature)``).
    Memory grows as N nv r: decimate long logs after filtering (10^4 states are plenty).
    """
    flags = dict(viscous=viscous, coulomb=coulomb, armature=armature)
    base = base or base_parameters(model, **flags)
    if base.flags != flags:
        raise ValueError(f'base was made for {base.flags}, not {flags}')
    tau = np.asarray(tau, dtype=float)
    Yb = base.regressor(model, q, v, a)   # (N, nv, r)
    if isinstance(noise_std, str):
        if noise_std != 'estimate':
            raise ValueError(f"noise_std must be None, per-joint values or 'estimate', "
                             f"got {noise_std!r}")
        rms = _weighted_fit(Yb, tau, np.ones(model.nv), base.count)[2]
        noise_std = np.maximum(rms, 1e-9 * rms.max() + 1e-300)   # exact data: no division by 0
    sigma = np.ones(model.nv) if noise_std is None else np.broadcast_to(
        np.asarray(noise_std, dtype=float), (model.nv,))
    theta_base, std_base, residual_rms, condition = _weighted_fit(Yb, tau, sigma, base.count)
    prior = parameter_vector(model, *(np.zeros(model.nv) if f else None for f in flags.values()))
    scale = np.concatenate([_body_scales(model), np.ones(len(prior) - 10 * model.nb)])
    theta = prior + scale * (np.linalg.pinv(base.P * scale) @ (theta_base - base.P @ prior))
    n_inertial = 10 * model.nb
    fitted = model.replace(inertia=theta[:n_inertial].reshape(model.nb, 10))
    joint_terms, rest = {}, theta[n_inertial:]
    for kind, flag in flags.items():   # the optional columns, in their order
        joint_terms[kind], rest = (rest[:model.nv], rest[model.nv:]) if flag else (None, rest)
    projector = np.linalg.pinv(base.P) @ base.P
    determined = np.abs(np.diag(projector)[:n_inertial] - 1.0).reshape(model.nb, 10).max(1) < 1e-8
    consistency = [physical_consistency(t) | dict(determined=bool(d))
                   for t, d in zip(fitted.inertia, determined)]
    return Identification(base, theta_base, std_base, theta, fitted, **joint_terms,
                          residual_rms=residual_rms,
                          relative_error=float(np.linalg.norm(residual_rms) / np.sqrt(
                              np.mean(tau ** 2, axis=0).sum())),
                          condition_number=condition, consistency=consistency)


def _body_scales(model):
    """Typical sizes of each body's parameters, the units of the distance to the prior.

    m, m r (first moments), m r² (inertias), with r = sqrt(tr I / 2 m) the prior's radius of
    gyration about the body origin; 1 (SI) for a massless body.
    """
    m = model.inertia[:, 0]
    with np.errstate(divide='ignore', invalid='ignore'):
        r = np.sqrt(model.inertia[:, 4:7].sum(1) / (2.0 * m))
    m, r = np.where(m > 0, m, 1.0), np.where((m > 0) & (r > 0), r, 1.0)
    return np.repeat(np.stack([m, m * r, m * r * r], 1), [1, 3, 6], axis=1).ravel()


def _weighted_fit(Y, tau, sigma, r):
    """θ minimising Σ |(τ_k - Y_k θ) / σ|².

    Also its std (from the weighted residual variance), the residual RMS per joint and the
    condition number of the weighted regressor.
    """
    W = (Y / sigma[:, None]).reshape(-1, Y.shape[-1])
    t = (tau / sigma).ravel()
    theta, *_ = np.linalg.lstsq(W, t, rcond=None)
    residual = tau - Y @ theta
    s2 = np.sum((residual / sigma) ** 2) / max(W.shape[0] - r, 1)
    singular = np.linalg.svd(W, compute_uv=False)
    covariance = s2 * np.linalg.pinv(W.T @ W)   # pinv: an unexcited direction is not an error
    with np.errstate(divide='ignore'):
        condition = float(singular[0] / singular[-1])
    return (theta, np.sqrt(np.diag(covariance)), np.sqrt(np.mean(residual ** 2, axis=0)),
            condition)


# ---- payload ----

@dataclasses.dataclass
class PayloadEstimate:
    """A rigid payload at ``frame``, as ``identify_payload`` found it.

    ``mass``, ``com`` (3,) and ``inertia`` about the com (3x3, zero when not identified), in
    the frame's axes; ``residual_rms`` (nv,), ``condition_number``.
    ``rd.with_payload(model, **estimate.payload)`` adds it to a model.
    """

    mass: float
    com: np.ndarray
    inertia: np.ndarray
    frame: str
    residual_rms: np.ndarray
    condition_number: float

    @property
    def payload(self):
        """The keyword arguments of ``rd.with_payload`` (and of the simulators' ``payload``)."""
        return dict(mass=self.mass, com=self.com, inertia=self.inertia, frame=self.frame)


def identify_payload(model, q, tau, v=None, a=None, frame=None, inertia=None, noise_std=None):
    """Mass, centre of mass (and inertia) of a rigid load at ``frame`` (default: the tip).

    Static poses (v and a None): τ - g(q) = Y_g(q) T (m, m c), the gravity regressor of the
    frame's body through T, the frame's placement (``parameter_map``): at least two poses with
    different tip orientations fix m and c. With v and a: τ - rnea(q, q̇, q̈) = Y T θ_p, and
    with ``inertia`` (default: True when v is given) the six inertia entries too, if the motion
    excites them. ``model`` is the arm without the payload; ``noise_std`` per-joint σ.
    """
    frame = model.tip if frame is None else frame
    f = model.frame_index(frame)
    body = model.frame_body[f]
    if body < 0:
        raise ValueError(f"frame '{frame}' is fixed to the base: a payload there has no effect")
    q = np.atleast_2d(np.asarray(q, dtype=float))
    tau = np.atleast_2d(np.asarray(tau, dtype=float))
    static = v is None
    if static:
        v = a = np.zeros_like(q)
        residual = tau - gravity(model, q)
    else:
        v, a = np.atleast_2d(v), np.atleast_2d(a)
        residual = tau - rnea(model, q, v, a)
    inertia = (not static) if inertia is None else inertia
    columns = 10 if inertia else 4
    Y = regressor(model, q, v, a)[..., 10 * body:10 * body + 10] @ parameter_map(
        model.frame_placement[f])[:, :columns]
    sigma = np.ones(model.nv) if noise_std is None else np.broadcast_to(
        np.asarray(noise_std, dtype=float), (model.nv,))
    theta, _, rms, condition = _weighted_fit(Y, residual, sigma, columns)
    mass = theta[0]
    inertia_com = inertia_about_com(theta) if inertia else np.zeros((3, 3))
    return PayloadEstimate(float(mass), theta[1:4] / mass, inertia_com, frame, rms, condition)
