"""Articulated-body pivots D_i = A_i^T I^A_i A_i: the pivots of M = U D U^T (Featherstone ch. 6-7).

With the joints a body carries free, D_i is the inertia joint i moves; eliminating children
before parents factors M = U D U^T, so M is positive definite iff every D_i > 0. Computed in body
coordinates (numpy, once per model: the loader's singularity check), they are free of the
round-off that distances from the base bring to the kernels.
"""
import numpy as np

from ..layout import PRISMATIC
from ..spatial import adjoint_inverse, inertia_matrix, joint_motion


def articulated_pivots(model, q):
    """Pivots D_i at q (one coordinate per body), and their round-off scales.

    I^A_i = G_i + Σ over children c of X_c^T (I^A_c - U_c U_c^T / D_c) X_c with U_c = I^A_c A_c
    and D_c = A_c^T U_c (the articulated-body inertias of Featherstone's Rigid Body Dynamics
    Algorithms, eq. 7.23), X_c the twist transform parent -> child.
    The scale is that of the composite inertia G^c_i: tr(I_O) / 2 + m |p_i|^2 for a revolute
    joint (I_O about the body origin, p_i that origin in the base frame), m for a prismatic one.
    """
    T_parent = [X @ joint_motion(kind, axis, q_i) for X, kind, axis, q_i in
                zip(model.joint_placement, model.joint_type, model.joint_axis, q)]
    T_base = []
    for T, parent in zip(T_parent, model.parent):
        T_base.append(T_base[parent] @ T if parent >= 0 else T)
    composite = [inertia_matrix(parameters) for parameters in model.inertia]
    articulated = [G.copy() for G in composite]
    pivot, scale = np.empty(model.nb), np.empty(model.nb)
    for i in reversed(range(model.nb)):
        prismatic = model.joint_type[i] == PRISMATIC
        A = np.concatenate([np.zeros(3), model.joint_axis[i]] if prismatic else
                           [model.joint_axis[i], np.zeros(3)])
        U = articulated[i] @ A
        pivot[i] = A @ U
        G, p = composite[i], T_base[i][:3, 3]
        scale[i] = G[3, 3] if prismatic else np.trace(G[:3, :3]) / 2 + G[3, 3] * (p @ p)
        parent = model.parent[i]
        if parent >= 0:
            X = adjoint_inverse(T_parent[i])
            composite[parent] += X.T @ G @ X
            if pivot[i] > 0.0:  # else the model is refused at joint i
                articulated[parent] += X.T @ (articulated[i] - np.outer(U, U) / pivot[i]) @ X
    return pivot, scale
