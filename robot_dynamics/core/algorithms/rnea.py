"""Recursive Newton-Euler inverse dynamics in the Lie-algebra form of Lynch & Park §8.3.2.

Forward pass, for i = 1..n (body frames; T_{i,λ} is the parent's frame seen from body i)::

    V_i  = Ad_{T_{i,λ}} V_λ + A_i q̇_i                              (L&P eq. 8.51)
    V̇_i  = Ad_{T_{i,λ}} V̇_λ + ad_{V_i} A_i q̇_i + A_i q̈_i            (L&P eq. 8.52)

with V_0 = 0 and V̇_0 = (0, -g): gravity enters as an upward acceleration of the base.
Backward pass, for i = n..1::

    F_i = G_i V̇_i - ad_{V_i}^T G_i V_i - F_ext,i + Σ_children Ad^T_{T_{c,i}} F_c   (L&P eq. 8.53)
    τ_i = F_i^T A_i                                                 (L&P eq. 8.54)
"""
import numpy as np

from .._jit import jit
from ..model import (BODY_AXIS, BODY_INERTIA, BODY_WIDTH, PRISMATIC, WS_F, WS_PREL, WS_RREL,
                     WS_V, WS_VD)
from ..spatial import inertia_times_motion
from ..arguments import body_wrenches, joint_vector, workspace
from .kinematics import joint_transform


@jit
def _to_child(R, p, X, out):
    """out = Ad_{T_{i,λ}} X for (R, p) = T_{λ,i}: (R^T w, R^T (v + w x p))."""
    w0, w1, w2 = X[0], X[1], X[2]
    u0 = X[3] + w1 * p[2] - w2 * p[1]
    u1 = X[4] + w2 * p[0] - w0 * p[2]
    u2 = X[5] + w0 * p[1] - w1 * p[0]
    for c in range(3):
        out[c] = R[c] * w0 + R[3 + c] * w1 + R[6 + c] * w2
        out[3 + c] = R[c] * u0 + R[3 + c] * u1 + R[6 + c] * u2


@jit
def _add_to_parent(R, p, F, out):
    """out += Ad^T_{T_{i,λ}} F for (R, p) = T_{λ,i}: (R m + p x R f, R f)."""
    f0 = R[0] * F[3] + R[1] * F[4] + R[2] * F[5]
    f1 = R[3] * F[3] + R[4] * F[4] + R[5] * F[5]
    f2 = R[6] * F[3] + R[7] * F[4] + R[8] * F[5]
    for r in range(3):
        out[r] += R[3 * r] * F[0] + R[3 * r + 1] * F[1] + R[3 * r + 2] * F[2]
    out[0] += p[1] * f2 - p[2] * f1
    out[1] += p[2] * f0 - p[0] * f2
    out[2] += p[0] * f1 - p[1] * f0
    out[3] += f0
    out[4] += f1
    out[5] += f2


@jit
def forward_pass(topology, body, q, v, a, base_acceleration, ws):
    """Body twists V_i and accelerations V̇_i (eqs. 8.51-8.52), relative poses T_{λ,i}."""
    for i in range(topology.shape[0]):
        R, p = ws[i, WS_RREL:WS_RREL + 9], ws[i, WS_PREL:WS_PREL + 3]
        joint_transform(topology, body, i, q[i], R, p)
        V, Vd = ws[i, WS_V:WS_V + 6], ws[i, WS_VD:WS_VD + 6]
        parent = topology[i, 0]
        if parent < 0:
            V[:] = 0.0
            _to_child(R, p, base_acceleration, Vd)
        else:
            _to_child(R, p, ws[parent, WS_V:WS_V + 6], V)
            _to_child(R, p, ws[parent, WS_VD:WS_VD + 6], Vd)
        axis = body[i, BODY_AXIS:BODY_AXIS + 3]
        k = 3 if topology[i, 1] == PRISMATIC else 0
        w0, w1, w2 = V[0], V[1], V[2]
        # ad_{V_i} A_i q̇_i with A_i = (a, 0) or (0, a): (w x a, v x a) or (0, w x a)
        ax, ay, az = axis[0] * v[i], axis[1] * v[i], axis[2] * v[i]
        if k == 0:
            Vd[0] += w1 * az - w2 * ay
            Vd[1] += w2 * ax - w0 * az
            Vd[2] += w0 * ay - w1 * ax
            Vd[3] += V[4] * az - V[5] * ay
            Vd[4] += V[5] * ax - V[3] * az
            Vd[5] += V[3] * ay - V[4] * ax
        else:
            Vd[3] += w1 * az - w2 * ay
            Vd[4] += w2 * ax - w0 * az
            Vd[5] += w0 * ay - w1 * ax
        for c in range(3):
            V[k + c] += axis[c] * v[i]
            Vd[k + c] += axis[c] * a[i]


@jit
def backward_pass(topology, body, f_ext, ws, tau):
    """Body wrenches F_i (eq. 8.53) and joint torques τ_i = F_i^T A_i (eq. 8.54)."""
    nb = topology.shape[0]
    h = np.empty(6)
    for i in range(nb):
        inertia = body[i, BODY_INERTIA:BODY_WIDTH]
        V, F = ws[i, WS_V:WS_V + 6], ws[i, WS_F:WS_F + 6]
        inertia_times_motion(inertia, ws[i, WS_VD:WS_VD + 6], F)
        inertia_times_motion(inertia, V, h)
        # - ad_V^T h = (w x h_ang + v x h_lin, w x h_lin)
        F[0] += V[1] * h[2] - V[2] * h[1] + V[4] * h[5] - V[5] * h[4]
        F[1] += V[2] * h[0] - V[0] * h[2] + V[5] * h[3] - V[3] * h[5]
        F[2] += V[0] * h[1] - V[1] * h[0] + V[3] * h[4] - V[4] * h[3]
        F[3] += V[1] * h[5] - V[2] * h[4]
        F[4] += V[2] * h[3] - V[0] * h[5]
        F[5] += V[0] * h[4] - V[1] * h[3]
        if f_ext.shape[0] == nb:
            for c in range(6):
                F[c] -= f_ext[i, c]
    for i in range(nb - 1, -1, -1):
        F = ws[i, WS_F:WS_F + 6]
        k = 3 if topology[i, 1] == PRISMATIC else 0
        tau[i] = (F[k] * body[i, BODY_AXIS] + F[k + 1] * body[i, BODY_AXIS + 1]
                  + F[k + 2] * body[i, BODY_AXIS + 2])
        parent = topology[i, 0]
        if parent >= 0:
            _add_to_parent(ws[i, WS_RREL:WS_RREL + 9], ws[i, WS_PREL:WS_PREL + 3], F,
                           ws[parent, WS_F:WS_F + 6])


@jit
def rnea_kernel(topology, body, q, v, a, gravity, f_ext, ws, tau):
    """τ = M(q) q̈ + C(q, q̇) q̇ + g(q) - Σ J_i^T F_ext,i."""
    base_acceleration = np.zeros(6)
    base_acceleration[3:6] = -gravity
    forward_pass(topology, body, q, v, a, base_acceleration, ws)
    backward_pass(topology, body, f_ext, ws, tau)


def rnea(model, q, v, a, f_ext=None, data=None):
    """Inverse dynamics τ = M(q) q̈ + C(q, q̇) q̇ + g(q) - Σ J_i^T F_ext,i.

    ``f_ext``: (nb, 6) external wrenches (moment, force) on each body, in its body frame.
    """
    q, v, a = (joint_vector(model, x, n) for x, n in ((q, 'q'), (v, 'v'), (a, 'a')))
    tau = np.empty(model.nv)
    rnea_kernel(model.topology, model.body, q, v, a, model.gravity, body_wrenches(model, f_ext),
                workspace(model, data).ws, tau)
    return tau


def gravity(model, q, data=None):
    """g(q) = rnea(q, 0, 0): the torques that hold the arm still (gravity compensation)."""
    zero = np.zeros(model.nv)
    return rnea(model, q, zero, zero, data=data)


def nonlinear_effects(model, q, v, data=None):
    """C(q, q̇) q̇ + g(q) = rnea(q, q̇, 0)."""
    return rnea(model, q, v, np.zeros(model.nv), data=data)
