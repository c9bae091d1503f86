"""Forward kinematics: body poses and joint screws by the product of exponentials (L&P ch. 4).

``forward_kinematics`` fills, for every body ``i`` of the workspace, the pose of its frame in its
parent's frame at ``q``, ``T_{λ(i),i} = X_tree,i exp([A_i] q_i)``, its pose in the base frame
``T_{0,i} = T_{0,λ(i)} T_{λ(i),i}``, and its joint screw in base coordinates
``S_i = Ad_{T_{0,i}} A_i`` (the columns of the space Jacobian, L&P eq. 5.11).
"""
import numpy as np

from .._jit import jit
from ..model import (BODY_AXIS, BODY_POS, BODY_ROT, PRISMATIC, WS_P, WS_PREL, WS_R, WS_RREL,
                     WS_S)
from ..spatial import compose, homogeneous, rodrigues, rotate


@jit
def joint_transform(topology, body, i, qi, R, p):
    """(R, p) = X_tree,i exp([A_i] q_i): body i's frame in its parent's frame."""
    axis = body[i, BODY_AXIS:BODY_AXIS + 3]
    R_tree = body[i, BODY_ROT:BODY_ROT + 9]
    p_tree = body[i, BODY_POS:BODY_POS + 3]
    if topology[i, 1] == PRISMATIC:
        R[:] = R_tree
        rotate(R_tree, axis, p)
        for k in range(3):
            p[k] = p[k] * qi + p_tree[k]
    else:
        R_joint = rodrigues(axis, qi)
        for r in range(3):
            for c in range(3):
                R[3 * r + c] = (R_tree[3 * r] * R_joint[c] + R_tree[3 * r + 1] * R_joint[3 + c]
                                + R_tree[3 * r + 2] * R_joint[6 + c])
        p[:] = p_tree


@jit
def forward_kinematics(topology, body, q, ws):
    """Relative and base-frame poses of every body, and the joint screws S_i in base coordinates."""
    for i in range(topology.shape[0]):
        R_rel, p_rel = ws[i, WS_RREL:WS_RREL + 9], ws[i, WS_PREL:WS_PREL + 3]
        joint_transform(topology, body, i, q[i], R_rel, p_rel)
        parent = topology[i, 0]
        R, p = ws[i, WS_R:WS_R + 9], ws[i, WS_P:WS_P + 3]
        if parent < 0:
            R[:] = R_rel
            p[:] = p_rel
        else:
            compose(ws[parent, WS_R:WS_R + 9], ws[parent, WS_P:WS_P + 3], R_rel, p_rel, R, p)
        S = ws[i, WS_S:WS_S + 6]
        rotate(R, body[i, BODY_AXIS:BODY_AXIS + 3], S[0:3])
        if topology[i, 1] == PRISMATIC:
            S[3:6] = S[0:3]
            S[0:3] = 0.0
        else:  # a revolute screw through p: (w, p x w)
            w0, w1, w2 = S[0], S[1], S[2]
            S[3] = p[1] * w2 - p[2] * w1
            S[4] = p[2] * w0 - p[0] * w2
            S[5] = p[0] * w1 - p[1] * w0


def body_pose(ws, i):
    """4x4 pose of body i in the base frame from a workspace filled by forward_kinematics."""
    if i < 0:
        return np.eye(4)
    return homogeneous(ws[i, WS_R:WS_R + 9], ws[i, WS_P:WS_P + 3])
