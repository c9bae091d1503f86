"""Dry joint friction that holds: the internal engine's stick-slip law (compiled kernels).

Per joint: the breakaway torque f_s, the Coulomb level f_c ≤ f_s and the Stribeck velocity v_s
(rows of ``dry``). A **sliding** joint (q̇ ≠ 0) takes the friction
τ_d = [f_c + (f_s − f_c) exp(−(q̇ / v_s)²)] sign(q̇), its level evaluated at every RK4 stage
with the stage's velocity, its sign (exact, no smoothing) that of q̇ at the start of the step,
held over the stages: a joint that reverses within a step has passed through rest (below).
Taking the sign per stage instead lets RK4 settle on a tiny velocity whose stages alternate in
sign: a creep of ~1e-5 rad/s that never stops. A joint **at rest** (q̇ = 0) is a candidate to
stick: with every candidate held (q̈ = 0, a bilateral constraint), the holding torques λ are
those that keep them at rest, λ_S = −((M⁻¹)_SS)⁻¹ q̈_free,S (q̈_free the acceleration with the
held joints free and frictionless); the joint whose |λ| exceeds its f_s by the largest ratio
breaks away (it starts sliding, its friction f_s opposing the push) and the others' λ are
computed again, until each held joint's |λ| ≤ f_s (at most n rounds). The held joints then
keep q̈ = 0 at every stage of the step (the rest of the arm sees them held, with M and the
forces at each stage's point) and stay exactly where they are: no creep, whatever the load
below breakaway.

A sliding joint whose velocity changes sign over a step (or starts below the rest velocity
``DRY_REST_VELOCITY``) has passed through rest: dry friction stops it there. It is brought to
rest by the impulse that zeroes its velocity, q̇⁺ = q̇ + M⁻¹ S μ with (q̇⁺)_S = 0, S these
joints and the held ones (the M-orthogonal projection: kinetic energy only decreases), and
the next step decides whether it sticks. Sticking decided at the start of a step holds for its
four stages: a breakaway acts one step (dt) after the torque that causes it.
"""
import numpy as np

from robot_dynamics.core._jit import exact
from robot_dynamics.core.algorithms.crba import mass_matrix_state
from robot_dynamics.core.algorithms.linalg import active_set_solve, cholesky, cholesky_inverse

#: rows of ``dry`` (DRY_ROWS, n): the parameters f_c, f_s, v_s; then the step's state: whether
#: the joint is held, the direction a joint breaking away from rest moves in, the velocity at
#: the start of the step, the holding torque λ of a held joint (and scratch for the solve),
#: whether a joint passed through rest over the step
COULOMB, BREAKAWAY, STRIBECK, HELD, DIRECTION, START_V, HOLDING, RHS, STOPPED = range(9)
DRY_ROWS = 9
#: rad/s (m/s): a velocity this small at the start of a step is rest (below any the arm reaches
#: while sliding over one step, since friction changes q̇ by ~f_s dt / I ≫ this)
DRY_REST_VELOCITY = 1e-9


@exact
def dry_torque(dry, v, out):
    """out −= τ_d(q̇) on the sliding joints (module docstring); held joints are left alone."""
    for j in range(v.shape[0]):
        if dry[HELD, j] == 1.0 or dry[BREAKAWAY, j] == 0.0:
            continue
        x = v[j] / dry[STRIBECK, j]
        level = dry[COULOMB, j] + (dry[BREAKAWAY, j] - dry[COULOMB, j]) * np.exp(-x * x)
        out[j] = out[j] - level * dry[DIRECTION, j]


@exact
def inverse_mass(table, q, ws, W):
    """W = M(q)⁻¹; False if M is not positive definite."""
    mass_matrix_state(table, q, ws, W)
    if not cholesky(W):
        return False
    cholesky_inverse(W)
    return True


@exact
def hold(Winv, dry, row, rate, A):
    """Make ``rate`` (q̈ or q̇) 0 on the joints with dry[row] == 1 by M⁻¹ S λ; λ in dry[HOLDING].

    λ_S = −((M⁻¹)_SS)⁻¹ rate_S, rate += M⁻¹ S λ_S, then rate_S = 0 exactly. For q̈, λ is the
    holding torque; for q̇, the impulse. False if (M⁻¹)_SS is not positive definite.
    """
    if not active_set_solve(Winv, dry[row], dry[row], rate, dry[HOLDING], dry[RHS], A):
        return False
    n = rate.shape[0]
    for i in range(n):
        if dry[row, i] == 1.0:
            rate[i] = 0.0
            continue
        for j in range(n):
            rate[i] = rate[i] + Winv[i, j] * dry[HOLDING, j]
    return True


@exact
def at_rest(dry, v):
    """Mark in dry[HELD] the joints with dry friction at rest (|q̇| ≤ DRY_REST_VELOCITY)."""
    any_ = False
    for j in range(v.shape[0]):
        dry[HELD, j] = 0.0
        if dry[BREAKAWAY, j] > 0.0 and abs(v[j]) <= DRY_REST_VELOCITY:
            dry[HELD, j], any_ = 1.0, True
    return any_


@exact
def stick_or_break(Winv, dry, a_free, A):
    """Decide which marked joints stay held (module docstring); a_free is the free q̈.

    Each joint that breaks away gets its friction f_s against the push added to a_free
    (a_free += M⁻¹ e_j f_s sign(λ_j)) and its DIRECTION, −sign(λ_j). False: not PD.
    """
    n = a_free.shape[0]
    for _ in range(n):
        for i in range(n):
            dry[START_V, i] = a_free[i]   # scratch (hold() overwrites its argument)
        if not hold(Winv, dry, HELD, dry[START_V], A):
            return False
        worst, ratio = -1, 1.0
        for i in range(n):
            if dry[HELD, i] == 1.0 and abs(dry[HOLDING, i]) > ratio * dry[BREAKAWAY, i]:
                worst, ratio = i, abs(dry[HOLDING, i]) / dry[BREAKAWAY, i]
        if worst < 0:
            return True
        s = 1.0 if dry[HOLDING, worst] > 0.0 else -1.0
        dry[HELD, worst], dry[DIRECTION, worst] = 0.0, -s
        for i in range(n):
            a_free[i] = a_free[i] + Winv[i, worst] * dry[BREAKAWAY, worst] * s
    return True


@exact
def passed_rest(dry, v):
    """Mark in dry[STOPPED] the sliding joints whose q̇ changed sign over the step (or is ~0).

    If any did, the held joints are marked too: they stay held through the impulse that
    brings the others to rest (it would otherwise set them moving through the coupling).
    """
    any_ = False
    for j in range(v.shape[0]):
        dry[STOPPED, j] = dry[HELD, j]
        if dry[BREAKAWAY, j] == 0.0 or dry[HELD, j] == 1.0 or v[j] == 0.0:
            continue
        before = dry[START_V, j] if dry[START_V, j] != 0.0 else dry[DIRECTION, j]
        if v[j] * before < 0.0 or abs(v[j]) <= DRY_REST_VELOCITY:
            dry[STOPPED, j], any_ = 1.0, True
    return any_


@exact
def start_step(dry, v):
    """Set dry[START_V] = q̇ and, for the moving joints, dry[DIRECTION] = sign(q̇)."""
    for j in range(v.shape[0]):
        if v[j] != 0.0:
            dry[DIRECTION, j] = 1.0 if v[j] > 0.0 else -1.0
        dry[START_V, j] = v[j]


@exact
def any_held(dry):
    """Whether a joint is marked in dry[HELD]."""
    for j in range(dry.shape[1]):
        if dry[HELD, j] == 1.0:
            return True
    return False
