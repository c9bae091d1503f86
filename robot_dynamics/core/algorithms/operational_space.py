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
from typing import NamedTuple

import numpy as np

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


def robust_inverse(Phi, damping=0.0, cutoff=0.0):
    """(Φ⁺, κ(Φ)) of symmetric positive semidefinite Φ = U S Uᵀ (6x6, or batched).

    Φ⁺ = U diag(1 / (s_i + damping) if s_i > cutoff · s_max else 0) Uᵀ: the damped inverse
    (Φ + damping·1)⁻¹ (Nakamura & Hanafusa 1986, Chiaverini 1997) and the truncated SVD in one
    formula. With neither, Φ must be regular (s_min > 1e-12 s_max), else ValueError.
    κ = s_max / s_min of the undamped Φ. Φ mixes units (1/kg, 1/(kg m²), 1/(kg m)), so
    κ and ``cutoff`` are relative to those units.
    """
    damping, cutoff = damping_value(damping), cutoff_value(cutoff)
    s, U = np.linalg.eigh(Phi)
    s_max = s[..., -1:]
    kept = s > cutoff * s_max
    if damping == cutoff == 0.0 and (s <= 1e-12 * s_max).any():
        raise ValueError('J M^-1 J^T is singular here (fewer than 6 independent task '
                         'directions: a singular pose, or too few joints); pass damping > 0 '
                         'or cutoff > 0 for the singularity-robust inverse')
    inverse = np.where(kept, 1.0 / np.where(kept, s + damping, 1.0), 0.0)
    with np.errstate(divide='ignore'):
        condition = np.where(s[..., 0] > 0.0, s_max[..., 0] / np.abs(s[..., 0]), np.inf)
    return (U * inverse[..., None, :]) @ np.swapaxes(U, -1, -2), condition


def operational_space(model, q, frame, damping=0.0, cutoff=0.0, data=None):
    """J, M, Λ, J̄ = M⁻¹JᵀΛ, N = 1 − J̄J and κ(Φ) of ``frame`` at q (module docstring).

    Λ = robust_inverse(J M⁻¹ Jᵀ, damping, cutoff); with both zero Λ = Φ⁻¹ exactly, and a
    singular Φ raises ValueError. With damping > 0, J J̄ = Φ(Φ + damping·1)⁻¹ ≠ 1, so N is only
    approximately a projector (J N = O(damping)).
    """
    J = frame_jacobian(model, q, frame, LOCAL_WORLD_ALIGNED, data=data)
    M = mass_matrix(model, q, data=data)
    M_inv_Jt = np.linalg.solve(M, np.swapaxes(J, -1, -2))
    Lambda, condition = robust_inverse(J @ M_inv_Jt, damping, cutoff)
    J_bar = M_inv_Jt @ Lambda
    N = np.eye(model.nv) - J_bar @ J
    return TaskQuantities(J, M, Lambda, J_bar, N, condition)


def dynamically_consistent_inverse(model, q, frame, damping=0.0, cutoff=0.0, data=None):
    """J̄ = M⁻¹ Jᵀ Λ (nv x 6), Λ the singularity-robust task-space inertia (operational_space)."""
    return operational_space(model, q, frame, damping, cutoff, data).J_bar


def null_space_projector(model, q, frame, damping=0.0, cutoff=0.0, data=None):
    """N = 1 − J̄ J (nv x nv); torques are projected by Nᵀ (operational_space)."""
    return operational_space(model, q, frame, damping, cutoff, data).N


def rotation_log(R):
    """ω = log(R) as a rotation vector (|ω| ≤ π) of a rotation matrix (..., 3, 3) (L&P §3.2.3.3).

    θ = atan2(|s|, (tr R − 1) / 2) with s = vee(R − Rᵀ) / 2 = sin θ â; ω = θ s / sin θ for
    θ ≤ π/2, and near π (where s vanishes) â from the symmetric part
    (R + Rᵀ) / 2 − cos θ · 1 = (1 − cos θ) â âᵀ, signed along s.
    """
    R = np.asarray(R, dtype=float)
    s = 0.5 * np.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0],
                        R[..., 1, 0] - R[..., 0, 1]], axis=-1)
    c = np.clip(0.5 * (np.trace(R, axis1=-2, axis2=-1) - 1.0), -1.0, 1.0)
    sin = np.linalg.norm(s, axis=-1)
    theta = np.arctan2(sin, c)
    small = np.where(sin > 1e-12, theta / np.where(sin > 1e-12, sin, 1.0), 1.0 + theta ** 2 / 6)
    B = 0.5 * (R + np.swapaxes(R, -1, -2)) - c[..., None, None] * np.eye(3)
    k = np.argmax(np.diagonal(B, axis1=-2, axis2=-1), axis=-1)
    column = np.take_along_axis(B, k[..., None, None], axis=-1)[..., 0]
    axis = column / np.linalg.norm(column, axis=-1, keepdims=True).clip(1e-300)
    axis = np.where((np.sum(axis * s, axis=-1) < 0)[..., None], -axis, axis)
    return np.where((c < 0)[..., None], theta[..., None] * axis, small[..., None] * s)


def pose_error(T_d, T):
    """e = (log(R_d Rᵀ), p_d − p) (6, angular first, base axes) from pose T to T_d (4x4, ...).

    R_d = exp([e_ω]) R: e_ω is the rotation from R to R_d in base axes, so that for small errors
    ė = ẋ_d − ẋ with the LOCAL_WORLD_ALIGNED twists (ω, ṗ).
    """
    T_d, T = np.asarray(T_d, dtype=float), np.asarray(T, dtype=float)
    R_err = T_d[..., :3, :3] @ np.swapaxes(T[..., :3, :3], -1, -2)
    return np.concatenate([rotation_log(R_err), T_d[..., :3, 3] - T[..., :3, 3]], axis=-1)
