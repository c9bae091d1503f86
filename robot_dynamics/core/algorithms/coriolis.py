"""Christoffel-consistent Coriolis matrix C(q, q̇), Ṁ - 2C skew-symmetric (L&P §8.4; Spong §6.3).

With body Jacobians J_i in base coordinates, M = Σ J_i^T G_i J_i, and the Newton-Euler wrench
G_i V̇_i - ad_{V_i}^T G_i V_i (L&P eq. 8.42) give C = Σ_i J_i^T (G_i J̇_i + B_i J_i) with

    B_i = -½ (ad_{V_i}^T G_i + G_i ad_{V_i} + Ψ(G_i V_i)),   Ψ(h) V = ad_V^T h,

so that C q̇ = c(q, q̇) and C + C^T = Ṁ (Ġ_i = -ad^T G - G ad in base coordinates). Being linear in
q̇ with both properties, C is the unique Christoffel matrix C_kj = Σ_i Γ_kji q̇_i. The columns of J̇_i
are Ṡ_j = ad_{V_j} S_j, so C_kj = S_k^T (G^c_j Ṡ_j + B^c_j S_j) and C_jk = S_j^T (G^c_j Ṡ_k + B^c_j S_k)
for k an ancestor of j, with composites summed over subtrees as in the CRBA.
"""
import numpy as np

from .._jit import jit
from ..arguments import joint_vector, workspace
from ..model import (BODY_INERTIA, BODY_WIDTH, WS_BC, WS_IC, WS_P, WS_R, WS_S, WS_SD, WS_TMP,
                     WS_VW)
from ..spatial import inertia_times_motion, transform_inertia
from .crba import composite_inertias
from .kinematics import forward_kinematics


@jit
def _motion_cross(V, S, out):
    """out = ad_V S = (w x s_w, v x s_w + w x s_v)."""
    w0, w1, w2, v0, v1, v2 = V[0], V[1], V[2], V[3], V[4], V[5]
    out[0] = w1 * S[2] - w2 * S[1]
    out[1] = w2 * S[0] - w0 * S[2]
    out[2] = w0 * S[1] - w1 * S[0]
    out[3] = v1 * S[2] - v2 * S[1] + w1 * S[5] - w2 * S[4]
    out[4] = v2 * S[0] - v0 * S[2] + w2 * S[3] - w0 * S[5]
    out[5] = v0 * S[1] - v1 * S[0] + w0 * S[4] - w1 * S[3]


@jit
def _coriolis_term(inertia, V, tmp, B):
    """B = -½ (X + X^T + Ψ(G V)) with X = G ad_V, written into the flat 6x6 B."""
    for c in range(6):  # column c of X = G (ad_V e_c)
        for k in range(6):
            tmp[k] = 0.0
        tmp[c] = 1.0
        _motion_cross(V, tmp, tmp[6:12])
        inertia_times_motion(inertia, tmp[6:12], tmp[0:6])
        for r in range(6):
            B[6 * r + c] = tmp[r]
    h = tmp[6:12]
    inertia_times_motion(inertia, V, h)
    for r in range(6):
        for c in range(r, 6):
            x = B[6 * r + c] + B[6 * c + r]
            B[6 * r + c] = x
            B[6 * c + r] = x
    # Ψ(h) = [[m^, f^], [f^, 0]] for h = (m, f)
    m0, m1, m2, f0, f1, f2 = h[0], h[1], h[2], h[3], h[4], h[5]
    for (r, c, x) in ((0, 1, -m2), (0, 2, m1), (1, 0, m2), (1, 2, -m0), (2, 0, -m1), (2, 1, m0),
                      (0, 4, -f2), (0, 5, f1), (1, 3, f2), (1, 5, -f0), (2, 3, -f1), (2, 4, f0),
                      (3, 1, -f2), (3, 2, f1), (4, 0, f2), (4, 2, -f0), (5, 0, -f1), (5, 1, f0)):
        B[6 * r + c] += x
    for k in range(36):
        B[k] *= -0.5


@jit
def _bilinear(ws, i, j, k):
    """S_j^T (G^c_i Ṡ_k + B^c_i S_k)."""
    tmp = ws[0, WS_TMP:WS_TMP + 6]
    inertia_times_motion(ws[i, WS_IC:WS_IC + 10], ws[k, WS_SD:WS_SD + 6], tmp)
    B, Sk, Sj = ws[i, WS_BC:WS_BC + 36], ws[k, WS_S:WS_S + 6], ws[j, WS_S:WS_S + 6]
    total = 0.0
    for r in range(6):
        row = tmp[r]
        for c in range(6):
            row += B[6 * r + c] * Sk[c]
        total += Sj[r] * row
    return total


@jit
def coriolis_kernel(topology, body, q, v, ws, C):
    """C(q, q̇) (nv x nv)."""
    nb = topology.shape[0]
    C[:, :] = 0.0
    forward_kinematics(topology, body, q, ws)
    for i in range(nb):  # base-coordinate twists V_i = V_λ + S_i q̇_i and Ṡ_i = ad_{V_i} S_i
        Vw, S = ws[i, WS_VW:WS_VW + 6], ws[i, WS_S:WS_S + 6]
        parent = topology[i, 0]
        for c in range(6):
            Vw[c] = (ws[parent, WS_VW + c] if parent >= 0 else 0.0) + S[c] * v[i]
        _motion_cross(Vw, S, ws[i, WS_SD:WS_SD + 6])
    for i in range(nb):  # B_i from the body's own inertia in base coordinates
        G = ws[i, WS_TMP + 12:WS_TMP + 22]
        transform_inertia(body[i, BODY_INERTIA:BODY_WIDTH], ws[i, WS_R:WS_R + 9],
                          ws[i, WS_P:WS_P + 3], G)
        _coriolis_term(G, ws[i, WS_VW:WS_VW + 6], ws[i, WS_TMP:WS_TMP + 12],
                       ws[i, WS_BC:WS_BC + 36])
    composite_inertias(topology, body, ws)
    for i in range(nb - 1, 0, -1):
        parent = topology[i, 0]
        if parent >= 0:
            ws[parent, WS_BC:WS_BC + 36] += ws[i, WS_BC:WS_BC + 36]
    for j in range(nb):
        k = j
        while k >= 0:
            C[k, j] = _bilinear(ws, j, k, j)
            if k != j:
                C[j, k] = _bilinear(ws, j, j, k)
            k = topology[k, 0]


def coriolis_matrix(model, q, v, data=None):
    """C(q, q̇) with C q̇ = rnea(q, q̇, 0) - g(q) and Ṁ = C + C^T."""
    C = np.empty((model.nv, model.nv))
    coriolis_kernel(model.topology, model.body, joint_vector(model, q, 'q'),
                    joint_vector(model, v, 'v'), workspace(model, data).ws, C)
    return C
