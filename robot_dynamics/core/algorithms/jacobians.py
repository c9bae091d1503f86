"""Frame poses, Jacobians, velocities and bias accelerations (L&P §5.1).

References (names as in Pinocchio), rows angular first:

- ``WORLD``: space Jacobian, J q̇ = twist in base coordinates (L&P eq. 5.11): columns S_j.
- ``LOCAL_WORLD_ALIGNED``: (ω, ṗ) of the frame origin in base axes: columns (ω_j, v_j + ω_j × p).
- ``LOCAL``: body Jacobian, J q̇ = twist in the frame's own axes (L&P eq. 5.18): R^T times the above.
"""
import enum

import numpy as np

from .._jit import jit
from ..arguments import joint_vector, workspace
from ..model import WS_P, WS_R, WS_S, WS_TMP, WS_V, WS_VD
from ..spatial import compose, homogeneous
from .kinematics import forward_kinematics
from .rnea import forward_pass


class Reference(enum.IntEnum):
    """Frame in which a Jacobian, twist or wrench is expressed."""

    LOCAL = 0
    LOCAL_WORLD_ALIGNED = 1
    WORLD = 2


LOCAL, LOCAL_WORLD_ALIGNED, WORLD = Reference


@jit
def frame_placement_kernel(topology, body, q, b, frame, ws, R, p):
    """Base-frame pose (R, p) of a frame with placement ``frame`` = (R_bf, p_bf) on body b."""
    forward_kinematics(topology, body, q, ws)
    if b < 0:
        R[:] = frame[0:9]
        p[:] = frame[9:12]
    else:
        compose(ws[b, WS_R:WS_R + 9], ws[b, WS_P:WS_P + 3], frame[0:9], frame[9:12], R, p)


@jit
def frame_jacobian_kernel(topology, body, q, b, frame, reference, ws, J):
    """J (6 x nv) of the frame in the given reference."""
    R, p = ws[0, WS_TMP:WS_TMP + 9], ws[0, WS_TMP + 9:WS_TMP + 12]
    frame_placement_kernel(topology, body, q, b, frame, ws, R, p)
    J[:, :] = 0.0
    j = b
    while j >= 0:
        S = ws[j, WS_S:WS_S + 6]
        if reference == 2:
            J[:, j] = S
        else:
            w0, w1, w2 = S[0], S[1], S[2]
            u0 = S[3] + w1 * p[2] - w2 * p[1]
            u1 = S[4] + w2 * p[0] - w0 * p[2]
            u2 = S[5] + w0 * p[1] - w1 * p[0]
            if reference == 1:
                J[0, j], J[1, j], J[2, j], J[3, j], J[4, j], J[5, j] = w0, w1, w2, u0, u1, u2
            else:
                for c in range(3):
                    J[c, j] = R[c] * w0 + R[3 + c] * w1 + R[6 + c] * w2
                    J[3 + c, j] = R[c] * u0 + R[3 + c] * u1 + R[6 + c] * u2
        j = topology[j, 0]


def _frame(model, frame):
    f = model.frame_index(frame)
    return model.frame_body[f], model.frame_table[f]


def frame_pose(model, q, frame, data=None):
    """4x4 pose of a named frame in the base frame."""
    b, placement = _frame(model, frame)
    R, p = np.empty(9), np.empty(3)
    frame_placement_kernel(model.topology, model.body, joint_vector(model, q, 'q'), b, placement,
                           workspace(model, data).ws, R, p)
    return homogeneous(R, p)


def frame_jacobian(model, q, frame, reference=LOCAL_WORLD_ALIGNED, data=None):
    """6 x nv Jacobian of a named frame, angular rows first, in ``reference``."""
    b, placement = _frame(model, frame)
    J = np.empty((6, model.nv))
    frame_jacobian_kernel(model.topology, model.body, joint_vector(model, q, 'q'), b, placement,
                          int(Reference(reference)), workspace(model, data).ws, J)
    return J


def frame_velocity(model, q, v, frame, reference=LOCAL_WORLD_ALIGNED, data=None):
    """J(q) q̇ of a named frame in ``reference``."""
    return frame_jacobian(model, q, frame, reference, data) @ joint_vector(model, v, 'v')


def frame_bias_acceleration(model, q, v, frame, reference=LOCAL_WORLD_ALIGNED, data=None):
    """J̇(q, q̇) q̇: the frame's acceleration at q̈ = 0, without gravity, in ``reference``.

    For ``LOCAL_WORLD_ALIGNED`` this is (ω̇, p̈) of the origin, the classical acceleration.
    """
    b, placement = _frame(model, frame)
    q, v = joint_vector(model, q, 'q'), joint_vector(model, v, 'v')
    ws = workspace(model, data).ws
    T_wf = frame_pose(model, q, frame, data)
    R_wf, p = T_wf[:3, :3], T_wf[:3, 3]
    if b < 0:
        return np.zeros(6)
    forward_pass(model.topology, model.body, q, v, np.zeros(model.nv), np.zeros(6), ws)
    R_bf, p_bf = placement[:9].reshape(3, 3), placement[9:]
    V_b, Vd_b = ws[b, WS_V:WS_V + 6], ws[b, WS_VD:WS_VD + 6]
    w_f = R_bf.T @ V_b[:3]   # twist and acceleration of the frame, in frame axes (constant offset)
    v_f = R_bf.T @ (V_b[3:] + np.cross(V_b[:3], p_bf))
    wd_f = R_bf.T @ Vd_b[:3]
    vd_f = R_bf.T @ (Vd_b[3:] + np.cross(Vd_b[:3], p_bf))
    if reference == LOCAL:
        return np.concatenate([wd_f, vd_f])
    if reference == LOCAL_WORLD_ALIGNED:
        return np.concatenate([R_wf @ wd_f, R_wf @ (vd_f + np.cross(w_f, v_f))])
    wd = R_wf @ wd_f
    return np.concatenate([wd, R_wf @ vd_f + np.cross(p, wd)])
