"""Operational-space quantities of a frame: robust Λ, J̄, the null-space projector, pose error.

The task is the frame's motion in ``LOCAL_WORLD_ALIGNED``: twists ẋ = J q̇ = (ω, ṗ) with ω and the
velocity ṗ of the frame origin in base axes, wrenches (moment about the frame origin, force) in
base axes, angular first. Khatib (1987) and Lynch & Park §8.6 / §11.5:

- Φ = J M⁻¹ Jᵀ (the mobility), Λ = Φ⁻¹ (L&P eq. 8.90), here singularity-robust (below);
- J̄ = M⁻¹ Jᵀ Λ, the dynamically consistent generalized inverse: J J̄ = 1 where Λ = Φ⁻¹;
- N = 1 − J̄ J projects joint velocities onto the motions that leave the frame still
  (J N = 0); Nᵀ = 1 − Jᵀ J̄ᵀ projects torques onto those that exert no acceleration at the
  frame (J M⁻¹ Nᵀ = 0, and J̄ᵀ Nᵀ = 0: they carry no task force).

Every function takes one state q (nv,) or a batch (..., nv).
"""
import math
from typing import NamedTuple

import numpy as np

from .._jit import jit
from ..arguments import damping_value
from .crba import mass_matrix
from .jacobians import LOCAL_WORLD_ALIGNED, frame_jacobian


class TaskQuantities(NamedTuple):
    """The quantities of one frame at q (arrays with the batch shape of q in front)."""

    J: np.ndarray          # (6, nv) frame Jacobian, LOCAL_WORLD_ALIGNED
    M: np.ndarray          # (nv, nv) mass matrix, armature included
    Lambda: np.ndarray     # (6, 6) singularity-robust task-space inertia
    J_bar: np.ndarray      # (nv, 6) dynamically consistent inverse M⁻¹ Jᵀ Λ
    N: np.ndarray          # (nv, nv) null-space projector 1 − J̄ J
    condition: np.ndarray  # () condition number of Φ = J M⁻¹ Jᵀ (inf at a singularity)


def cutoff_value(cutoff):
    """cutoff as a float in [0, 1) (relative to the largest singular value), else ValueError."""
    try:
        value = float(cutoff)
    except (TypeError, ValueError):
        value = np.nan
    if not 0.0 <= value < 1.0:
        raise ValueError(f'cutoff must be a relative singular value in [0, 1), got {cutoff!r}')
    return value


@jit
def robust_inverse_eigen(Phi, damping, cutoff):
    """(λ, U, κ(Φ)): Φ⁺ = U diag(λ) Uᵀ of one symmetric positive semidefinite Φ (robust_inverse).

    λ_r = 1 / (s_r + damping) where s_r > cutoff · s_max, else 0, for Φ = U diag(s) Uᵀ.
    """
    s, U = np.linalg.eigh(Phi)
    s_max = s[-1]
    lam = np.zeros(len(s))
    for r in range(len(s)):
        if s[r] > cutoff * s_max:
            lam[r] = 1.0 / (s[r] + damping)
    return lam, U, (s_max / s[0] if s[0] > 8 * 2.220446049250313e-16 * s_max else np.inf)


@jit
def robust_inverse_state(Phi, damping, cutoff, out):
    """out = Φ⁺ of one symmetric positive semidefinite Φ (robust_inverse); returns κ(Φ)."""
    lam, U, condition = robust_inverse_eigen(Phi, damping, cutoff)
    for i in range(len(lam)):
        for j in range(len(lam)):
            out[i, j] = 0.0
    for r in range(len(lam)):
        if lam[r] != 0.0:
            for i in range(len(lam)):
                for j in range(len(lam)):
                    out[i, j] += lam[r] * U[i, r] * U[j, r]
    return condition


@jit
def operational_space_kernel(J, M, damping, cutoff, Lambda, J_bar, N, condition):
    """Λ, J̄, N and κ per state of J (n, 6, nv), M (n, nv, nv); False if a Φ is singular."""
    regular = True
    for k in range(J.shape[0]):
        M_inv_Jt = np.linalg.solve(M[k], np.ascontiguousarray(J[k].T))
        Phi = J[k] @ M_inv_Jt
        condition[k] = robust_inverse_state(0.5 * (Phi + Phi.T), damping, cutoff, Lambda[k])
        regular &= condition[k] < 1e12 or damping > 0.0 or cutoff > 0.0
        J_bar[k] = M_inv_Jt @ Lambda[k]
        N[k] = -J_bar[k] @ J[k]
        for i in range(N.shape[1]):
            N[k, i, i] += 1.0
    return regular


def robust_inverse(Phi, damping=0.0, cutoff=0.0):
    """(Φ⁺, κ(Φ)) of symmetric positive semidefinite Φ = U S Uᵀ (6x6, or batched).

    Φ⁺ = U diag(1 / (s_i + damping) if s_i > cutoff · s_max else 0) Uᵀ: the damped inverse
    (Φ + damping·1)⁻¹ (Nakamura & Hanafusa 1986, Chiaverini 1997) and the truncated SVD, whose
    Φ⁺ keeps J̄ a generalized inverse (N J̄ = 0, J N = 0) at any rank. κ = s_max / s_min of
    the undamped Φ, inf where s_min is at rounding level; κ > 1e12 with neither damping nor
    cutoff raises ValueError. Φ mixes units (1/kg, 1/(kg m²), 1/(kg m)): κ and ``cutoff`` are
    relative to them.
    """
    Phi = np.ascontiguousarray(Phi, dtype=float)
    damping, cutoff = damping_value(damping), cutoff_value(cutoff)
    flat = Phi.reshape(-1, *Phi.shape[-2:])
    out, condition = np.empty_like(flat), np.empty(len(flat))
    for k in range(len(flat)):
        condition[k] = robust_inverse_state(flat[k], damping, cutoff, out[k])
    check_regular((condition < 1e12).all() or damping > 0.0 or cutoff > 0.0)
    return out.reshape(Phi.shape), condition.reshape(Phi.shape[:-2])


def check_regular(regular):
    """The error of a singular Φ without damping or cutoff."""
    if not regular:
        raise ValueError('J M^-1 J^T is singular here (fewer than 6 independent task '
                         'directions: a singular pose, or too few joints); pass damping > 0 '
                         'or cutoff > 0 for the singularity-robust inverse')


def operational_space(model, q, frame, damping=0.0, cutoff=0.0, data=None):
    """J, M, Λ, J̄ = M⁻¹JᵀΛ, N = 1 − J̄J and κ(Φ) of ``frame`` at q (module docstring).

    Λ = robust_inverse(J M⁻¹ Jᵀ, damping, cutoff); with both zero Λ = Φ⁻¹ exactly, and a
    singular Φ raises ValueError. With damping > 0, J J̄ = Φ(Φ + damping·1)⁻¹ ≠ 1, so N is only
    approximately a projector (J N = O(damping)); with a cutoff it is exact.
    """
    damping, cutoff = damping_value(damping), cutoff_value(cutoff)
    J = frame_jacobian(model, q, frame, LOCAL_WORLD_ALIGNED, data=data)
    M = mass_matrix(model, q, data=data)
    batch, nv = J.shape[:-2], model.nv
    n = math.prod(batch)
    Lambda, J_bar, N = np.empty((n, 6, 6)), np.empty((n, nv, 6)), np.empty((n, nv, nv))
    condition = np.empty(n)
    check_regular(operational_space_kernel(J.reshape(n, 6, nv), M.reshape(n, nv, nv), damping,
                                           cutoff, Lambda, J_bar, N, condition))
    return TaskQuantities(J, M, Lambda.reshape(batch + (6, 6)), J_bar.reshape(batch + (nv, 6)),
                          N.reshape(batch + (nv, nv)), condition.reshape(batch))


def dynamically_consistent_inverse(model, q, frame, damping=0.0, cutoff=0.0, data=None):
    """J̄ = M⁻¹ Jᵀ Λ (nv x 6), Λ the singularity-robust task-space inertia (operational_space)."""
    return operational_space(model, q, frame, damping, cutoff, data).J_bar


def null_space_projector(model, q, frame, damping=0.0, cutoff=0.0, data=None):
    """N = 1 − J̄ J (nv x nv); torques are projected by Nᵀ (operational_space)."""
    return operational_space(model, q, frame, damping, cutoff, data).N


@jit
def rotation_log_state(r, out):
    """out = log(r) of one rotation matrix r (3x3); see rotation_log."""
    s = (0.5 * (r[2, 1] - r[1, 2]), 0.5 * (r[0, 2] - r[2, 0]), 0.5 * (r[1, 0] - r[0, 1]))
    c = min(1.0, max(-1.0, 0.5 * (r[0, 0] + r[1, 1] + r[2, 2] - 1.0)))
    sin = np.sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2])
    theta = np.arctan2(sin, c)
    if c >= 0.0:
        f = theta / sin if sin > 1e-12 else 1.0 + theta * theta / 6.0
        out[0], out[1], out[2] = f * s[0], f * s[1], f * s[2]
        return
    i = 0   # the column of B = (R + Rᵀ) / 2 − c·1 = (1 − c) â âᵀ with the largest diagonal
    for j in range(1, 3):
        if r[j, j] > r[i, i]:
            i = j
    norm, dot = 0.0, 0.0
    for j in range(3):
        out[j] = 0.5 * (r[j, i] + r[i, j]) - (c if j == i else 0.0)
        norm += out[j] * out[j]
        dot += out[j] * s[j]
    f = theta / np.sqrt(norm) if dot >= 0.0 else -theta / np.sqrt(norm)
    for j in range(3):
        out[j] *= f


@jit
def rotation_log_kernel(R, out):
    """out[k] = log(R[k]) for R (n, 3, 3)."""
    for k in range(R.shape[0]):
        rotation_log_state(R[k], out[k])


@jit
def pose_error_state(T_d, T, out):
    """out = pose_error(T_d, T) of one pair of poses (4x4)."""
    R = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            R[i, j] = T_d[i, 0] * T[j, 0] + T_d[i, 1] * T[j, 1] + T_d[i, 2] * T[j, 2]
        out[3 + i] = T_d[i, 3] - T[i, 3]
    rotation_log_state(R, out[:3])


@jit
def pose_error_kernel(T_d, T, out):
    """out[k] = pose_error(T_d[k], T[k]) for T_d, T (n, 4, 4)."""
    for k in range(T.shape[0]):
        pose_error_state(T_d[k], T[k], out[k])


def rotation_log(R):
    """ω = log(R) as a rotation vector (|ω| ≤ π) of rotation matrices (..., 3, 3) (L&P §3.2.3.3).

    θ = atan2(|s|, (tr R − 1) / 2) with s = vee(R − Rᵀ) / 2 = sin θ â; ω = θ s / sin θ for
    θ ≤ π/2, and beyond (where s vanishes at π) â from the symmetric part
    (R + Rᵀ) / 2 − cos θ · 1 = (1 − cos θ) â âᵀ, signed along s.
    """
    R = np.ascontiguousarray(R, dtype=float)
    if R.shape[-2:] != (3, 3):
        raise ValueError(f'rotation_log: expected rotation matrices (..., 3, 3), got {R.shape}')
    out = np.empty(R.shape[:-1])
    rotation_log_kernel(R.reshape(-1, 3, 3), out.reshape(-1, 3))
    return out


def pose_error(T_d, T):
    """e = (log(R_d Rᵀ), p_d − p) (6, angular first, base axes) from pose T to T_d (4x4, ...).

    R_d = exp([e_ω]) R: e_ω is the rotation from R to R_d in base axes, so that for small errors
    ė = ẋ_d − ẋ with the LOCAL_WORLD_ALIGNED twists (ω, ṗ). T_d and T broadcast.
    """
    T_d, T = np.broadcast_arrays(np.asarray(T_d, dtype=float), np.asarray(T, dtype=float))
    if T.shape[-2:] != (4, 4):
        raise ValueError(f'pose_error: expected 4x4 poses (..., 4, 4), got {T.shape}')
    out = np.empty(T.shape[:-2] + (6,))
    pose_error_kernel(np.ascontiguousarray(T_d).reshape(-1, 4, 4),
                      np.ascontiguousarray(T).reshape(-1, 4, 4), out.reshape(-1, 6))
    return out
