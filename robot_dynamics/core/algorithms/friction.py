"""Joint friction τ_f(q̇) = f_v q̇ + [f_c + f_s exp(−(q̇ / v_s)²)] tanh(q̇ / ε), per joint.

Viscous friction f_v q̇, Coulomb friction f_c sign(q̇) and the Stribeck term, the stiction excess
f_s ≥ 0 of the breakaway torque f_c + f_s over the Coulomb level, decaying over the Stribeck
velocity v_s (Armstrong-Hélouvry, Dupont & Canudas de Wit 1994, eq. 5 with δ = 2; model.py:
Model.viscous, coulomb, stiction, stribeck_velocity). The sign is smoothed over the velocity
scale ε = ``model.coulomb_velocity`` (Makkar, Dixon et al. 2005 use the same tanh law): τ_f is
smooth, exactly 0 at rest, and linear in (f_v, f_c, f_s) for fixed ε and v_s (regressor.py).
``friction_torque`` is the one implementation: ``rnea`` (and with it ``nonlinear_effects`` and
``forward_dynamics``) adds it at every joint, and ``joint_friction`` evaluates it alone.
"""
import numpy as np

from .._jit import jit
from ..arguments import joint_arrays, joint_shapes
from ..layout import (BODY_COULOMB, BODY_COULOMB_VELOCITY, BODY_STICTION,
                      BODY_STRIBECK_VELOCITY, BODY_VISCOUS)


@jit
def smooth_sign(x, eps):
    """tanh(x / ε): sign(x) smoothed over |x| ~ ε (x a number or an array)."""
    return np.tanh(x / eps)


@jit
def stribeck_sign(x, v_s, eps):
    """exp(−(x / v_s)²) tanh(x / ε): the Stribeck term per unit stiction f_s (module docstring)."""
    return np.exp(-(x / v_s) ** 2) * np.tanh(x / eps)


@jit
def friction_torque(table, i, v_i):
    """τ_f,i = f_v q̇_i + [f_c + f_s exp(−(q̇_i / v_s)²)] tanh(q̇_i / ε) of the joint of body i."""
    torque = table[i, BODY_VISCOUS] * v_i
    if table[i, BODY_COULOMB] != 0.0:
        torque += table[i, BODY_COULOMB] * smooth_sign(v_i, table[i, BODY_COULOMB_VELOCITY])
    if table[i, BODY_STICTION] != 0.0:
        torque += table[i, BODY_STICTION] * stribeck_sign(
            v_i, table[i, BODY_STRIBECK_VELOCITY], table[i, BODY_COULOMB_VELOCITY])
    return torque


@jit
def joint_friction_kernel(table, v, tau):
    """friction_torque of every joint, for each row of v (N, nv)."""
    for k in range(v.shape[0]):
        for i in range(table.shape[0]):
            tau[k, i] = friction_torque(table, i, v[k, i])


def joint_friction(model, v):
    """τ_f(q̇) (module docstring), (nv,), or (N, nv) for q̇ (N, nv).

    The friction torque every algorithm adds to the rigid-body torques: τ = rnea(q, q̇, q̈)
    contains it, ``rnea(q, q̇, q̈) - joint_friction(q̇)`` is the torque without it.
    """
    v, = joint_arrays(model, v=v)
    if v.ndim > 2 or v.shape[-1] != model.nv:
        raise ValueError(f'v must have {joint_shapes(model, "v")}, got shape {v.shape}')
    tau = np.empty(v.shape)
    table = model.table[model.independent] if model.mimic else model.table   # rows of the joints
    joint_friction_kernel(table, v.reshape(-1, model.nv), tau.reshape(-1, model.nv))
    return tau


def sign_friction(model, v):
    """[f_c + f_s exp(−(q̇ / v_s)²)] tanh(q̇ / ε): the part of τ_f that follows the sign of q̇."""
    v = np.asarray(v, dtype=float)
    return (model.coulomb * smooth_sign(v, model.coulomb_velocity) + model.stiction *
            stribeck_sign(v, model.stribeck_velocity, model.coulomb_velocity))
