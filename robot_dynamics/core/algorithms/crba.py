"""Mass matrix by the composite-rigid-body algorithm in body coordinates (Featherstone §6.2).

With G^c_i = Σ_{k in subtree(i)} G_k the composite inertia of the subtree of body i in its own
frame (accumulated from the leaves, each composite moved into its parent's frame), the mass
matrix M = Σ_i J_i^T G_i J_i (L&P §8.4) has the entries M_ij = A_i^T F_i for i = j or an
ancestor of j, where F_j = G^c_j A_j and F_λ(i) = Ad^T_{T_{i,λ}} F_i carries that wrench towards
the base. The joints' armature I_a adds to the diagonal, M_jj += I_a,j (model.py). Cost
O(n·depth).
"""
import numpy as np
from numba import prange

from .._jit import jit, parallel, strict
from ..arguments import (F64, MATRIX_TYPE, TABLE_TYPE, VECTOR_TYPE, WORKSPACE_TYPE,
                         argument_error, copy_into, joint_arrays, matrix_status, output,
                         state_status, workspace)
from ..layout import BODY_ARMATURE, BODY_INERTIA, BODY_PARENT, WS_IC, WS_PREL, WS_RREL
from ..mimic import MATRIX, reduced
from ..spatial import accumulate, force_to_parent, load3, load9, load10, store, transform_inertia
from .batch import chunk, chunk_count
from .kinematics import joint_force, joint_transform, revolute


@jit
def composite_times_axis(ws, j, turns):
    """G^c_j A_j for A_j = (e_z, 0): (I e_z, -h × e_z); for (0, e_z): (h × e_z, m e_z)."""
    m, h_x, h_y, _, _, _, Izz, _, Ixz, Iyz = load10(ws, j, WS_IC)
    if turns:   # the z column of I is (Ixz, Iyz, Izz)
        return (Ixz, Iyz, Izz), (-h_y, h_x, 0.0)
    return (h_y, -h_x, 0.0), (0.0, 0.0, m)


@jit
def mass_matrix_state(table, q, ws, M):
    """M(q) of one state, armature included (symmetric, both triangles filled)."""
    nb = table.shape[0]
    M[:, :] = 0.0
    for i in range(nb):   # T_{λ,i} and the body's own inertia, the start of its composite
        R, p = joint_transform(table, i, q[i])
        store(ws, i, WS_RREL, R)
        store(ws, i, WS_PREL, p)
        store(ws, i, WS_IC, load10(table, i, BODY_INERTIA))
    for i in range(nb - 1, -1, -1):   # G^c_λ += G^c_i seen from the parent's frame
        parent = int(table[i, BODY_PARENT])
        if parent >= 0:
            accumulate(ws, parent, WS_IC, transform_inertia(
                load10(ws, i, WS_IC), load9(ws, i, WS_RREL), load3(ws, i, WS_PREL)))
    for j in range(nb):
        m, f = composite_times_axis(ws, j, revolute(table, j))   # F = G^c_j A_j, then to the base
        M[j, j] = joint_force(revolute(table, j), m, f) + table[j, BODY_ARMATURE]
        i, parent = j, int(table[j, BODY_PARENT])
        while parent >= 0:
            m, f = force_to_parent(load9(ws, i, WS_RREL), load3(ws, i, WS_PREL), m, f)
            i, parent = parent, int(table[parent, BODY_PARENT])
            M[i, j] = M[j, i] = joint_force(revolute(table, i), m, f)


@jit
def mass_matrix_kernel(table, q, ws, M):
    """mass_matrix_state for one state or each row of a 2-D q; returns the status."""
    status = matrix_status(state_status(table, ws, q, None, None, None), q, M, table.shape[0])
    if status == 0 and q.ndim == 1:
        mass_matrix_state(table, q, ws, M)
    elif status == 0 and q.ndim == 2:
        for c in prange(chunk_count(q)):
            scratch = np.empty_like(ws)
            for k in chunk(c, q):
                mass_matrix_state(table, q[k], scratch, M[k])
    return status


mass_matrix_parallel = parallel(mass_matrix_kernel)
MASS_MATRIX_ONE = strict('MASS_MATRIX_ONE', globals(), mass_matrix_kernel, TABLE_TYPE,
                         VECTOR_TYPE, WORKSPACE_TYPE, MATRIX_TYPE)   # one state (rnea.RNEA_ONE)


def mass_matrix(model, q, data=None, out=None):
    """Joint-space mass matrix M(q) + diag(armature), symmetric positive definite.

    (N, nv, nv) for q (N, nv). ``out`` as in ``rnea``.
    """
    if data is None and not model.mimic:
        try:   # one state of float64 arrays, else (the error or a bad status) the general path
            nv = len(model.table)   # (not len(q): a batch of N states would make it N x N)
            M = np.empty((nv, nv)) if out is None else out
            if not MASS_MATRIX_ONE(model.table, q, model.workspaces.ws, M):
                return M
        except (TypeError, ValueError):   # no numba type for an argument, or another one
            pass
    if model.mimic:
        return copy_into(out, reduced(mass_matrix, model, q, out=MATRIX, data=data))
    if not (type(q) is np.ndarray and q.dtype is F64):
        q, = joint_arrays(model, q=q)
    nv = len(model.table)
    shape = (nv, nv) if q.ndim == 1 else q.shape[:-1] + (nv, nv)
    M = np.empty(shape) if out is None else output(out, shape)
    ws = model.workspaces.ws if data is None else workspace(model, data)
    status = mass_matrix_kernel(model.table, q, ws, M)
    if status:
        raise argument_error(model, status, q=q)
    return M
