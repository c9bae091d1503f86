"""Task-space (operational-space) inertia and effective mass (L&P §8.6, Khatib 1987).

Λ(q) = (J M^{-1} J^T)^{-1} (L&P eq. 8.90), computed as Φ = Y^T Y with Y = L^{-1} J^T, M = L L^T.
The inverse Φ = J M^{-1} J^T (the mobility matrix) is always defined; near a singularity Λ is not,
and ``damping`` > 0 returns the singularity-robust (Φ + damping·1)^{-1}. M is mass_matrix's, the
joints' armature included: the rotors' inertia is felt at the frame too.
"""
import numpy as np
from numba import prange

from .._jit import jit
from ..arguments import (F64, NOT_POSITIVE_DEFINITE, SINGULAR, argument_error, damping_value,
                         joint_arrays, state_status, workspace)
from ..layout import WS_M, WS_Y
from ..mimic import task_space
from .batch import chunk, chunk_count
from .crba import mass_matrix, mass_matrix_state
from .jacobians import LOCAL_WORLD_ALIGNED, frame_jacobian, frame_jacobian_state, reference_code
from .linalg import cholesky, cholesky_inverse, solve_lower


@jit
def task_space_state(table, frames, f, reference, first_row, damping, invert, q, ws, out):
    """Φ = J_r M^{-1} J_r^T, or (Φ + damping·1)^{-1} if ``invert``, into out; the status.

    J_r: the rows first_row.. of the frame Jacobian. The status is 0, NOT_POSITIVE_DEFINITE or
    SINGULAR.
    """
    nb = table.shape[0]
    M = ws[:, WS_M:WS_M + nb]
    mass_matrix_state(table, q, ws, M)
    if not cholesky(M):
        return NOT_POSITIVE_DEFINITE
    J = ws[:, WS_Y:WS_Y + 6].T   # (6, nb): J, then its rows become those of Y^T = (L^{-1} J^T)^T
    frame_jacobian_state(table, frames, f, reference, q, ws, J)
    rows = out.shape[0]
    for r in range(rows):
        solve_lower(M, J[first_row + r])
    for r in range(rows):
        for c in range(r, rows):
            s = 0.0
            for k in range(nb):
                s += J[first_row + r, k] * J[first_row + c, k]
            out[r, c] = out[c, r] = s
    if invert:
        for r in range(rows):
            out[r, r] += damping
        if not cholesky(out):
            return SINGULAR
        cholesky_inverse(out)
    return 0


@jit
def task_space_kernel(table, frames, f, reference, first_row, damping, invert, q, ws, out):
    """task_space_state for one state or each row of a 2-D q; returns the first bad status."""
    status = state_status(table, ws, q, None, None, None)
    if status == 0 and q.ndim == 1:
        status = task_space_state(table, frames, f, reference, first_row, damping, invert, q, ws,
                                  out)
    elif status == 0 and q.ndim == 2:
        worst = 0
        for c in prange(chunk_count(q)):
            scratch = np.empty_like(ws)
            for k in chunk(c, q):
                worst = max(worst, task_space_state(table, frames, f, reference, first_row,
                                                    damping, invert, q[k], scratch, out[k]))
        status = worst
    return status


def _task_space(model, q, frame, reference, first_row, damping, invert, data):
    n = 6 - first_row
    if model.mimic:   # J and M in independent coordinates (mimic.py)
        J = frame_jacobian(model, q, frame, reference, data)[..., first_row:, :]
        try:
            return task_space(J, mass_matrix(model, q, data), damping_value(damping), invert)
        except np.linalg.LinAlgError:
            status = SINGULAR
    else:
        if not (type(q) is np.ndarray and q.dtype is F64):
            q, = joint_arrays(model, q=q)
        out = np.empty((n, n) if q.ndim == 1 else q.shape[:-1] + (n, n))
        ws = model.workspaces.ws if data is None else workspace(model, data)
        status = task_space_kernel(model.table, model.frames, model.frame_index(frame),
                                   reference_code(reference), first_row, damping_value(damping),
                                   invert, q, ws, out)
    if status == SINGULAR:
        what = ('J_v M^-1 J_v^T (3x3 translational mobility)' if first_row else
                'J M^-1 J^T (6x6 task-space mobility)')
        raise ValueError(f'{what} is singular here (fewer than {n} independent task '
                         'directions: a singular pose, or too few joints); pass damping > 0 for '
                         'the singularity-robust inverse')
    if status:
        raise argument_error(model, status, q=q)
    return out


def inverse_task_space_inertia(model, q, frame, reference=LOCAL_WORLD_ALIGNED, data=None):
    """Φ = J M^{-1} J^T (6x6), defined everywhere; its condition number flags singularity."""
    return _task_space(model, q, frame, reference, 0, 0.0, False, data)


def task_space_inertia(model, q, frame, reference=LOCAL_WORLD_ALIGNED, damping=0.0, data=None):
    """Λ = (J M^{-1} J^T + damping·1)^{-1} (6x6): the frame's inertia to wrenches, ``reference``."""
    return _task_space(model, q, frame, reference, 0, damping, True, data)


def translational_inertia(model, q, frame, damping=0.0, data=None):
    """Λ_v = (J_v M^{-1} J_v^T + damping·1)^{-1} (3x3, base axes): inertia to a force at the origin.

    Not the lower-right block of the 6x6 Λ: that one holds the frame's rotation fixed.
    """
    return _task_space(model, q, frame, LOCAL_WORLD_ALIGNED, 3, damping, True, data)


def effective_mass(model, q, frame, direction, data=None):
    """m_u = 1 / (u^T J_v M^{-1} J_v^T u) along the unit direction u (base axes) at the origin."""
    try:
        u = np.asarray(direction, dtype=float)
    except (TypeError, ValueError):
        u = np.full(0, np.nan)
    norm = np.linalg.norm(u) if u.shape == (3,) else np.nan
    if not 0.0 < norm < np.inf:
        raise ValueError(f'direction must be a finite non-zero 3-vector (base axes), got '
                         f'{direction!r}')
    u = u / norm
    Phi = _task_space(model, q, frame, LOCAL_WORLD_ALIGNED, 3, 0.0, False, data)
    return 1.0 / (Phi @ u @ u)
