"""Christoffel-consistent Coriolis matrix C(q, q̇), Ṁ - 2C skew-symmetric (L&P §8.4, Spong §6.3).

With body Jacobians J_i in base coordinates, M = Σ J_i^T G_i J_i, and the Newton-Euler wrench
G_i V̇_i - ad_{V_i}^T G_i V_i (L&P eq. 8.42) give C = Σ_i J_i^T (G_i J̇_i + B_i J_i) with

    B_i = -½ (ad_{V_i}^T G_i + G_i ad_{V_i} + Ψ(G_i V_i)),   Ψ(h) V = ad_V^T h,

so that C q̇ = c(q, q̇) and C + C^T = Ṁ (Ġ_i = -ad^T G - G ad in base coordinates). Being
linear in q̇ with both properties, C is the unique Christoffel matrix C_kj = Σ_i Γ_kji q̇_i. The
columns of J̇_i are Ṡ_j = ad_{V_j} S_j, so for k an ancestor of j

    C_kj = S_k^T (G^c_j Ṡ_j + B^c_j S_j),   C_jk = S_j^T (G^c_j Ṡ_k + B^c_j S_k),

with composites summed over subtrees as in the CRBA. The joints' armature is a constant term of M
and their friction is no Coriolis force: neither enters C (model.py).
"""
import numpy as np
from numba import prange

from .._jit import jit
from ..arguments import F64, argument_error, joint_arrays, state_status, workspace
from ..layout import BODY_INERTIA, BODY_PARENT, WS_BC, WS_IB, WS_P, WS_R, WS_S, WS_SD, WS_VW
from ..mimic import MATRIX, reduced
from ..spatial import (accumulate, add, inertia_times_motion, load3, load9, load10,
                       motion_cross, scale, store, transform_inertia)
from .batch import chunk, chunk_count
from .kinematics import forward_kinematics


@jit
def _six(w, v):
    return (w[0], w[1], w[2], v[0], v[1], v[2])


@jit
def _dot6(x, y):
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3] + x[4] * y[4] + x[5] * y[5]


@jit
def b_entry(r, c):
    """The workspace column of entry (r, c) of B_i, stored by rows at WS_BC."""
    return WS_BC + 6 * r + c


@jit
def _skew_into(ws, i, row, col, x):
    """Add [x] to the 3x3 block of B_i at (row, col)."""
    ws[i, b_entry(row, col + 1)] -= x[2]
    ws[i, b_entry(row, col + 2)] += x[1]
    ws[i, b_entry(row + 1, col)] += x[2]
    ws[i, b_entry(row + 1, col + 2)] -= x[0]
    ws[i, b_entry(row + 2, col)] -= x[1]
    ws[i, b_entry(row + 2, col + 1)] += x[0]


@jit
def coriolis_term(G, w, v, ws, i):
    """B_i = -½ (X + X^T + Ψ(G V)) with X = G ad_V, into ws[i, b_entry(r, c)]."""
    for c in range(6):   # column c of X = G ad_V e_c
        e_w = (1.0 if c == 0 else 0.0, 1.0 if c == 1 else 0.0, 1.0 if c == 2 else 0.0)
        e_v = (1.0 if c == 3 else 0.0, 1.0 if c == 4 else 0.0, 1.0 if c == 5 else 0.0)
        x_w, x_v = motion_cross(w, v, e_w, e_v)
        x_m, x_f = inertia_times_motion(G, x_w, x_v)
        for r in range(3):
            ws[i, b_entry(r, c)] = x_m[r]
            ws[i, b_entry(r + 3, c)] = x_f[r]
    for r in range(6):
        for c in range(r, 6):
            x = ws[i, b_entry(r, c)] + ws[i, b_entry(c, r)]
            ws[i, b_entry(r, c)] = ws[i, b_entry(c, r)] = x
    h_m, h_f = inertia_times_motion(G, w, v)   # Ψ(h) = [[[h_m], [h_f]], [[h_f], 0]]
    _skew_into(ws, i, 0, 0, h_m)
    _skew_into(ws, i, 0, 3, h_f)
    _skew_into(ws, i, 3, 0, h_f)
    for k in range(WS_BC, WS_BC + 36):
        ws[i, k] *= -0.5


@jit
def _times_b(ws, i, x, transpose):
    """B_i x, or B_i^T x, for a 6-tuple x."""
    y0 = y1 = y2 = y3 = y4 = y5 = 0.0
    for c in range(6):
        xc = x[c]
        if transpose:   # column c of B^T is row c of B
            y0 += ws[i, b_entry(c, 0)] * xc
            y1 += ws[i, b_entry(c, 1)] * xc
            y2 += ws[i, b_entry(c, 2)] * xc
            y3 += ws[i, b_entry(c, 3)] * xc
            y4 += ws[i, b_entry(c, 4)] * xc
            y5 += ws[i, b_entry(c, 5)] * xc
        else:
            y0 += ws[i, b_entry(0, c)] * xc
            y1 += ws[i, b_entry(1, c)] * xc
            y2 += ws[i, b_entry(2, c)] * xc
            y3 += ws[i, b_entry(3, c)] * xc
            y4 += ws[i, b_entry(4, c)] * xc
            y5 += ws[i, b_entry(5, c)] * xc
    return (y0, y1, y2, y3, y4, y5)


@jit
def coriolis_state(table, q, v, ws, C):
    """C(q, q̇) (nv x nv) of one state."""
    nb = table.shape[0]
    C[:, :] = 0.0
    forward_kinematics(table, q, ws)
    for i in range(nb):   # base-coordinate twist V_i = V_λ + S_i q̇_i, Ṡ_i = ad_{V_i} S_i, G_i, B_i
        s_w, s_v = load3(ws, i, WS_S), load3(ws, i, WS_S + 3)
        w, u = scale(s_w, v[i]), scale(s_v, v[i])
        parent = int(table[i, BODY_PARENT])
        if parent >= 0:
            w, u = add(w, load3(ws, parent, WS_VW)), add(u, load3(ws, parent, WS_VW + 3))
        store(ws, i, WS_VW, w)
        store(ws, i, WS_VW + 3, u)
        d_w, d_v = motion_cross(w, u, s_w, s_v)
        store(ws, i, WS_SD, d_w)
        store(ws, i, WS_SD + 3, d_v)
        G = transform_inertia(load10(table, i, BODY_INERTIA), load9(ws, i, WS_R),
                              load3(ws, i, WS_P))
        store(ws, i, WS_IB, G)
        coriolis_term(G, w, u, ws, i)
    for i in range(nb - 1, -1, -1):   # composites G^c, B^c of the subtrees
        parent = int(table[i, BODY_PARENT])
        if parent >= 0:
            accumulate(ws, parent, WS_IB, load10(ws, i, WS_IB))
            for k in range(WS_BC, WS_BC + 36):
                ws[parent, k] += ws[i, k]
    for j in range(nb):
        G = load10(ws, j, WS_IB)
        s_w, s_v = load3(ws, j, WS_S), load3(ws, j, WS_S + 3)
        S_j = _six(s_w, s_v)
        g_m, g_f = inertia_times_motion(G, load3(ws, j, WS_SD), load3(ws, j, WS_SD + 3))
        B_S = _times_b(ws, j, S_j, False)
        column = add(g_m, (B_S[0], B_S[1], B_S[2])), add(g_f, (B_S[3], B_S[4], B_S[5]))
        c_j = _six(column[0], column[1])                          # G^c_j Ṡ_j + B^c_j S_j
        GS_m, GS_f = inertia_times_motion(G, s_w, s_v)
        GS_j, BtS_j = _six(GS_m, GS_f), _times_b(ws, j, S_j, True)   # G^c_j S_j, B^c_j^T S_j
        k = j
        while k >= 0:   # j and its ancestors
            S_k = _six(load3(ws, k, WS_S), load3(ws, k, WS_S + 3))
            C[k, j] = _dot6(S_k, c_j)
            if k != j:
                Sd_k = _six(load3(ws, k, WS_SD), load3(ws, k, WS_SD + 3))
                C[j, k] = _dot6(GS_j, Sd_k) + _dot6(BtS_j, S_k)
            k = int(table[k, BODY_PARENT])


@jit
def coriolis_kernel(table, q, v, ws, C):
    """coriolis_state for one state or each row of 2-D q, v; returns the status."""
    status = state_status(table, ws, q, v, None, None)
    if status == 0 and q.ndim == 1 and v.ndim == 1:
        coriolis_state(table, q, v, ws, C)
    elif status == 0 and q.ndim == 2 and v.ndim == 2:
        for c in prange(chunk_count(q)):
            scratch = np.empty_like(ws)
            for k in chunk(c, q):
                coriolis_state(table, q[k], v[k], scratch, C[k])
    return status


def coriolis_matrix(model, q, v, data=None):
    """C(q, q̇) with C q̇ = rnea(q, q̇, 0) - g(q) - τ_f(q̇) and Ṁ = C + C^T.

    (N, nv, nv) for N states.
    """
    if model.mimic:
        return reduced(coriolis_matrix, model, q, v, out=MATRIX, data=data)
    if not (type(q) is type(v) is np.ndarray and q.dtype is v.dtype is F64):
        q, v = joint_arrays(model, q=q, v=v)
    nv = len(model.table)
    C = np.empty((nv, nv) if q.ndim == 1 else q.shape[:-1] + (nv, nv))
    ws = model.workspaces.ws if data is None else workspace(model, data)
    status = coriolis_kernel(model.table, q, v, ws, C)
    if status:
        raise argument_error(model, status, q=q, v=v)
    return C
