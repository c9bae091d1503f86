"""Identification of inertial parameters, friction, armature and payloads: least squares, τ = Y θ.

The workflow (Gautier & Khalil's inverse-dynamics identification model):

1. log q and τ along an exciting motion (``excitation.py``);
2. ``differentiate`` q offline with a zero-phase low-pass filter into q, q̇, q̈, and filter τ
   with the same ``lowpass`` so that both keep the same delay-free bandwidth;
3. ``identify`` the base parameters θ_b (``regressor.base_parameters``), and friction and
   armature if asked, by (weighted) least squares: min Σ_k |Σ^-1 (τ_k - Y_b(q_k, q̇_k, q̈_k) θ_b)|²
   with Σ = diag(σ_i), the per-joint noise std, τ less the prior's joint terms not fitted;
4. fit the full parameters physically consistent by construction (log-Cholesky factors of the
   pseudo-inertias, Rucker & Wensing 2022; joint terms >= 0): the data's misfit from θ_b plus a
   Gaussian prior at the model's values, which alone fixes what the data cannot see; and the
   identified model that carries them, ``rd.rnea(result.model, q, q̇, q̈)``;
5. read the report: residual RMS per joint, relative error, condition number, standard
   deviations, physical consistency.

``identify_payload`` solves the smaller problem of a rigid load at the tip: mass and centre of
mass from static poses (gravity only), and its inertia too from a motion that excites it.
"""
import dataclasses

import numpy as np

from .algorithms.friction import joint_friction
from .algorithms.jacobians import frame_pose
from .algorithms.rnea import gravity, rnea
from .regressor import base_parameters, parameter_map, parameter_vector, regressor
from .spatial import inertia_from_standard, skew


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
    H = skew(theta_body[1:4])
    return inertia_from_standard(theta_body[4:10]) + H @ H / theta_body[0]


def pseudo_inertia(theta_body):
    """The 4x4 pseudo-inertia J = [[tr(I)/2 1 - I, h], [hᵀ, m]] of (m, h, I about the origin).

    J = ∫ (r, 1)(r, 1)ᵀ dm, linear in θ. J ≻ 0 iff m > 0 and the principal moments of I_c obey
    the strict triangle inequalities (so I_c ≻ 0): the parameters are those of a body, a mass
    density (Wensing, Kim and Slotine, "Linear matrix inequalities for physically consistent
    inertial parameter identification", IEEE RA-L 2017).
    """
    inertia = inertia_from_standard(theta_body[4:10])
    J = np.empty((4, 4))
    J[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    J[:3, 3] = J[3, :3] = theta_body[1:4]
    J[3, 3] = theta_body[0]
    return J


PSEUDO_INERTIA_BASIS = np.array([pseudo_inertia(e) for e in np.eye(10)])   # J(θ) = Σ θ_k E_k
PSEUDO_INERTIA_INVERSE = np.linalg.pinv(PSEUDO_INERTIA_BASIS.reshape(10, 16).T).reshape(10, 4, 4)
CONSISTENCY_MARGIN = 1e-6   # least eigenvalue of each body's dimensionless pseudo-inertia
PRIOR_STD = 0.1             # the prior's standard deviation, in units of parameter_scales
# φ = (α, d1, d2, d3, s12, s23, s13, t1, t2, t3): U's entries after α, row and column
LOG_CHOLESKY_ENTRIES = np.array([(0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2),
                                 (0, 3), (1, 3), (2, 3)]).T


def log_cholesky_factor(phi):
    """U (..., 4, 4) of log-Cholesky parameters φ (..., 10); U Uᵀ ≻ 0 for every real φ.

    U = e^α [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]]: the
    upper-triangular Cholesky factor of a pseudo-inertia (Rucker and Wensing, "Smooth
    parameterization of rigid-body inertia", IEEE RA-L 7(2), 2022).
    """
    U = np.zeros(phi.shape[:-1] + (4, 4))
    rows, columns = LOG_CHOLESKY_ENTRIES
    U[..., rows, columns] = phi[..., 1:]
    U[..., [0, 1, 2], [0, 1, 2]] = np.exp(phi[..., 1:4])
    U[..., 3, 3] = 1.0
    return np.exp(phi[..., :1, None]) * U


def log_cholesky_parameters(J, margin=CONSISTENCY_MARGIN):
    """φ (..., 10) with U Uᵀ = J - margin 1 for dimensionless pseudo-inertias J (..., 4, 4).

    Eigenvalues of J below 2 margin are raised to it first, so that any J, even one of a
    non-physical body, maps to a body near it. U is the Cholesky factor of J with rows and
    columns reversed, reversed back (upper triangular).
    """
    eigenvalues, vectors = np.linalg.eigh(J)
    A = (vectors * (np.maximum(eigenvalues, 2.0 * margin) - margin)[..., None, :]) @ \
        np.swapaxes(vectors, -1, -2)
    U = np.linalg.cholesky(A[..., ::-1, ::-1])[..., ::-1, ::-1]
    phi = np.empty(J.shape[:-2] + (10,))
    phi[..., 0] = np.log(U[..., 3, 3])
    V = U / U[..., 3:, 3:]
    phi[..., 1:] = V[..., LOG_CHOLESKY_ENTRIES[0], LOG_CHOLESKY_ENTRIES[1]]
    phi[..., 1:4] = np.log(phi[..., 1:4])
    return phi


def body_units(model):
    """D_i = √m diag(r, r, r, 1) (nb, 4) of ``body_sizes``: J_i = D J̃_i D, J̃_i dimensionless."""
    mass, radius = body_sizes(model)
    return np.stack([radius] * 3 + [np.ones_like(radius)], 1) * np.sqrt(mass)[:, None]


def inertial_parameters(phi, units, margin=CONSISTENCY_MARGIN):
    """θ (nb, 10) of φ (nb, 10) and dθ/dφ (nb, 10, 10): J = D (U Uᵀ + margin 1) D.

    ∂U/∂α = U; ∂U/∂φ_k = e^α at its entry, times e^d_i on the diagonal (= U there).
    """
    U = log_cholesky_factor(phi)
    dU = np.zeros(U.shape[:1] + (10, 4, 4))
    dU[:, 0] = U
    rows, columns = LOG_CHOLESKY_ENTRIES
    k = np.arange(1, 10)
    dU[:, k, rows, columns] = np.exp(phi[:, :1])
    dU[:, [1, 2, 3], [0, 1, 2], [0, 1, 2]] = U[:, [0, 1, 2], [0, 1, 2]]
    DD = units[:, :, None] * units[:, None, :]
    J = DD * (U @ np.swapaxes(U, -1, -2) + margin * np.eye(4))
    dUUt = dU @ np.swapaxes(U, -1, -2)[:, None]
    dJ = DD[:, None] * (dUUt + np.swapaxes(dUUt, -1, -2))
    return (np.einsum('kab,nab->nk', PSEUDO_INERTIA_INVERSE, J),
            np.einsum('kab,nmab->nkm', PSEUDO_INERTIA_INVERSE, dJ))


def consistent_parameters(model, P, R, theta_base, prior, prior_std=PRIOR_STD):
    """θ: bodies physical by construction, joint terms >= 0, fitting the data and the prior.

    Minimises |R (P θ - θ̂_b)|² + |(θ - θ_prior) / (ρ s)|² (ρ = ``prior_std``, s =
    ``parameter_scales``): the data's misfit, RᵀR the information matrix of θ̂_b (weighted by
    the noise variance), and a Gaussian prior. Bodies in log-Cholesky parameters
    (``inertial_parameters``: pseudo-inertia ≻ 0, Wensing et al. 2017), the joint terms bounded
    below by 0; scipy's trust-region reflective least squares from the data's nearest
    (``nearest_parameters``) made physical (``log_cholesky_parameters``).
    """
    from scipy.optimize import least_squares   # imported here: slow, offline use only
    nb, units = model.nb, body_units(model)
    weight = 1.0 / (prior_std * parameter_scales(model, len(prior)))
    J0 = np.einsum('nk,kab->nab', nearest_parameters(model, P, theta_base, prior)[:10 * nb]
                   .reshape(nb, 10), PSEUDO_INERTIA_BASIS)
    x0 = np.concatenate([log_cholesky_parameters(J0 / (units[:, :, None] * units[:, None, :]))
                         .ravel(), np.maximum(prior[10 * nb:], 0.0)])

    def theta_of(x):
        bodies, dbodies = inertial_parameters(x[:10 * nb].reshape(nb, 10), units)
        G = np.eye(len(x))
        for i in range(nb):
            G[10 * i:10 * i + 10, 10 * i:10 * i + 10] = dbodies[i]
        return np.concatenate([bodies.ravel(), x[10 * nb:]]), G

    def residual(x):
        theta, _ = theta_of(x)
        return np.concatenate([R @ (P @ theta - theta_base), weight * (theta - prior)])

    def jacobian(x):
        _, G = theta_of(x)
        return np.concatenate([R @ P @ G, weight[:, None] * G])

    lower = np.r_[np.full(10 * nb, -np.inf), np.zeros(len(prior) - 10 * nb)]
    with np.errstate(over='ignore', invalid='ignore'):   # a trial step too far: trf shrinks it
        solution = least_squares(residual, x0, jac=jacobian, bounds=(lower, np.inf),
                                 method='trf', ftol=1e-10, xtol=1e-10, gtol=1e-10,
                                 max_nfev=1000)
    return theta_of(solution.x)[0]


def nearest_parameters(model, P, theta_base, prior):
    """θ = θ_prior + S (P S)⁺ (θ_b - P θ_prior), S = diag(``parameter_scales``).

    The full parameters reproducing θ_b (P θ = θ_b) nearest the prior in the scaled norm
    |S⁻¹ (θ - θ_prior)|: each body moves in units of its own size.
    """
    scale = parameter_scales(model, len(prior))
    return prior + scale * (np.linalg.pinv(P * scale) @ (theta_base - P @ prior))


def body_sizes(model):
    """(m, r) per body: the model's mass and radius of gyration r = sqrt(tr I / 2 m).

    r about the body origin; 1 (SI) where the model has no mass or inertia.
    """
    m = model.inertia[:, 0]
    with np.errstate(divide='ignore', invalid='ignore'):
        r = np.sqrt(model.inertia[:, 4:7].sum(1) / (2.0 * m))
    return np.where(m > 0, m, 1.0), np.where((m > 0) & (r > 0), r, 1.0)


def parameter_scales(model, count):
    """Typical sizes of the ``count`` parameters θ, the units of the distance to the prior.

    Per body m, m r (first moments), m r² (inertias) of ``body_sizes``; 1 (SI) for the joint
    terms.
    """
    m, r = body_sizes(model)
    bodies = np.repeat(np.stack([m, m * r, m * r * r], 1), [1, 3, 6], axis=1).ravel()
    return np.concatenate([bodies, np.ones(count - len(bodies))])


# ---- least squares on the base parameters ----

def known_joint_torques(model, v, a, flags):
    """I_a q̈ + τ_f(q̇) of the model's joint terms that are not fitted (``flags`` False).

    The prior knows them: ``identify`` subtracts them from τ so that the links do not absorb them.
    """
    known = model.replace(**{kind: None for kind, fitted in flags.items() if fitted})
    return known.armature * np.asarray(a, dtype=float) + joint_friction(known, v)


def identified_model(prior, theta, flags):
    """The prior with θ's inertias and fitted joint terms; (model, joint terms, notes).

    A Model's joint terms are >= 0: a negative fitted one is kept in the joint terms returned
    and set to 0 in the model (noted).
    """
    nb, nv, rest = prior.nb, prior.nv, theta[10 * prior.nb:]
    terms, notes = {}, []
    for kind, fitted in flags.items():   # the optional columns, in their order
        terms[kind], rest = (rest[:nv].copy(), rest[nv:]) if fitted else (None, rest)
        if fitted and (terms[kind] < 0).any():
            negative = [f'{j} ({x:.3g})' for j, x in zip(prior.joint_names, terms[kind]) if x < 0]
            notes.append(f'negative {kind}, 0 in the model: {", ".join(negative)}')
    changes = {kind: np.maximum(x, 0.0) for kind, x in terms.items() if x is not None}
    return prior.replace(inertia=theta[:10 * nb].reshape(nb, 10), **changes), terms, notes


@dataclasses.dataclass
class Identification:
    """What ``identify`` found; θ in the order of ``regressor.parameter_vector``.

    ``theta_base`` (r,) the least-squares base parameters and ``std_base`` their standard
    deviations, ``least_squares_rms`` (nv,) the residual RMS of τ - Y_b θ_b; ``theta`` the full
    parameters of the identified model: with ``physical`` the consistent fit
    (``consistent_parameters``), else those reproducing θ_b nearest the prior
    (``nearest_parameters``); ``model`` the prior with θ's inertias and fitted joint terms, its
    other joint terms the prior's, so that ``rd.rnea(model, q, v, a)`` is the identified inverse
    dynamics (a negative fitted joint term is 0 there, noted); ``viscous``/``coulomb``/
    ``armature``/``stiction`` (nv,) the fitted joint terms as fitted, or None;
    ``residual_rms`` (nv,) of τ - Y_b P θ, the model's residual, ``relative_error`` its norm over
    |τ|, ``condition_number`` of the weighted Y_b; ``consistency`` one ``physical_consistency``
    dict per body, with ``determined`` True where the data fix all ten parameters of that body
    (else the prior chose among the combinations); ``notes`` what the summary should say;
    ``prior`` the given model.
    """

    base: object
    theta_base: np.ndarray
    std_base: np.ndarray
    least_squares_rms: np.ndarray
    theta: np.ndarray
    model: object
    viscous: np.ndarray
    coulomb: np.ndarray
    armature: np.ndarray
    stiction: np.ndarray
    residual_rms: np.ndarray
    relative_error: float
    condition_number: float
    consistency: list
    notes: list
    prior: object

    @property
    def consistent(self):
        """Every body has positive mass, a positive definite inertia and the triangle inequality."""
        return all(c['positive_definite'] and c['triangle'] for c in self.consistency)

    def predict(self, q, v, a):
        """τ = Y_b P θ + the prior's joint terms not fitted: the identified model's torques."""
        return (self.base.regressor(self.model, q, v, a) @ (self.base.P @ self.theta)
                + known_joint_torques(self.prior, v, a, self.base.flags))

    def summary(self):
        """A few lines for a human."""
        bad = [name for name, c in zip(self.model.body_names, self.consistency)
               if not (c['positive_definite'] and c['triangle'])]
        return '\n'.join([f'{self.base.count} base parameters, condition number '
                          f'{self.condition_number:.3g}, relative error {self.relative_error:.3g}',
                          f'residual RMS per joint: '
                          f'{np.array2string(self.residual_rms, precision=4)} (least squares '
                          f'{np.array2string(self.least_squares_rms, precision=4)})',
                          f'physically inconsistent bodies: {", ".join(bad) or "none"}',
                          *self.notes])


def identify(model, q, v, a, tau, viscous=False, coulomb=False, armature=False, stiction=False,
             noise_std=None, base=None, Y=None, physical=True, prior_std=PRIOR_STD,
             independent=1.0):
    """Least-squares θ_b from logged states q, q̇, q̈ and torques τ, all (N, nv); the full model.

    ``model`` is the prior: kinematics, inertias, and joint terms. Its joint terms that are not
    fitted are known: τ - I_a q̈ - τ_f(q̇) of those is fitted (``known_joint_torques``).
    ``noise_std``: None (ordinary least squares), per-joint σ (nv,) (rows of joint i weighted by
    1 / σ_i) or 'estimate' (Gautier's two steps: σ_i from the unweighted residuals, then
    weighted). ``base``: a ``BaseParameters`` to reuse (default:
    ``base_parameters(model, viscous, coulomb, armature, stiction)``). ``Y``: the full regressor
    at the states, (N, nv, 10 nb + joint columns) as ``regressor(model, q, v, a, viscous,
    coulomb, armature, stiction)`` lays it out, if computed already (e.g. with filtered Coulomb
    columns: parallel filtering). ``physical``: the full θ from ``consistent_parameters`` (physical
    bodies, joint terms >= 0; the data weighted by the least-squares residual variance, the prior's
    standard deviation ``prior_std`` in ``parameter_scales``), else ``nearest_parameters``;
    θ_b is the least-squares one either way. ``independent``: the fraction of the samples
    whose errors are independent (filtered data: 2 cutoff dt), which scales the data's weight
    against the prior's (``information_factor``). Memory grows as N nv r: decimate long logs after
    filtering (10^4 states are plenty).
    """
    flags = dict(viscous=viscous, coulomb=coulomb, armature=armature, stiction=stiction)
    base = base or base_parameters(model, **flags)
    if base.flags != flags:
        raise ValueError(f'base was made for {base.flags}, not {flags}')
    tau = np.asarray(tau, dtype=float)
    Yb = base.regressor(model, q, v, a) if Y is None else _base_columns(Y, base, tau.shape)
    tau_to_fit = tau - known_joint_torques(model, v, a, flags)
    sigma = noise_weights(Yb, tau_to_fit, noise_std, base.count)
    theta_base, std_base, least_squares_rms, condition = weighted_fit(Yb, tau_to_fit, sigma,
                                                                      base.count)
    prior = parameter_vector(model, **flags)
    if physical:
        information = information_factor(Yb, tau_to_fit, sigma, theta_base) * np.sqrt(
            min(max(independent, 1e-6), 1.0))
        theta = consistent_parameters(model, base.P, information, theta_base, prior, prior_std)
    else:
        theta = nearest_parameters(model, base.P, theta_base, prior)
    fitted, terms, negative = identified_model(model, theta, flags)
    residual_rms = np.sqrt(np.mean((tau_to_fit - Yb @ (base.P @ theta)) ** 2, axis=0))
    return Identification(base, theta_base, std_base, least_squares_rms, theta, fitted, **terms,
                          residual_rms=residual_rms,
                          relative_error=float(np.linalg.norm(residual_rms) / np.sqrt(
                              np.mean(tau ** 2, axis=0).sum())),
                          condition_number=condition,
                          consistency=consistency_report(fitted, base.P), notes=negative,
                          prior=model)


def information_factor(Yb, tau, sigma, theta_base):
    """R with |R (θ_b - θ̂_b)|² = (|Σ⁻¹ (τ - Y_b θ_b)|² - its least) / s², R upper triangular.

    QR of the weighted regressor Σ⁻¹ Y_b (N nv, r); s² the weighted residual variance of the
    least-squares θ̂_b over N nv - r degrees of freedom, floored at 1e-24 of the weighted τ's
    mean square (exact data).
    """
    W = (Yb / sigma[:, None]).reshape(-1, Yb.shape[-1])
    weighted = (tau / sigma).ravel()
    residual = weighted - W @ theta_base
    s2 = max(residual @ residual / max(W.shape[0] - W.shape[1], 1),
             1e-24 * (weighted @ weighted) / len(weighted), 1e-300)
    return np.linalg.qr(W, mode='r') / np.sqrt(s2)


def noise_weights(Yb, tau, noise_std, count):
    """σ (nv,) of ``identify``'s ``noise_std``: ones, the given values, or 'estimate'd.

    'estimate': the residual RMS per joint of the ordinary least-squares fit (Gautier's first
    step), floored so that exact data do not divide by 0.
    """
    nv = tau.shape[-1]
    if isinstance(noise_std, str):
        if noise_std != 'estimate':
            raise ValueError(f"noise_std must be None, per-joint values or 'estimate', "
                             f"got {noise_std!r}")
        rms = weighted_fit(Yb, tau, np.ones(nv), count)[2]
        return np.maximum(rms, 1e-9 * rms.max() + 1e-300)
    return np.ones(nv) if noise_std is None else np.broadcast_to(
        np.asarray(noise_std, dtype=float), (nv,))


def consistency_report(model, P):
    """``physical_consistency`` of each body of the model, and ``determined``.

    determined: the data fix all ten parameters of the body (the diagonal of the projector
    P⁺ P onto what the data see is 1 there).
    """
    nb = model.nb
    projector = np.linalg.pinv(P) @ P
    determined = np.abs(np.diag(projector)[:10 * nb] - 1.0).reshape(nb, 10).max(1) < 1e-8
    return [physical_consistency(t) | dict(determined=bool(d))
            for t, d in zip(model.inertia, determined)]


def _base_columns(Y, base, shape):
    """Y_b = Y[..., independent] of a full regressor Y (N, nv, columns), its shape checked."""
    Y = np.asarray(Y, dtype=float)
    if Y.shape != (*shape, base.P.shape[1]):
        raise ValueError(f'Y must have shape {(*shape, base.P.shape[1])} (the full regressor '
                         f'at the states, joint columns included), got {Y.shape}')
    return Y[..., base.independent]


def weighted_fit(Y, tau, sigma, r=None):
    """θ minimising Σ |(τ_k - Y_k θ) / σ|², Y (N, nv, p), τ (N, nv), σ (nv,) per joint.

    Also its std (from the weighted residual variance over N nv - r degrees of freedom, r
    default p), the residual RMS per joint and the condition number of the weighted regressor.
    Solved by the SVD of the weighted regressor with unit-norm columns (parameters of different
    units); an unexcited direction (singular value below round-off) is left out, as lstsq does.
    """
    W = (Y / sigma[:, None]).reshape(-1, Y.shape[-1])
    norms = np.linalg.norm(W, axis=0)
    norms = np.where(norms > 0.0, norms, 1.0)
    U, singular, Vt = np.linalg.svd(W / norms, full_matrices=False)
    keep = singular > np.finfo(float).eps * max(W.shape) * singular[0]
    V = Vt[keep].T / singular[keep]
    theta = V @ (U[:, keep].T @ (tau / sigma).ravel()) / norms
    residual = tau - Y @ theta
    s2 = np.sum((residual / sigma) ** 2) / max(W.shape[0] - (W.shape[1] if r is None else r), 1)
    unscaled = np.linalg.svd(W, compute_uv=False)
    with np.errstate(divide='ignore'):
        condition = float(unscaled[0] / unscaled[-1])
    return (theta, np.sqrt(s2 * (V ** 2).sum(1)) / norms, np.sqrt(np.mean(residual ** 2, axis=0)),
            condition)


@dataclasses.dataclass
class Conditioning:
    """How well a motion excites the parameters of a regressor (``conditioning``).

    ``condition_number`` of the regressor with unit-norm columns; ``unexcited`` the parameters
    whose column is zero; ``weak`` those with a share above WEAK_SHARE of a direction whose
    singular value is below σ_max / ``max_condition``: what the motion does not determine.
    """

    condition_number: float
    unexcited: list
    weak: list
    max_condition: float

    @property
    def well_conditioned(self):
        """No unexcited parameter and a condition number within max_condition."""
        return not self.unexcited and self.condition_number <= self.max_condition


WEAK_SHARE = 0.3   # a parameter's share of a weak direction that names it


def conditioning(Y, names, max_condition=1e3, sigma=None):
    """The ``Conditioning`` of Y (N, nv, p) (rows of joint i divided by σ_i if given).

    Columns are scaled to unit norm, so that the condition number compares parameters of
    different units; the right singular vectors of the small singular values name the weakly
    excited parameters (their entries above WEAK_SHARE).
    """
    Y = np.asarray(Y, dtype=float)
    if sigma is not None:
        Y = Y / sigma[:, None]
    A = Y.reshape(-1, Y.shape[-1])
    norms = np.linalg.norm(A, axis=0)
    unexcited = [n for n, x in zip(names, norms) if not x > 1e-8 * norms.max()]
    if unexcited:
        return Conditioning(np.inf, unexcited, [], max_condition)
    _, singular, Vt = np.linalg.svd(A / norms, full_matrices=False)
    condition = singular[0] / singular[-1]
    weak = Vt[singular < singular[0] / max_condition]
    named = [n for n, w in zip(names, np.abs(weak).max(0, initial=0.0)) if w > WEAK_SHARE]
    return Conditioning(float(condition), [], named, max_condition)


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
    Y = payload_regressor(model, regressor(model, q, v, a), frame, inertia)
    sigma = noise_weights(Y, residual, noise_std, columns)
    theta, _, rms, condition = weighted_fit(Y, residual, sigma, columns)
    mass = theta[0]
    inertia_com = inertia_about_com(theta) if inertia else np.zeros((3, 3))
    return PayloadEstimate(float(mass), theta[1:4] / mass, inertia_com, frame, rms, condition)


def payload_regressor(model, Y, frame, inertia=True):
    """The columns of a rigid payload at ``frame``: Y_j T, (..., nv, 10) or (..., nv, 4).

    Y: the model's regressor (inertial columns first); Y_j its block of the frame's body j, and
    T = ``parameter_map`` of the frame's placement, so that Y_j T θ_p is the payload's torque for
    its standard parameters θ_p about the frame, in frame axes: (m, m c) and, with ``inertia``,
    the six inertias too.
    """
    f = model.frame_index(frame)
    body = model.frame_body[f]
    return Y[..., 10 * body:10 * body + 10] @ parameter_map(
        model.frame_placement[f])[:, :10 if inertia else 4]


def static_poses(q, tolerance):
    """Index of the pose of each still sample q (rows): a new pose beyond ``tolerance``.

    A sample farther than ``tolerance`` (max over the joints) from the first sample of the
    current pose starts the next pose.
    """
    labels, first = np.empty(len(q), dtype=int), None
    for k, qk in enumerate(q):
        if first is None or np.abs(qk - q[first]).max() > tolerance:
            first = k
            labels[k] = labels[k - 1] + 1 if k else 0
        else:
            labels[k] = labels[k - 1]
    return labels


def tilt(model, q, frame=None):
    """How well static poses q (rows) fix a payload's centre of mass at ``frame`` (the tip).

    Gravity only fixes the components of c across its direction in frame axes: the poses fix
    all of c when these directions differ. Returns (tilt in degrees, weakest axis in frame axes):
    the smallest eigenvalue λ of the mean of 1 - d dᵀ over the directions d is sin²(α / 2) for
    two poses at an angle α, so tilt = 2 asin √λ, and its eigenvector is the direction along
    which c is least determined.
    """
    frame = model.tip if frame is None else frame
    g = model.gravity / np.linalg.norm(model.gravity)
    directions = [frame_pose(model, qk, frame)[:3, :3].T @ g for qk in q]
    scatter = np.mean([np.eye(3) - np.outer(d, d) for d in directions], axis=0)
    weakest, axis = np.linalg.eigh(scatter)
    return float(2.0 * np.degrees(np.arcsin(np.sqrt(min(max(weakest[0], 0.0), 1.0))))), axis[:, 0]
