"""Recursive Newton-Euler inverse dynamics in the Lie-algebra form of Lynch & Park §8.3.2.

Forward pass, for i = 1..n (body frames; T_{i,λ} is the parent's frame seen from body i)::

    V_i  = Ad_{T_{i,λ}} V_λ + A_i q̇_i                              (L&P eq. 8.51)
    V̇_i  = Ad_{T_{i,λ}} V̇_λ + ad_{V_i} A_i q̇_i + A_i q̈_i            (L&P eq. 8.52)

with V_0 = 0 and V̇_0 = (0, -g): gravity enters as an upward acceleration of the base.
Backward pass, for i = n..1::

    F_i = G_i V̇_i - ad_{V_i}^T G_i V_i - F_ext,i + Σ_children Ad^T_{T_{c,i}} F_c   (L&P eq. 8.53)
    τ_i = F_i^T A_i + I_a,i q̈_i + τ_f,i(q̇_i)                        (L&P eq. 8.54)

where the joint's own terms (model.py), the armature I_a (rotor inertia) and the friction τ_f
(friction.py), are added at the joint: they act on the joint coordinate, not on a body.
Where q̇ or q̈ is None (``nonlinear_effects``) its terms are left out when the kernel is compiled.
``gravity`` needs no recursion over velocities: g(q) = ∂P/∂q, the gradient of the potential
energy P = -Σ m_i g·c_i, is a sum over subtrees of first moments (``gravity_state``).
"""
import numpy as np
from numba import prange

from .._jit import jit, parallel, strict
from ..arguments import (F64, MATRIX_TYPE, NO_WRENCHES, TABLE_TYPE, VECTOR_TYPE,
                         WORKSPACE_TYPE, argument_error, copy_into, joint_arrays, output,
                         state_status, vector_status, workspace, wrenches)
from ..layout import (BODY_ARMATURE, BODY_AXES, BODY_GRAVITY, BODY_INERTIA, BODY_PARENT, WS_A,
                      WS_F, WS_HM, WS_P, WS_PREL, WS_R, WS_RREL, WS_S, WS_V)
from ..mimic import TORQUE, reduced
from ..spatial import (ZERO, accumulate, add, cross, dot, force_cross, force_to_parent,
                       inertia_times_motion, load3, load4, load9, load10, motion_to_child, rotate,
                       rotate_transpose, scale, store, sub)
from .batch import chunk, chunk_count, wrench_row
from .friction import friction_torque
from .kinematics import (add_joint_motion, cross_joint_motion, forward_kinematics, joint_force,
                         joint_transform, revolute)


@jit
def forward_pass(table, q, v, a, with_gravity, ws):
    """Body twists V_i and accelerations V̇_i (eqs. 8.51-8.52), and the poses T_{λ,i}."""
    for i in range(table.shape[0]):
        R, p = joint_transform(table, i, q[i])
        store(ws, i, WS_RREL, R)
        store(ws, i, WS_PREL, p)
        parent = int(table[i, BODY_PARENT])
        w, u = ZERO, ZERO
        if parent < 0:
            dw, du = ZERO, ZERO
            if with_gravity:
                du = rotate_transpose(R, scale(load3(table, i, BODY_GRAVITY), -1.0))
        else:
            if v is not None:
                w, u = motion_to_child(R, p, load3(ws, parent, WS_V), load3(ws, parent, WS_V + 3))
            dw, du = motion_to_child(R, p, load3(ws, parent, WS_A), load3(ws, parent, WS_A + 3))
        turns = revolute(table, i)
        if v is not None:   # ad_{V_i} A_i q̇_i = ad_{V_i - A_i q̇_i} A_i q̇_i, then V_i += A_i q̇_i
            c_w, c_v = cross_joint_motion(turns, w, u, v[i])
            dw, du = add(dw, c_w), add(du, c_v)
            w, u = add_joint_motion(turns, w, u, v[i])
        if a is not None:
            dw, du = add_joint_motion(turns, dw, du, a[i])
        store(ws, i, WS_V, w)
        store(ws, i, WS_V + 3, u)
        store(ws, i, WS_A, dw)
        store(ws, i, WS_A + 3, du)


@jit
def joint_terms(table, i, v, a):
    """I_a,i q̈_i + τ_f,i(q̇_i): the torque of joint i's rotor and friction (None: no term)."""
    torque = 0.0
    if a is not None:
        torque += table[i, BODY_ARMATURE] * a[i]
    if v is not None:
        torque += friction_torque(table, i, v[i])
    return torque


@jit
def rnea_state(table, q, v, a, f_ext, ws, tau):
    """τ = M(q) q̈ + C(q, q̇) q̇ + g(q) + τ_f(q̇) - Σ J_i^T F_ext,i for one state.

    f_ext may be empty; M includes the armature.
    """
    nb = table.shape[0]
    forward_pass(table, q, v, a, True, ws)
    for i in range(nb):   # the body's own wrench G V̇ - ad_V^T G V - F_ext
        inertia = load10(table, i, BODY_INERTIA)
        m, f = inertia_times_motion(inertia, load3(ws, i, WS_A), load3(ws, i, WS_A + 3))
        if v is not None:
            w, u = load3(ws, i, WS_V), load3(ws, i, WS_V + 3)
            h_m, h_f = inertia_times_motion(inertia, w, u)
            b_m, b_f = force_cross(w, u, h_m, h_f)
            m, f = add(m, b_m), add(f, b_f)
        if f_ext is not None and f_ext.shape[0] > 0:   # given in the model's body axes
            R_a = load9(table, i, BODY_AXES)
            m = sub(m, rotate_transpose(R_a, load3(f_ext, i, 0)))
            f = sub(f, rotate_transpose(R_a, load3(f_ext, i, 3)))
        store(ws, i, WS_F, m)
        store(ws, i, WS_F + 3, f)
    for i in range(nb - 1, -1, -1):   # children first: F_i is complete when we reach it
        m, f = load3(ws, i, WS_F), load3(ws, i, WS_F + 3)
        tau[i] = joint_force(revolute(table, i), m, f) + joint_terms(table, i, v, a)
        parent = int(table[i, BODY_PARENT])
        if parent >= 0:
            p_m, p_f = force_to_parent(load9(ws, i, WS_RREL), load3(ws, i, WS_PREL), m, f)
            accumulate(ws, parent, WS_F, p_m)
            accumulate(ws, parent, WS_F + 3, p_f)


@jit
def gravity_state(table, q, ws, tau):
    """g(q) = ∂P/∂q for one state.

    With c_i the centres of mass in base coordinates, ∂c_i/∂q_j = ω_j × c_i + v_j for the screw
    S_j = (ω_j, v_j), so g_j = -S_j^T (h^c_j × g, m^c_j g) with the first moment h^c_j = Σ m_i c_i
    and the mass m^c_j of the subtree of body j.
    """
    nb = table.shape[0]
    forward_kinematics(table, q, ws)
    for i in range(nb):   # h_i = R_i h + m p_i and m_i in base coordinates, into WS_HM
        R, p = load9(ws, i, WS_R), load3(ws, i, WS_P)
        m = table[i, BODY_INERTIA]
        h = add(rotate(R, load3(table, i, BODY_INERTIA + 1)), scale(p, m))
        store(ws, i, WS_HM, (h[0], h[1], h[2], m))
    for i in range(nb - 1, -1, -1):
        parent = int(table[i, BODY_PARENT])
        if parent >= 0:
            accumulate(ws, parent, WS_HM, load4(ws, i, WS_HM))
        g = load3(table, i, BODY_GRAVITY)
        h_x, h_y, h_z, m = load4(ws, i, WS_HM)
        tau[i] = -(dot(load3(ws, i, WS_S), cross((h_x, h_y, h_z), g))
                   + m * dot(load3(ws, i, WS_S + 3), g))


@jit
def rnea_kernel(table, q, v, a, f_ext, ws, tau):
    """rnea_state for one state, or for each row of 2-D q, v, a (f_ext (nb, 6) is shared)."""
    status = vector_status(state_status(table, ws, q, v, a, f_ext), q, tau)
    if status == 0 and q.ndim == 1 and v.ndim == 1 and a.ndim == 1 and f_ext.ndim == 2:
        rnea_state(table, q, v, a, f_ext, ws, tau)
    elif (status == 0 and q.ndim == 2 and v.ndim == 2 and a.ndim == 2
          and (f_ext.ndim == 2 or f_ext.ndim == 3)):
        for c in prange(chunk_count(q)):
            scratch = np.empty_like(ws)
            for k in chunk(c, q):
                rnea_state(table, q[k], v[k], a[k], wrench_row(f_ext, k), scratch, tau[k])
    return status


@jit
def nonlinear_effects_kernel(table, q, v, ws, tau):
    """rnea_state at q̈ = 0 for one state or each row of 2-D q, v."""
    status = vector_status(state_status(table, ws, q, v, None, None), q, tau)
    if status == 0 and q.ndim == 1 and v.ndim == 1:
        rnea_state(table, q, v, None, None, ws, tau)
    elif status == 0 and q.ndim == 2 and v.ndim == 2:
        for c in prange(chunk_count(q)):
            scratch = np.empty_like(ws)
            for k in chunk(c, q):
                rnea_state(table, q[k], v[k], None, None, scratch, tau[k])
    return status


@jit
def gravity_kernel(table, q, ws, tau):
    """gravity_state for one state or each row of a 2-D q."""
    status = vector_status(state_status(table, ws, q, None, None, None), q, tau)
    if status == 0 and q.ndim == 1:
        gravity_state(table, q, ws, tau)
    elif status == 0 and q.ndim == 2:
        for c in prange(chunk_count(q)):
            scratch = np.empty_like(ws)
            for k in chunk(c, q):
                gravity_state(table, q[k], scratch, tau[k])
    return status


rnea_parallel = parallel(rnea_kernel)
nonlinear_effects_parallel = parallel(nonlinear_effects_kernel)
gravity_parallel = parallel(gravity_kernel)
# one state of float64 arrays (``strict``): arguments as in the kernel
RNEA_ONE = strict('RNEA_ONE', globals(), rnea_kernel, TABLE_TYPE, VECTOR_TYPE, VECTOR_TYPE,
                  VECTOR_TYPE, MATRIX_TYPE, WORKSPACE_TYPE, VECTOR_TYPE)
NONLINEAR_EFFECTS_ONE = strict('NONLINEAR_EFFECTS_ONE', globals(), nonlinear_effects_kernel,
                               TABLE_TYPE, VECTOR_TYPE, VECTOR_TYPE, WORKSPACE_TYPE,
                               VECTOR_TYPE)
GRAVITY_ONE = strict('GRAVITY_ONE', globals(), gravity_kernel, TABLE_TYPE, VECTOR_TYPE,
                     WORKSPACE_TYPE, VECTOR_TYPE)


def rnea(model, q, v, a, f_ext=None, data=None, out=None):
    """Inverse dynamics τ = M(q) q̈ + C(q, q̇) q̇ + g(q) + τ_f(q̇) - Σ J_i^T F_ext,i.

    M includes the joints' armature, τ_f is their friction (``joint_friction``).

    ``f_ext``: (nb, 6) external wrenches (moment, force) on each body, in its body frame.
    q, v, a of shape (N, nv) give τ of shape (N, nv), with f_ext (N, nb, 6) or shared (nb, 6).
    ``out``: a writeable float64 array of τ's shape, not overlapping the inputs, that receives τ
    and is returned in place of a new array (MuJoCo's style).
    """
    if data is None and not model.mimic:
        try:   # one state of float64 arrays, else (the error or a bad status) the general path
            tau = np.empty(len(q)) if out is None else out
            if not RNEA_ONE(model.table, q, v, a, NO_WRENCHES if f_ext is None else f_ext,
                            model.workspaces.ws, tau):
                return tau
        except (TypeError, ValueError):   # no numba type for an argument, or another one
            pass
    if model.mimic:
        return copy_into(out, reduced(rnea, model, q, v, a, out=TORQUE, f_ext=f_ext, data=data))
    if not (type(q) is type(v) is type(a) is np.ndarray and q.dtype is v.dtype is a.dtype is F64):
        q, v, a = joint_arrays(model, q=q, v=v, a=a)
    f = NO_WRENCHES if f_ext is None else wrenches(model, f_ext)
    tau = np.empty(q.shape) if out is None else output(out, q.shape[:-1] + (len(model.table),))
    ws = model.workspaces.ws if data is None else workspace(model, data)
    status = rnea_kernel(model.table, q, v, a, f, ws, tau)
    if status:
        raise argument_error(model, status, q=q, v=v, a=a, f_ext=f)
    return tau


def gravity(model, q, data=None, out=None):
    """g(q) = rnea(q, 0, 0): the torques that hold the arm still (gravity compensation).

    Friction τ_f(0) = 0 and armature (times q̈ = 0) do not enter. ``out`` as in ``rnea``.
    """
    if data is None and not model.mimic:
        try:   # one state of float64 arrays, else (the error or a bad status) the general path
            tau = np.empty(len(q)) if out is None else out
            if not GRAVITY_ONE(model.table, q, model.workspaces.ws, tau):
                return tau
        except (TypeError, ValueError):   # no numba type for an argument, or another one
            pass
    if model.mimic:
        return copy_into(out, reduced(gravity, model, q, out=TORQUE, data=data))
    if not (type(q) is np.ndarray and q.dtype is F64):
        q, = joint_arrays(model, q=q)
    tau = np.empty(q.shape) if out is None else output(out, q.shape[:-1] + (len(model.table),))
    ws = model.workspaces.ws if data is None else workspace(model, data)
    status = gravity_kernel(model.table, q, ws, tau)
    if status:
        raise argument_error(model, status, q=q)
    return tau


def nonlinear_effects(model, q, v, data=None, out=None):
    """C(q, q̇) q̇ + g(q) + τ_f(q̇) = rnea(q, q̇, 0): the joint friction included.

    ``out`` as in ``rnea``.
    """
    if data is None and not model.mimic:
        try:   # one state of float64 arrays, else (the error or a bad status) the general path
            tau = np.empty(len(q)) if out is None else out
            if not NONLINEAR_EFFECTS_ONE(model.table, q, v, model.workspaces.ws, tau):
                return tau
        except (TypeError, ValueError):   # no numba type for an argument, or another one
            pass
    if model.mimic:
        return copy_into(out, reduced(nonlinear_effects, model, q, v, out=TORQUE, data=data))
    if not (type(q) is type(v) is np.ndarray and q.dtype is v.dtype is F64):
        q, v = joint_arrays(model, q=q, v=v)
    tau = np.empty(q.shape) if out is None else output(out, q.shape[:-1] + (len(model.table),))
    ws = model.workspaces.ws if data is None else workspace(model, data)
    status = nonlinear_effects_kernel(model.table, q, v, ws, tau)
    if status:
        raise argument_error(model, status, q=q, v=v)
    return tau
