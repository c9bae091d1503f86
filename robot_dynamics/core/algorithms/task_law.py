"""The task-space laws of core/task_control.py for one state, in one compiled call.

``task_law_state`` is the laws' linear algebra on the model terms (J, M, T, h, J̇q̇), the one
implementation CartesianImpedance and OperationalSpace run; ``task_law_kernel`` computes those
terms with the state kernels first (models without mimic joints), so that a cycle costs one
dispatch. The equations are the laws' docstrings; per state, with Φ = J M⁻¹ Jᵀ:

- Λ = robust_inverse(Φ), J̄ = M⁻¹ Jᵀ Λ, N = 1 − J̄ J (operational_space_kernel's steps), and
  D from Φ's eigenvectors, which are Λ's (modal_damping: one eigendecomposition fewer than
  damping_matrix, the same D to rounding);
- every mode of Λ ë + D ė + K e = 0 (K in 1/s² with inertia shaping: Λ = 1) at most at the
  natural frequency ω_max: the stiffness of a faster mode lowered to λ ω_max² (modal_gains);
- e = pose_error(T_d, T) clipped per part to max_error, ẋ = J q̇;
- K e + D ė, or D (v − ẋ) with v = ẋ_d + D⁺ K e clipped per part to max_velocity;
- τ_null = K_n (q_n − q) − D_n q̇ (q_n − q wrapped on continuous joints), projected by Nᵀ.

``gains`` packs the law's constants: K (6), ζ, max_error (2), max_velocity (2), the singular
damping and cutoff, ω_max; ``joint_gains`` the rows K_n, D_n, q_n, continuous (4, nv); ``target``
the reference: T_d (16, row-major), ẋ_d, ẍ_d, F_d (6 each).
"""
import numpy as np

from .._jit import jit
from .crba import mass_matrix_state
from .jacobians import (LOCAL_WORLD_ALIGNED, frame_bias_acceleration_state,
                        frame_jacobian_state, frame_pose_state)
from .operational_space import pose_error_state, robust_inverse_eigen
from .rnea import gravity_state, rnea_state

IMPEDANCE, IMPEDANCE_CORIOLIS, SHAPED, UNSHAPED = 0, 1, 2, 3   # the law (``law`` argument)
K, ZETA, MAX_ERROR, MAX_VELOCITY, DAMPING, CUTOFF, MAX_FREQUENCY, GAINS = (
    0, 6, 7, 9, 11, 12, 13, 14)   # gains
KN, DN, POSTURE, CONTINUOUS = 0, 1, 2, 3   # rows of joint_gains
POSE, TWIST, ACCEL, WRENCH, TARGET = 0, 16, 22, 28, 34   # target
_ALIGNED = int(LOCAL_WORLD_ALIGNED)
TWO_PI = 2.0 * np.pi


@jit
def modal_damping(lam, U, stiffness, damping_ratio):
    """damping_matrix of Λ = U diag(λ) Uᵀ (λ >= 0, U orthogonal) and K's diagonal (6)."""
    return modal_gains(lam, U, stiffness, damping_ratio, np.inf)[1]


@jit
def modal_gains(lam, U, stiffness, damping_ratio, max_frequency):
    """(K', D) of Λ = U diag(λ) Uᵀ and K's diagonal with every mode at most at ω_max.

    The modes of Λ ë + D ė + K e = 0 are S V, ω² = the eigenvalues w of S⁺ K S⁺ (S = Λ^{1/2},
    as modal_damping): K' = K − S V diag(w − min(w, ω_max²)) Vᵀ S lowers each faster mode's
    stiffness to its inertia times ω_max² and leaves the others (and the directions where Λ is
    cut off) as K has them; D = 2ζ S V diag(√min(w, ω_max²)) Vᵀ S damps every mode at ratio ζ.
    """
    root = np.sqrt(np.maximum(lam, 0.0))
    inverse = np.where(root > 1e-12 * root.max(), 1.0 / np.maximum(root, 1e-300), 0.0)
    S, S_pinv = (U * root) @ U.T, (U * inverse) @ U.T
    w, V = np.linalg.eigh(S_pinv @ np.diag(stiffness) @ S_pinv)
    w = np.maximum(w, 0.0)
    capped = np.minimum(w, max_frequency ** 2)
    SV = S @ V
    K = np.diag(stiffness) - (SV * (w - capped)) @ SV.T
    return K, 2.0 * damping_ratio * ((SV * np.sqrt(capped)) @ SV.T)


@jit
def damping_kernel(Lambda, stiffness, damping_ratio):
    """damping_matrix of a symmetric positive semidefinite Λ (6x6) and K's diagonal (6)."""
    s, U = np.linalg.eigh(Lambda)
    return modal_damping(s, U, stiffness, damping_ratio)


@jit
def clip_norm_state(x, first, limit):
    """x[first:first + 3] scaled down to norm ``limit`` if longer."""
    norm = np.sqrt(x[first] ** 2 + x[first + 1] ** 2 + x[first + 2] ** 2)
    if norm > limit:
        for i in range(first, first + 3):
            x[i] *= limit / norm


@jit
def clip_twist_state(x, translation, rotation):
    """x (6, angular first) with each part clipped to its limit (clip_twist)."""
    clip_norm_state(x, 0, rotation)
    clip_norm_state(x, 3, translation)


@jit
def task_law_state(law, J, M, T, h, bias_acceleration, q, v, target, gains, joint_gains, tau):
    """τ of the law at (q, q̇) from J (6, nv), M, T (4x4), h (g or C q̇ + g + τ_f), J̇q̇; κ(Φ)."""
    nv = q.size
    M_inv_Jt = np.linalg.solve(M, np.ascontiguousarray(J.T))
    Phi = J @ M_inv_Jt
    lam, U, condition = robust_inverse_eigen(0.5 * (Phi + Phi.T), gains[DAMPING], gains[CUTOFF])
    Lambda = (U * lam) @ U.T
    N = -(M_inv_Jt @ Lambda) @ J
    for i in range(nv):
        N[i, i] += 1.0
    e = np.empty(6)
    pose_error_state(np.ascontiguousarray(target[POSE:TWIST]).reshape(4, 4), T, e)
    clip_twist_state(e, gains[MAX_ERROR], gains[MAX_ERROR + 1])
    x_dot, twist_d = J @ v, target[TWIST:ACCEL]
    if law == SHAPED:   # unit inertia: the modes are the axes, ω² = K
        stiffness = np.minimum(gains[K:ZETA], gains[MAX_FREQUENCY] ** 2)
        Ke, D = stiffness * e, np.diag(2.0 * gains[ZETA] * np.sqrt(stiffness))
    else:               # Λ's eigenvectors are Φ's
        stiffness, D = modal_gains(lam, U, gains[K:ZETA], gains[ZETA], gains[MAX_FREQUENCY])
        Ke = stiffness @ e
    if np.isinf(gains[MAX_VELOCITY]) and np.isinf(gains[MAX_VELOCITY + 1]):
        F = Ke + D @ (twist_d - x_dot)
    else:
        v_max = twist_d + np.linalg.pinv(D) @ Ke
        clip_twist_state(v_max, gains[MAX_VELOCITY], gains[MAX_VELOCITY + 1])
        F = D @ (v_max - x_dot)
    if law == SHAPED:
        F = Lambda @ (target[ACCEL:WRENCH] + F - bias_acceleration)
    elif law == UNSHAPED:
        F = Lambda @ (target[ACCEL:WRENCH] - bias_acceleration) + F
    F = F + target[WRENCH:TARGET]
    tau_null = np.empty(nv)
    for i in range(nv):
        error = joint_gains[POSTURE, i] - q[i]
        if joint_gains[CONTINUOUS, i]:
            error = (error + np.pi) % TWO_PI - np.pi
        tau_null[i] = joint_gains[KN, i] * error - joint_gains[DN, i] * v[i]
    tau[:] = J.T @ F + h + N.T @ tau_null
    return condition


@jit
def task_law_kernel(table, frames, f, law, q, v, ws, target, gains, joint_gains, tau):
    """task_law_state with the model terms computed here (a model without mimic joints)."""
    nv = q.size
    J, M, T = np.empty((6, nv)), np.empty((nv, nv)), np.empty((4, 4))
    h, bias_acceleration = np.empty(nv), np.zeros(6)
    frame_jacobian_state(table, frames, f, _ALIGNED, q, ws, J)
    frame_pose_state(table, frames, f, q, ws, T)
    mass_matrix_state(table, q, ws, M)
    if law == IMPEDANCE:
        gravity_state(table, q, ws, h)
    else:
        rnea_state(table, q, v, None, None, ws, h)
    if law == SHAPED or law == UNSHAPED:
        frame_bias_acceleration_state(table, frames, f, _ALIGNED, q, v, ws, bias_acceleration)
    return task_law_state(law, J, M, T, h, bias_acceleration, q, v, target, gains, joint_gains,
                          tau)
