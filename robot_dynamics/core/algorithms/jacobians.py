"""Frame poses, Jacobians, velocities and bias accelerations (L&P §5.1).

References (names as in Pinocchio), rows angular first:

- ``WORLD``: space Jacobian, J q̇ = twist in base coordinates (L&P eq. 5.11): columns S_j.
- ``LOCAL_WORLD_ALIGNED``: (ω, ṗ) of the frame origin in base axes: columns (ω_j, v_j + ω_j × p).
- ``LOCAL``: body Jacobian, J q̇ = twist in the frame's own axes (L&P eq. 5.18): R^T times that.

Every function takes q (and q̇) of shape (nv,), or (N, nv) for N states with a leading N on the
result.
"""
import enum

import numpy as np
from numba import prange

from .._jit import jit, strict
from ..arguments import (F64, INDEX_TYPE, MATRIX_TYPE, TABLE_TYPE, VECTOR_TYPE, WORKSPACE_TYPE,
                         argument_error, copy_into, joint_arrays, matrix_status, output,
                         state_status, workspace)
from ..layout import BODY_PARENT, FRAME_BODY, FRAME_POS, FRAME_ROT, WS_A, WS_P, WS_R, WS_S, WS_V
from ..mimic import BODY, JACOBIAN, reduced
from ..spatial import (add, cross, load3, load9, motion_to_child, rotate, rotate_transpose,
                       rotation_product)
from .batch import chunk, chunk_count
from .kinematics import forward_kinematics
from .rnea import forward_pass


class Reference(enum.IntEnum):
    """Frame in which a Jacobian, twist or wrench is expressed."""

    LOCAL = 0
    LOCAL_WORLD_ALIGNED = 1
    WORLD = 2


LOCAL, LOCAL_WORLD_ALIGNED, WORLD = Reference
_CODES = {**{int(r): int(r) for r in Reference}, **{r: int(r) for r in Reference}}
_LOCAL, _ALIGNED, _WORLD = (int(r) for r in Reference)   # what the kernels compare with


def reference_code(reference):
    """The kernels' integer for a Reference (ValueError naming the valid ones otherwise)."""
    try:
        return _CODES[reference]
    except (KeyError, TypeError):
        raise ValueError(f'reference must be one of {", ".join(r.name for r in Reference)}, '
                         f'got {reference!r}') from None


@jit
def frame_placement(frames, f, ws):
    """(b, R, p): the body carrying frame f and the frame's pose in the base frame."""
    b = int(frames[f, FRAME_BODY])
    R_bf, p_bf = load9(frames, f, FRAME_ROT), load3(frames, f, FRAME_POS)
    if b < 0:
        return b, R_bf, p_bf
    R_b = load9(ws, b, WS_R)
    return b, rotation_product(R_b, R_bf), add(rotate(R_b, p_bf), load3(ws, b, WS_P))


@jit
def jacobian_column(ws, j, R, p, reference):
    """Column j of the Jacobian of the frame at pose (R, p), as (angular, linear)."""
    w, v = load3(ws, j, WS_S), load3(ws, j, WS_S + 3)
    if reference == _WORLD:
        return w, v
    v = add(v, cross(w, p))   # velocity of the point at the frame's origin
    if reference == _ALIGNED:
        return w, v
    return rotate_transpose(R, w), rotate_transpose(R, v)


@jit
def frame_pose_state(table, frames, f, q, ws, T):
    """T (4x4) of frame f at q."""
    forward_kinematics(table, q, ws)
    _, R, p = frame_placement(frames, f, ws)
    for r in range(3):
        T[r, 0], T[r, 1], T[r, 2], T[r, 3] = R[3 * r], R[3 * r + 1], R[3 * r + 2], p[r]
        T[3, r] = 0.0
    T[3, 3] = 1.0


@jit
def frame_jacobian_state(table, frames, f, reference, q, ws, J):
    """J (6 x nv) of frame f at q in the reference."""
    forward_kinematics(table, q, ws)
    j, R, p = frame_placement(frames, f, ws)
    J[:, :] = 0.0
    while j >= 0:   # the joints between the frame and the base
        w, v = jacobian_column(ws, j, R, p, reference)
        for r in range(3):
            J[r, j], J[3 + r, j] = w[r], v[r]
        j = int(table[j, BODY_PARENT])


@jit
def frame_velocity_state(table, frames, f, reference, q, v, ws, out):
    """J(q) q̇ (6) of frame f in the reference."""
    forward_kinematics(table, q, ws)
    j, R, p = frame_placement(frames, f, ws)
    out[:] = 0.0
    while j >= 0:
        w, u = jacobian_column(ws, j, R, p, reference)
        for r in range(3):
            out[r] += w[r] * v[j]
            out[3 + r] += u[r] * v[j]
        j = int(table[j, BODY_PARENT])


@jit
def frame_bias_acceleration_state(table, frames, f, reference, q, v, ws, out):
    """J̇ q̇ (6) of frame f: its acceleration at q̈ = 0 without gravity, in the reference."""
    forward_kinematics(table, q, ws)
    b, R, p = frame_placement(frames, f, ws)
    out[:] = 0.0
    if b < 0:
        return
    forward_pass(table, q, v, None, False, ws)
    R_bf, p_bf = load9(frames, f, FRAME_ROT), load3(frames, f, FRAME_POS)
    w, u = motion_to_child(R_bf, p_bf, load3(ws, b, WS_V), load3(ws, b, WS_V + 3))  # frame axes
    dw, du = motion_to_child(R_bf, p_bf, load3(ws, b, WS_A), load3(ws, b, WS_A + 3))
    if reference == _LOCAL:
        dw_0, du_0 = dw, du
    elif reference == _ALIGNED:   # classical acceleration of the origin: + ω × v
        dw_0, du_0 = rotate(R, dw), rotate(R, add(du, cross(w, u)))
    else:
        dw_0 = rotate(R, dw)
        du_0 = add(rotate(R, du), cross(p, dw_0))
    for r in range(3):
        out[r], out[3 + r] = dw_0[r], du_0[r]


@jit
def frame_pose_kernel(table, frames, f, q, ws, T):
    """frame_pose_state for one state or each row of a 2-D q; returns the status."""
    status = state_status(table, ws, q, None, None, None)
    if status == 0 and q.ndim == 1:
        frame_pose_state(table, frames, f, q, ws, T)
    elif status == 0 and q.ndim == 2:
        for c in prange(chunk_count(q)):
            scratch = np.empty_like(ws)
            for k in chunk(c, q):
                frame_pose_state(table, frames, f, q[k], scratch, T[k])
    return status


@jit
def frame_jacobian_kernel(table, frames, f, reference, q, ws, J):
    """frame_jacobian_state for one state or each row of a 2-D q; returns the status."""
    status = matrix_status(state_status(table, ws, q, None, None, None), q, J, 6)
    if status == 0 and q.ndim == 1:
        frame_jacobian_state(table, frames, f, reference, q, ws, J)
    elif status == 0 and q.ndim == 2:
        for c in prange(chunk_count(q)):
            scratch = np.empty_like(ws)
            for k in chunk(c, q):
                frame_jacobian_state(table, frames, f, reference, q[k], scratch, J[k])
    return status


@jit
def frame_motion_kernel(table, frames, f, reference, acceleration, q, v, ws, out):
    """frame_velocity_state, or frame_bias_acceleration_state if ``acceleration``, per state."""
    status = state_status(table, ws, q, v, None, None)
    if status == 0 and q.ndim == 1 and v.ndim == 1:
        if acceleration:
            frame_bias_acceleration_state(table, frames, f, reference, q, v, ws, out)
        else:
            frame_velocity_state(table, frames, f, reference, q, v, ws, out)
    elif status == 0 and q.ndim == 2 and v.ndim == 2:
        for c in prange(chunk_count(q)):
            scratch = np.empty_like(ws)
            for k in chunk(c, q):
                if acceleration:
                    frame_bias_acceleration_state(table, frames, f, reference, q[k], v[k],
                                                  scratch, out[k])
                else:
                    frame_velocity_state(table, frames, f, reference, q[k], v[k], scratch,
                                         out[k])
    return status


FRAME_JACOBIAN_ONE = strict('FRAME_JACOBIAN_ONE', globals(), frame_jacobian_kernel, TABLE_TYPE,
                            TABLE_TYPE, INDEX_TYPE, INDEX_TYPE, VECTOR_TYPE, WORKSPACE_TYPE,
                            MATRIX_TYPE)   # one state (rnea.RNEA_ONE)


def frame_pose(model, q, frame, data=None):
    """4x4 pose of a named frame in the base frame."""
    if model.mimic:
        return reduced(frame_pose, model, q, out=BODY, frame=frame, data=data)
    if not (type(q) is np.ndarray and q.dtype is F64):
        q, = joint_arrays(model, q=q)
    T = np.empty((4, 4) if q.ndim == 1 else q.shape[:-1] + (4, 4))
    ws = model.workspaces.ws if data is None else workspace(model, data)
    status = frame_pose_kernel(model.table, model.frames, model.frame_index(frame), q, ws, T)
    if status:
        raise argument_error(model, status, q=q)
    return T


def frame_jacobian(model, q, frame, reference=LOCAL_WORLD_ALIGNED, data=None, out=None):
    """6 x nv Jacobian of a named frame, angular rows first, in ``reference``.

    ``out`` as in ``rnea``.
    """
    if data is None and not model.mimic:
        try:   # one state of float64 arrays, a known frame and reference, else the general path
            J = np.empty((6, len(model.table))) if out is None else out
            if not FRAME_JACOBIAN_ONE(model.table, model.frames, model._frame_index[frame],
                                      _CODES[reference], q, model.workspaces.ws, J):
                return J
        except (TypeError, ValueError, KeyError):
            pass
    if model.mimic:
        return copy_into(out, reduced(frame_jacobian, model, q, out=JACOBIAN, frame=frame,
                                      reference=reference, data=data))
    if not (type(q) is np.ndarray and q.dtype is F64):
        q, = joint_arrays(model, q=q)
    nv = len(model.table)
    shape = (6, nv) if q.ndim == 1 else q.shape[:-1] + (6, nv)
    J = np.empty(shape) if out is None else output(out, shape)
    ws = model.workspaces.ws if data is None else workspace(model, data)
    status = frame_jacobian_kernel(model.table, model.frames, model.frame_index(frame),
                                   reference_code(reference), q, ws, J)
    if status:
        raise argument_error(model, status, q=q)
    return J


def _frame_motion(model, q, v, frame, reference, acceleration, data):
    if model.mimic:
        return reduced(_frame_motion, model, q, v, out=BODY, frame=frame, reference=reference,
                       acceleration=acceleration, data=data)
    if not (type(q) is type(v) is np.ndarray and q.dtype is v.dtype is F64):
        q, v = joint_arrays(model, q=q, v=v)
    out = np.empty(6 if q.ndim == 1 else q.shape[:-1] + (6,))
    ws = model.workspaces.ws if data is None else workspace(model, data)
    status = frame_motion_kernel(model.table, model.frames, model.frame_index(frame),
                                 reference_code(reference), acceleration, q, v, ws, out)
    if status:
        raise argument_error(model, status, q=q, v=v)
    return out


def frame_velocity(model, q, v, frame, reference=LOCAL_WORLD_ALIGNED, data=None):
    """J(q) q̇ of a named frame in ``reference``."""
    return _frame_motion(model, q, v, frame, reference, False, data)


def frame_bias_acceleration(model, q, v, frame, reference=LOCAL_WORLD_ALIGNED, data=None):
    """J̇(q, q̇) q̇: the frame's acceleration at q̈ = 0, without gravity, in ``reference``.

    For ``LOCAL_WORLD_ALIGNED`` this is (ω̇, p̈) of the origin, the classical acceleration.
    """
    return _frame_motion(model, q, v, frame, reference, True, data)
