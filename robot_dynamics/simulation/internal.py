"""The internal engine: classical RK4 on robot_dynamics' forward dynamics.

One step is one compiled call (``rk4_step``) of the core's kernels, forward_dynamics_state and
frame_jacobian_state, for a model without mimic joints; with mimic joints each stage's q̈ comes
from the public functions, which solve in independent coordinates. Both compose the stages with
the same kernels (``stage_torque``, ``rk4_stage``), compiled ``exact``: every operation rounded
as the same steps on numpy arrays round it.

End stops (``end_stops``): after each step, a joint beyond its URDF position limit is put back
on it and the arm takes an inelastic impact there (``inelastic_stops``): the joint impulses
λ ≥ 0 (pushing the joints back inside) that make no joint at a stop move outwards,
q̇⁺ = q̇ + M(q)⁻¹ λ, with λ = 0 where a joint leaves its stop (the complementarity conditions
of a rigid, non-bouncing stop, solved exactly by Murty's principal pivoting on the few joints at
a stop). It takes the kinetic energy the stops absorb and never adds any. A joint then resting
on its stop (at the limit, q̇ = 0) is held there through the next step by the stop's reaction
at every RK4 stage: the same conditions on q̈ (``stop_reactions``), so the rest of the arm moves
with the constrained dynamics, and the joint leaves the stop when the arm pulls it inwards. The
check is two comparisons per joint; M(q) is computed only at a stop.
"""
import numpy as np

import robot_dynamics as rd
from robot_dynamics.core._jit import exact
from robot_dynamics.core.algorithms.forward_dynamics import forward_dynamics_state
from robot_dynamics.core.algorithms.crba import mass_matrix_state
from robot_dynamics.core.algorithms.jacobians import frame_jacobian_state
from robot_dynamics.core.algorithms.linalg import active_set_solve, cholesky, cholesky_inverse
from robot_dynamics.core.arguments import NOT_POSITIVE_DEFINITE, NO_WRENCHES, argument_error

from .base import Engine
from .dry_friction import (BREAKAWAY, COULOMB, DRY_ROWS, HELD, STOPPED, STRIBECK, any_held,
                           at_rest, dry_torque, hold, inverse_mass, passed_rest, start_step,
                           stick_or_break)

#: rows of the scratch array: the stage's point (q, q̇) and torque, the weighted sums of the
#: stages' q̇ and q̈
POINT_Q, POINT_V, TORQUE, SUM_V, SUM_A = range(5)
NOT_FINITE = -1   # sensed_step's status for a torque that is not finite
ALIGNED = int(rd.LOCAL_WORLD_ALIGNED)   # the Jacobian's reference, as the kernels take it
#: rows of the impact scratch (n + IMPACT_ROWS, n): after the (n, n) block of the pivoting's
#: matrix, each joint's side (+1 at its lower stop, -1 at its upper, 0 free), its velocity
#: towards the inside s q̇, whether it is in the active set, the impulses, the right-hand side
SIDE, INWARD, ACTIVE, IMPULSE, RHS = range(5)
IMPACT_ROWS = 5


@exact
def stage_torque(tau, damping, v, J, F, wrench, out):
    """out = τ − D q̇ (+ Jᵀ F if ``wrench``), Jᵀ F summed over F's rows in order."""
    for j in range(out.shape[0]):
        out[j] = tau[j] - damping[j] * v[j]
        if wrench:
            load = J[0, j] * F[0]
            for r in range(1, 6):
                load += J[r, j] * F[r]
            out[j] = out[j] + load


@exact
def rk4_stage(s, h, q, v, a, k):
    """Classical RK4 on x = (q, q̇), ẋ = (q̇, q̈): take stage s's q̈ = a at the point in k.

    Stages 0-2 set the next point in k; stage 3 sets (q, q̇) to the step's end:
    q + h/6 (q̇ + 2 q̇₂ + 2 q̇₃ + q̇₄), q̇ + h/6 (q̈₁ + 2 q̈₂ + 2 q̈₃ + q̈₄).
    """
    c = h if s == 2 else h / 2   # from the start to the next point: h/2, h/2, h
    for i in range(q.shape[0]):
        if s == 0:
            k[SUM_V, i], k[SUM_A, i] = v[i], a[i]
        else:   # weights 2, 2, 1 of q̈₂, q̈₃, q̈₄ (and of q̇₂, q̇₃, q̇₄ below)
            k[SUM_A, i] = k[SUM_A, i] + (a[i] if s == 3 else 2 * a[i])
        if s < 3:
            k[POINT_Q, i] = q[i] + c * k[POINT_V, i]
            k[POINT_V, i] = v[i] + c * a[i]
            k[SUM_V, i] = k[SUM_V, i] + (k[POINT_V, i] if s == 2 else 2 * k[POINT_V, i])
    if s == 3:
        for i in range(q.shape[0]):
            q[i] = q[i] + h / 6 * k[SUM_V, i]
            v[i] = v[i] + h / 6 * k[SUM_A, i]


@exact
def beyond_stops(limits, q):
    """Whether a joint is beyond its stop: q < lower or q > upper (``limits`` rows)."""
    for i in range(q.shape[0]):
        if q[i] < limits[0, i] or q[i] > limits[1, i]:
            return True
    return False


@exact
def resting_on_stops(limits, q, v, x):
    """Mark in x[SIDE] the joints resting on a stop (q at the limit, q̇ = 0); whether any is."""
    any_ = False
    for i in range(q.shape[0]):
        x[SIDE, i] = 0.0
        if v[i] == 0.0 and q[i] == limits[0, i]:
            x[SIDE, i], any_ = 1.0, True
        elif v[i] == 0.0 and q[i] == limits[1, i]:
            x[SIDE, i], any_ = -1.0, True
    return any_


@exact
def stop_reactions(W, x, A, rate):
    """Add to ``rate`` (q̇ or q̈) M⁻¹ S μ, μ ≥ 0 on the joints x[SIDE] marks (module docstring).

    ``W``: M(q), overwritten by M⁻¹. Afterwards no marked joint's rate points outwards, and
    those the stops hold have rate exactly 0. False if M is not positive definite.
    """
    n = W.shape[0]
    for i in range(n):
        x[INWARD, i] = x[SIDE, i] * rate[i]
        x[ACTIVE, i] = 1.0 if x[INWARD, i] < 0.0 else 0.0
    if not cholesky(W):
        return False
    cholesky_inverse(W)
    for _ in range(4 * n + 16):   # Murty's pivoting: finite for S W S positive definite
        if not active_set_solve(W, x[ACTIVE], x[SIDE], x[INWARD], x[IMPULSE], x[RHS], A):
            return False
        flip = -1
        for i in range(n):
            if x[SIDE, i] == 0.0:
                continue
            if x[ACTIVE, i] == 1.0 and x[IMPULSE, i] < 0.0:
                flip = i
                break
            if x[ACTIVE, i] == 0.0 and inward_after(W, x, i) < -1e-12 * (1.0 + abs(rate[i])):
                flip = i
                break
        if flip < 0:
            break
        x[ACTIVE, flip] = 1.0 - x[ACTIVE, flip]
    for i in range(n):
        change = 0.0
        for j in range(n):
            change += W[i, j] * x[SIDE, j] * x[IMPULSE, j]
        rate[i] = 0.0 if x[ACTIVE, i] == 1.0 else rate[i] + change
    return True


@exact
def inelastic_stops(limits, q, v, W, scratch):
    """Put the joints beyond a stop on it and take the inelastic impact (module docstring).

    ``W``: M(q) at the stops (overwritten); ``q`` is clamped in place, ``v`` gets the impulses'
    velocity change. Returns False (nothing changed but q) if M is not positive definite.
    """
    n = q.shape[0]
    x = scratch[n:]
    for i in range(n):
        x[SIDE, i] = 0.0
        if q[i] <= limits[0, i]:
            q[i], x[SIDE, i] = limits[0, i], 1.0
        elif q[i] >= limits[1, i]:
            q[i], x[SIDE, i] = limits[1, i], -1.0
    return stop_reactions(W, x, scratch[:n], v)


@exact
def inward_after(W, x, i):
    """s_i (rate_i + (W S μ)_i) for joint i: its rate towards the inside after x[IMPULSE]."""
    w = x[INWARD, i]
    for j in range(W.shape[0]):
        w += x[SIDE, i] * W[i, j] * x[SIDE, j] * x[IMPULSE, j]
    return w


@exact
def rk4_step(table, frames, tip, h, damping, tau, F, wrench, q, v, ws, J, k, a, limits, W,
             scratch):
    """One RK4 step of q̈ = M⁻¹ (τ − D q̇ + Jᵀ F − C q̇ − g − τ_f) in place on (q, q̇).

    End stops ``limits`` (lower, upper rows; ±inf: none), W and scratch their workspace: the
    joints resting on a stop at the start are held by its reaction at every stage
    (``stop_reactions`` on q̈), and those beyond one at the end take ``inelastic_stops``.
    The status: 0, or NOT_POSITIVE_DEFINITE with (q, q̇) unchanged by a stage (or clamped, if
    M(q) at a stop is not positive definite).
    """
    n = q.shape[0]
    resting = resting_on_stops(limits, q, v, scratch[n:])
    k[POINT_Q], k[POINT_V] = q, v
    for s in range(4):
        if wrench:
            frame_jacobian_state(table, frames, tip, ALIGNED, k[POINT_Q], ws, J)
        stage_torque(tau, damping, k[POINT_V], J, F, wrench, k[TORQUE])
        if not forward_dynamics_state(table, k[POINT_Q], k[POINT_V], k[TORQUE], NO_WRENCHES,
                                      ws, a):
            return NOT_POSITIVE_DEFINITE
        if resting:   # the stops' reaction at this stage
            mass_matrix_state(table, k[POINT_Q], ws, W)
            if not stop_reactions(W, scratch[n:], scratch[:n], a):
                return NOT_POSITIVE_DEFINITE
        rk4_stage(s, h, q, v, a, k)
    if beyond_stops(limits, q):
        for i in range(q.shape[0]):   # M at the stops
            k[POINT_Q, i] = min(max(q[i], limits[0, i]), limits[1, i])
        mass_matrix_state(table, k[POINT_Q], ws, W)
        if not inelastic_stops(limits, q, v, W, scratch):
            return NOT_POSITIVE_DEFINITE
    return 0


@exact
def rk4_step_dry(table, frames, tip, h, damping, tau, F, wrench, q, v, ws, J, k, a, limits, W,
                 scratch, dry):
    """``rk4_step`` with the dry friction ``dry`` that holds (dry_friction's module docstring).

    Joints at rest are brought to rest and stick or break away at the start; the held ones keep
    q̈ = 0 at every stage; sliding ones take the dry friction at each stage's velocity; those
    that passed through rest over the step are brought to rest at its end.
    """
    n = q.shape[0]
    A = scratch[:n]
    if at_rest(dry, v):
        if not inverse_mass(table, q, ws, W) or not hold(W, dry, HELD, v, A):
            return NOT_POSITIVE_DEFINITE
        if wrench:
            frame_jacobian_state(table, frames, tip, ALIGNED, q, ws, J)
        stage_torque(tau, damping, v, J, F, wrench, k[TORQUE])
        dry_torque(dry, v, k[TORQUE])
        if not forward_dynamics_state(table, q, v, k[TORQUE], NO_WRENCHES, ws, a) or \
                not stick_or_break(W, dry, a, A):
            return NOT_POSITIVE_DEFINITE
    start_step(dry, v)
    held = any_held(dry)
    resting = resting_on_stops(limits, q, v, scratch[n:])
    k[POINT_Q], k[POINT_V] = q, v
    for s in range(4):
        if wrench:
            frame_jacobian_state(table, frames, tip, ALIGNED, k[POINT_Q], ws, J)
        stage_torque(tau, damping, k[POINT_V], J, F, wrench, k[TORQUE])
        dry_torque(dry, k[POINT_V], k[TORQUE])
        if not forward_dynamics_state(table, k[POINT_Q], k[POINT_V], k[TORQUE], NO_WRENCHES,
                                      ws, a):
            return NOT_POSITIVE_DEFINITE
        if held:   # the held joints' friction holds them at this stage
            if not inverse_mass(table, k[POINT_Q], ws, W) or not hold(W, dry, HELD, a, A):
                return NOT_POSITIVE_DEFINITE
        if resting:
            mass_matrix_state(table, k[POINT_Q], ws, W)
            if not stop_reactions(W, scratch[n:], A, a):
                return NOT_POSITIVE_DEFINITE
        rk4_stage(s, h, q, v, a, k)
    if beyond_stops(limits, q):
        for i in range(n):
            k[POINT_Q, i] = min(max(q[i], limits[0, i]), limits[1, i])
        mass_matrix_state(table, k[POINT_Q], ws, W)
        if not inelastic_stops(limits, q, v, W, scratch):
            return NOT_POSITIVE_DEFINITE
    if passed_rest(dry, v):
        if not inverse_mass(table, q, ws, W) or not hold(W, dry, STOPPED, v, A):
            return NOT_POSITIVE_DEFINITE
    return 0


@exact
def sensed_step(table, frames, tip, h, damping, command, friction, F, wrench, q, v, ws, J, k, a,
                tau, effort, limits, W, scratch):
    """``effort`` = command − D q̇ at the start, then ``rk4_step`` with τ = command − friction.

    The status: rk4_step's, or NOT_FINITE (nothing stepped) where τ is not finite.
    """
    stage_torque(command, damping, v, J, F, False, effort)
    for i in range(tau.shape[0]):
        tau[i] = command[i] - friction[i]
        if not np.isfinite(tau[i]):
            return NOT_FINITE
    return rk4_step(table, frames, tip, h, damping, tau, F, wrench, q, v, ws, J, k, a, limits,
                    W, scratch)


class InternalEngine(Engine):
    """RK4 on q̈ = M⁻¹ (τ − D q̇ + J(q)ᵀ F − C q̇ − g − τ_f), J the tip's Jacobian.

    J (LOCAL_WORLD_ALIGNED) is evaluated at every stage: F stays at the tip origin, in base axes,
    over the step. The joints' armature (in M) and friction τ_f come with the forward dynamics
    of ``model``. The state is kept in model order, updated in place.
    """

    def __init__(self, model, joint_names, q0, dt, damping=None, urdf_xml=None, payload=None,
                 end_stops=True):
        super().__init__(model, joint_names, q0, dt, damping, urdf_xml, payload, end_stops)
        self.data = rd.Data(self.model)
        nv = self.model.nv
        #: the end stops in model order, rows lower and upper (±inf: none, or end stops off)
        self._limits = np.array([self._to_model(self.lower), self._to_model(self.upper)])
        self._W, self._impact = np.zeros((nv, nv)), np.zeros((nv + IMPACT_ROWS, nv))
        self._damping = self._to_model(self.damping)
        self._q, self._v = self._to_model(self.q0), np.zeros(self.model.nv)
        nv = self.model.nv
        self._tau, self._F, self._J = np.zeros(nv), np.zeros(6), np.zeros((6, nv))
        self._k, self._a = np.zeros((5, nv)), np.zeros(nv)
        self._tip = -1 if self.model.tip is None else self.model.frame_index(self.model.tip)
        self._dry = None   # dry friction that holds (hold_dry_friction), off

    def hold_dry_friction(self, breakaway, stribeck_velocity=0.05):
        """Make the arm's Coulomb friction dry friction that holds (simulation.dry_friction).

        ``breakaway``: f_s per joint (``joint_names`` order; a number: every joint), each at
        least the model's Coulomb level f_c; a joint with f_s = 0 has none. The model's smooth
        Coulomb and Stribeck terms (tanh) are replaced by it, its viscous friction stays.
        ``stribeck_velocity`` v_s > 0: the friction decays from f_s to f_c over it.
        """
        if self.model.mimic:
            raise ValueError('dry friction that holds takes a model without mimic joints')
        m, nv = self.model, self.model.nv
        f_s = np.broadcast_to(np.asarray(breakaway, dtype=float), (nv,))
        f_s = self._to_model(np.array(f_s))
        short = np.flatnonzero(~(f_s >= m.coulomb))
        if short.size or not stribeck_velocity > 0:
            raise ValueError(
                'dry friction needs a breakaway torque >= the Coulomb friction at every joint '
                f'and a Stribeck velocity > 0; got breakaway {f_s.tolist()} below Coulomb at '
                f'{[m.joint_names[i] for i in short]}, Stribeck velocity {stribeck_velocity}')
        self._dry = np.zeros((DRY_ROWS, nv))
        self._dry[COULOMB], self._dry[BREAKAWAY], self._dry[STRIBECK] = \
            m.coulomb, f_s, stribeck_velocity
        self.model = m.replace(coulomb=np.zeros(nv), stiction=np.zeros(nv))
        self.data = rd.Data(self.model)

    @property
    def holding(self):
        """The joints dry friction held over the last step (None: no dry friction)."""
        return None if self._dry is None else (self._dry[HELD] == 1.0)[self.order]

    @property
    def q(self):
        """Joint positions."""
        return self._q[self.order]

    @property
    def v(self):
        """Joint velocities."""
        return self._v[self.order]

    def _qdd(self, q, v, tau, F):
        """Forward dynamics in model order, by the public functions."""
        J = self._J
        if F is not None:
            J = rd.frame_jacobian(self.model, q, self.model.tip, rd.LOCAL_WORLD_ALIGNED,
                                  data=self.data)
        torque = np.empty(self.model.nv)
        stage_torque(tau, self._damping, v, J, self._F if F is None else F, F is not None,
                     torque)
        return rd.forward_dynamics(self.model, q, v, torque, data=self.data)

    def _advance(self, tau, F):
        """Classical RK4 on x = (q, q̇), ẋ = (q̇, q̈(q, q̇)): four forward-dynamics calls."""
        self._tau[self.order] = tau
        wrench = F is not None
        if wrench:
            self._F[:] = F
        if self.model.mimic:
            return self._advance_mimic(wrench)
        m = self.model
        if self._dry is not None:
            status = rk4_step_dry(
                m.table, m.frames, self._tip, self.dt, self._damping, self._tau, self._F, wrench,
                self._q, self._v, self.data.ws, self._J, self._k, self._a, self._limits, self._W,
                self._impact, self._dry)
            if status:
                raise argument_error(m, status)
            return
        status = rk4_step(m.table, m.frames, self._tip, self.dt, self._damping, self._tau,
                          self._F, wrench, self._q, self._v, self.data.ws, self._J, self._k,
                          self._a, self._limits, self._W, self._impact)
        if status:
            raise argument_error(m, status)

    def sensed_step(self, command, friction, effort, wrench=None, wrench_frame='base'):
        """``step`` as a torque-sensing arm with its damping outside the sensor, in one call.

        Vectors in model order, float64: τ = command − friction is applied, and ``effort`` is
        set to the joint torque the sensors measure, command − D q̇ at the start of the step
        (also where this raises). A τ that is not finite raises ValueError, as in ``step``, and
        so does a diverged state, both with the state unchanged.
        """
        if self.model.mimic or self._dry is not None:
            raise ValueError('sensed_step takes a model without mimic joints or dry friction: '
                             'use step')
        F = self.tip_wrench(wrench, wrench_frame)
        if F is not None:
            self._F[:] = F
        m = self.model
        status = sensed_step(m.table, m.frames, self._tip, self.dt, self._damping, command,
                             friction, self._F, F is not None, self._q, self._v, self.data.ws,
                             self._J, self._k, self._a, self._tau, effort, self._limits,
                             self._W, self._impact)
        if status == NOT_FINITE:
            raise ValueError(f'tau must be {m.nv} finite numbers, got {self._tau.tolist()}')
        if status:
            raise argument_error(m, status)
        self.effort = self._tau[self.order]
        self.steps += 1

    def _advance_mimic(self, wrench):
        """The same stages, each q̈ from the public functions (independent coordinates)."""
        k, F, n = self._k, self._F if wrench else None, self.model.nv
        resting = resting_on_stops(self._limits, self._q, self._v, self._impact[n:])
        k[POINT_Q], k[POINT_V] = self._q, self._v
        for s in range(4):
            a = self._qdd(k[POINT_Q], k[POINT_V], self._tau, F)
            if resting:
                self._W[:] = rd.mass_matrix(self.model, k[POINT_Q], data=self.data)
                if not stop_reactions(self._W, self._impact[n:], self._impact[:n], a):
                    raise argument_error(self.model, NOT_POSITIVE_DEFINITE)
            rk4_stage(s, self.dt, self._q, self._v, a, k)
        if beyond_stops(self._limits, self._q):
            at_stops = np.clip(self._q, *self._limits)
            self._W[:] = rd.mass_matrix(self.model, at_stops, data=self.data)
            if not inelastic_stops(self._limits, self._q, self._v, self._W, self._impact):
                raise argument_error(self.model, NOT_POSITIVE_DEFINITE)

    def _acceleration(self, tau, F):
        return self._qdd(self._q, self._v, self._to_model(tau), F)[self.order]

    def _set_state(self, q, v):
        self._q, self._v = self._to_model(q), self._to_model(v)

    def _holding_torque(self, F):
        m, q = self.model, self._q
        tau = rd.gravity(m, q, data=self.data)
        if F is not None:
            tau = tau - rd.frame_jacobian(m, q, m.tip, rd.LOCAL_WORLD_ALIGNED, data=self.data).T @ F
        return tau[self.order]

    def _tip_rotation(self):
        return rd.frame_pose(self.model, self._q, self.model.tip, data=self.data)[:3, :3]
