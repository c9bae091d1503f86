"""Mass matrix by the composite-rigid-body algorithm, in base coordinates (Featherstone §6.2).

With S_j the joint screws and G_i the spatial inertias in base coordinates, the mass matrix
M = Σ_i J_i^T G_i J_i (L&P eq. 8.59) has entries M_kj = S_k^T G^c_j S_j for k an ancestor of j (or
j itself), where G^c_j = Σ_{i in subtree(j)} G_i is the composite inertia of the subtree; in base
coordinates composites are plain sums. Cost O(n·depth) after an O(n) kinematics pass.
"""
import numpy as np

from .._jit import jit
from ..arguments import joint_vector, workspace
from ..model import BODY_INERTIA, BODY_WIDTH, WS_IC, WS_P, WS_R, WS_S, WS_TMP
from ..spatial import inertia_times_motion, transform_inertia
from .kinematics import forward_kinematics


@jit
def composite_inertias(topology, body, ws):
    """G^c_i in base coordinates for every body (needs forward_kinematics)."""
    nb = topology.shape[0]
    for i in range(nb):
        transform_inertia(body[i, BODY_INERTIA:BODY_WIDTH], ws[i, WS_R:WS_R + 9],
                          ws[i, WS_P:WS_P + 3], ws[i, WS_IC:WS_IC + 10])
    for i in range(nb - 1, 0, -1):
        parent = topology[i, 0]
        if parent >= 0:
            ws[parent, WS_IC:WS_IC + 10] += ws[i, WS_IC:WS_IC + 10]


@jit
def crba_kernel(topology, body, q, ws, M):
    """M(q) (symmetric, both triangles filled)."""
    M[:, :] = 0.0
    forward_kinematics(topology, body, q, ws)
    composite_inertias(topology, body, ws)
    F = ws[0, WS_TMP:WS_TMP + 6]
    for j in range(topology.shape[0]):
        inertia_times_motion(ws[j, WS_IC:WS_IC + 10], ws[j, WS_S:WS_S + 6], F)
        k = j
        while k >= 0:
            S = ws[k, WS_S:WS_S + 6]
            value = S[0] * F[0] + S[1] * F[1] + S[2] * F[2] + S[3] * F[3] + S[4] * F[4] + S[5] * F[5]
            M[k, j] = value
            M[j, k] = value
            k = topology[k, 0]


def mass_matrix(model, q, data=None):
    """Joint-space mass matrix M(q), symmetric positive definite."""
    M = np.empty((model.nv, model.nv))
    crba_kernel(model.topology, model.body, joint_vector(model, q, 'q'), workspace(model, data).ws, M)
    return M
