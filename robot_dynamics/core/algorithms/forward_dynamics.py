"""Forward dynamics q̈ = M(q)^{-1} (τ + Σ J_i^T F_ext,i - C q̇ - g - τ_f) by CRBA and Cholesky.

L&P §8.5. M includes the joints' armature, τ_f(q̇) is their friction (both from rnea_state and
mass_matrix_state, model.py).
"""
import numpy as np
from numba import prange

from .._jit import jit
from ..arguments import (F64, NO_WRENCHES, NOT_POSITIVE_DEFINITE, argument_error, joint_arrays,
                         state_status, workspace, wrenches)
from ..layout import WS_M
from ..mimic import solve
from .batch import chunk, chunk_count, wrench_row
from .crba import mass_matrix, mass_matrix_state
from .linalg import cholesky, cholesky_solve
from .rnea import rnea, rnea_state


@jit
def forward_dynamics_state(table, q, v, tau, f_ext, ws, qdd):
    """q̈ = M^{-1} (τ - rnea(q, q̇, 0, f_ext)) of one state; False if M is not positive definite."""
    rnea_state(table, q, v, None, f_ext, ws, qdd)
    for i in range(qdd.shape[0]):
        qdd[i] = tau[i] - qdd[i]
    M = ws[:, WS_M:WS_M + table.shape[0]]
    mass_matrix_state(table, q, ws, M)
    if not cholesky(M):
        return False
    cholesky_solve(M, qdd)
    return True


@jit
def forward_dynamics_kernel(table, q, v, tau, f_ext, ws, qdd):
    """forward_dynamics_state for one state or each row of 2-D q, v, τ; returns the status."""
    status = state_status(table, ws, q, v, tau, f_ext)
    failures = 0
    if status == 0 and q.ndim == 1 and v.ndim == 1 and tau.ndim == 1 and f_ext.ndim == 2:
        if not forward_dynamics_state(table, q, v, tau, f_ext, ws, qdd):
            failures += 1
    elif (status == 0 and q.ndim == 2 and v.ndim == 2 and tau.ndim == 2
          and (f_ext.ndim == 2 or f_ext.ndim == 3)):
        for c in prange(chunk_count(q)):
            scratch = np.empty_like(ws)
            for k in chunk(c, q):
                if not forward_dynamics_state(table, q[k], v[k], tau[k], wrench_row(f_ext, k),
                                              scratch, qdd[k]):
                    failures += 1
    return NOT_POSITIVE_DEFINITE if failures else status


def forward_dynamics(model, q, v, tau, f_ext=None, data=None):
    """Joint accelerations q̈ produced by joint torques τ (and body wrenches f_ext) at (q, q̇).

    With mimic joints, q̈ solves M q̈ = τ - rnea(q, q̇, 0, f_ext) in independent coordinates.
    """
    if model.mimic:
        tau, = joint_arrays(model, tau=tau)
        bias = rnea(model, q, v, np.zeros(np.shape(q)), f_ext, data)
        if tau.shape != bias.shape:
            raise ValueError(f'tau must have the shape of q, {bias.shape}, got shape {tau.shape}')
        return solve(mass_matrix(model, q, data), tau - bias)
    if not (type(q) is type(v) is type(tau) is np.ndarray
            and q.dtype is v.dtype is tau.dtype is F64):
        q, v, tau = joint_arrays(model, q=q, v=v, tau=tau)
    f = NO_WRENCHES if f_ext is None else wrenches(model, f_ext)
    qdd = np.empty(q.shape)
    ws = model.workspaces.ws if data is None else workspace(model, data)
    status = forward_dynamics_kernel(model.table, q, v, tau, f, ws, qdd)
    if status:
        raise argument_error(model, status, q=q, v=v, tau=tau, f_ext=f)
    return qdd
