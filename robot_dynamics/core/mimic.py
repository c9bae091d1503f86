"""Mimic joints as dependent coordinates: the one place that maps to and from the bodies' joints.

A mimic joint follows its leader, ``q_m = k q_l + o`` (URDF ``<mimic multiplier offset>``), so the
bodies' coordinates are an affine image of the independent ones (Model.coupling)::

    q_body = G q + o,   q̇_body = G q̇,   q̈_body = G q̈     (G constant, nb x nv)

The kernels run on ``model.full`` (every body's joint independent) and the results come back by
the principle of virtual work, as for any holonomic constraint with constant Jacobian G
(Featherstone, Rigid Body Dynamics Algorithms §8.1): τ = Gᵀ τ_body, M = Gᵀ M_body G,
C = Gᵀ C_body G (so Ṁ = C + Cᵀ holds for the reduced system too), J = J_body G; frame poses,
velocities and bias accelerations are those of the bodies. Forward dynamics and the task-space
inertias are solved in independent coordinates from these (``solve``, ``task_space``).

A public function calls ``reduced`` when ``model.mimic`` is non-empty; without mimic joints it
never gets here, so the hot path is unchanged.
"""
import numpy as np

from .arguments import joint_arrays, joint_shapes

TORQUE, MATRIX, JACOBIAN, REGRESSOR, BODY = 'torque', 'matrix', 'jacobian', 'regressor', 'body'


def reduced(function, model, q, *rates, out, **keywords):
    """``function`` of the bodies' coordinates, in independent ones (out: what its result is).

    q and the rates (velocities, accelerations) are (nv,) or (N, nv); ``out`` is TORQUE (Gᵀ y),
    MATRIX (Gᵀ Y G), JACOBIAN (Y G), REGRESSOR (Gᵀ Y, rows per body) or BODY (unchanged: poses,
    twists).
    """
    G, offset, _ = model.coupling
    names = ('q', 'v', 'a')[:1 + len(rates)]
    arrays = joint_arrays(model, **dict(zip(names, (q, *rates))))
    for name, x in zip(names, arrays):
        if x.ndim > 2 or x.shape[-1] != model.nv or x.shape != arrays[0].shape:
            raise ValueError(f'{name} must have {joint_shapes(model, name)}'
                             + ('' if name == 'q' else ' (the shape of q)')
                             + f', got shape {x.shape}')
    q_body, *rates_body = (x @ G.T for x in arrays)
    y = function(model.full, q_body + offset, *rates_body, **keywords)
    if out == TORQUE:
        return y @ G
    if out == MATRIX:
        return G.T @ y @ G
    if out == JACOBIAN:
        return y @ G
    if out == REGRESSOR:
        return G.T @ y
    return y


def solve(M, b):
    """x = M⁻¹ b by Cholesky, for one or a stack of M (forward dynamics in reduced coordinates)."""
    try:
        L = np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        raise ValueError('mass matrix is not positive definite at this configuration') from None
    y = np.linalg.solve(L, b[..., None])
    return np.linalg.solve(np.swapaxes(L, -1, -2), y)[..., 0]


def task_space(J, M, damping, invert):
    """Φ = J M⁻¹ Jᵀ, or Λ = (Φ + damping·1)⁻¹ (invert), for one or a stack of states.

    Raises numpy's LinAlgError when Λ is asked of a Φ that is not positive definite (as the
    kernel's Cholesky does); the caller names it.
    """
    Phi = J @ np.linalg.solve(M, np.swapaxes(J, -1, -2))
    Phi = (Phi + np.swapaxes(Phi, -1, -2)) / 2
    if not invert:
        return Phi
    L_inv = np.linalg.inv(np.linalg.cholesky(Phi + damping * np.eye(Phi.shape[-1])))
    return np.swapaxes(L_inv, -1, -2) @ L_inv
