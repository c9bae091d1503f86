"""Forward kinematics: body poses and joint screws by the product of exponentials (L&P ch. 4).

In the kernels' body frames (model.py) every joint turns about, or slides along, its z axis:
A_i = (e_z, 0) or (0, e_z), and exp([A_i] q_i) is a plane rotation or a shift along z.
``forward_kinematics`` fills, for every body ``i`` of the workspace, the pose of its frame in the
base frame ``T_{0,i} = T_{0,λ(i)} X_tree,i exp([A_i] q_i)`` and its joint screw in base coordinates
``S_i = Ad_{T_{0,i}} A_i`` (the columns of the space Jacobian, L&P eq. 5.11).
"""
import numpy as np

from .._jit import jit
from ..layout import BODY_PARENT, BODY_POS, BODY_ROT, BODY_TYPE, PRISMATIC, WS_P, WS_R, WS_S
from ..spatial import ZERO, add, cross, load3, load9, rotate, rotation_product, scale, store


@jit
def joint_transform(table, i, qi):
    """(R, p) = X_tree,i exp([A_i] q_i): body i's frame in its parent's frame."""
    R, p = load9(table, i, BODY_ROT), load3(table, i, BODY_POS)
    if table[i, BODY_TYPE] == PRISMATIC:
        return R, add(p, scale((R[2], R[5], R[8]), qi))
    c, s = np.cos(qi), np.sin(qi)   # R Rz(q): columns (c x + s y, c y - s x, z)
    return (c * R[0] + s * R[1], c * R[1] - s * R[0], R[2],
            c * R[3] + s * R[4], c * R[4] - s * R[3], R[5],
            c * R[6] + s * R[7], c * R[7] - s * R[6], R[8]), p


@jit
def revolute(table, i):
    """True for a revolute joint, False for a prismatic one."""
    return table[i, BODY_TYPE] != PRISMATIC


@jit
def add_joint_motion(revolute, w, v, x):
    """(w, v) + A_i x."""
    if revolute:
        return (w[0], w[1], w[2] + x), v
    return w, (v[0], v[1], v[2] + x)


@jit
def cross_joint_motion(revolute, w, v, x):
    """ad_V A_i x = (w × e_z, v × e_z) x, or (0, w × e_z) x for a prismatic joint (L&P eq. 8.38)."""
    w_z = (w[1] * x, -w[0] * x, 0.0)
    if revolute:
        return w_z, (v[1] * x, -v[0] * x, 0.0)
    return ZERO, w_z


@jit
def joint_force(revolute, m, f):
    """A_i^T F for a wrench F = (m, f): the z moment, or the z force."""
    return m[2] if revolute else f[2]


@jit
def forward_kinematics(table, q, ws):
    """Base-frame poses T_{0,i} and joint screws S_i of every body."""
    for i in range(table.shape[0]):
        R, p = joint_transform(table, i, q[i])
        parent = int(table[i, BODY_PARENT])
        if parent >= 0:
            R_parent = load9(ws, parent, WS_R)
            R, p = rotation_product(R_parent, R), add(rotate(R_parent, p), load3(ws, parent, WS_P))
        store(ws, i, WS_R, R)
        store(ws, i, WS_P, p)
        z = (R[2], R[5], R[8])   # S = Ad_T A: (z, p × z) or (0, z)
        if revolute(table, i):
            store(ws, i, WS_S, z)
            store(ws, i, WS_S + 3, cross(p, z))
        else:
            store(ws, i, WS_S, ZERO)
            store(ws, i, WS_S + 3, z)
