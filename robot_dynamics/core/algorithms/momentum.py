"""The momentum observer's model terms and steps, each one compiled pass (core/observers.py).

With p = M(q) q̇ and Ṁ = C + Cᵀ (the armature is constant), M q̈ + C q̇ + g + τ_f = τ + τ_ext
gives ṗ = β + τ_ext, β = τ + Cᵀ(q, q̇) q̇ − g(q) − τ_f(q̇) (De Luca et al., IROS 2006).
"""
import numpy as np

from .._jit import jit
from .coriolis import coriolis_matrix, coriolis_state
from .crba import mass_matrix, mass_matrix_state
from .friction import friction_torque, joint_friction
from .rnea import gravity, gravity_state


@jit
def momentum_state(table, q, v, tau, ws, M, C, p, beta):
    """p = M(q) q̇ and β = τ + Cᵀ q̇ − g(q) − τ_f(q̇) of one state (M, C: nv x nv scratch)."""
    mass_matrix_state(table, q, ws, M)
    coriolis_state(table, q, v, ws, C)
    gravity_state(table, q, ws, beta)
    for i in range(q.size):
        p_i, c_i = 0.0, 0.0
        for j in range(q.size):
            p_i += M[i, j] * v[j]
            c_i += C[j, i] * v[j]
        p[i] = p_i
        beta[i] = tau[i] + c_i - beta[i] - friction_torque(table, i, v[i])


@jit
def advance_residual(p, beta, p0, beta0, dt, gain, r0, r):
    """r = e^(−K dt) r₀ + (1 − e^(−K dt)) u, u = (p − p₀)/dt − (β + β₀)/2, per joint."""
    for i in range(p.size):
        u = (p[i] - p0[i]) / dt - 0.5 * (beta[i] + beta0[i])
        decay = np.exp(-gain[i] * dt)
        r[i] = decay * r0[i] + (1.0 - decay) * u


@jit
def damped_wrench(J, tau, damping):
    """F = (J Jᵀ + λ² 1)⁻¹ J τ, λ = damping · σ_max(J), by the eigen-decomposition of J Jᵀ."""
    s2, U = np.linalg.eigh(J @ J.T)
    return U @ ((U.T @ (J @ tau)) / (s2 + damping**2 * s2[-1]))


def momentum_terms(model, q, v, tau, data):
    """(p, β) above for one state; q, q̇, τ finite float (nv,) arrays, data the caller's Data."""
    if model.mimic:   # in independent coordinates, from the reduced M, C, g (mimic.py)
        return (mass_matrix(model, q, data) @ v, tau + coriolis_matrix(model, q, v, data).T @ v
                - gravity(model, q, data) - joint_friction(model, v))
    nv = model.nv
    p, beta = np.empty(nv), np.empty(nv)
    momentum_state(model.table, q, v, tau, data.ws, np.empty((nv, nv)), np.empty((nv, nv)), p,
                   beta)
    return p, beta
