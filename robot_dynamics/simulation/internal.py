"""The internal engine: classical RK4 on robot_dynamics' forward dynamics.

One step is one compiled call (``rk4_step``) of the core's kernels, forward_dynamics_state and
frame_jacobian_state, for a model without mimic joints; with mimic joints each stage's q̈ comes
from the public functions, which solve in independent coordinates. Both compose the stages with
the same kernels (``stage_torque``, ``rk4_stage``), compiled ``exact``: every operation rounded
as the same steps on numpy arrays round it.
"""
import numpy as np

import robot_dynamics as rd
from robot_dynamics.core._jit import exact
from robot_dynamics.core.algorithms.forward_dynamics import forward_dynamics_state
from robot_dynamics.core.algorithms.jacobians import frame_jacobian_state
from robot_dynamics.core.arguments import NOT_POSITIVE_DEFINITE, NO_WRENCHES, argument_error

from .base import Engine

#: rows of the scratch array: the stage's point (q, q̇) and torque, the weighted sums of the
#: stages' q̇ and q̈
POINT_Q, POINT_V, TORQUE, SUM_V, SUM_A = range(5)
NOT_FINITE = -1   # sensed_step's status for a torque that is not finite
ALIGNED = int(rd.LOCAL_WORLD_ALIGNED)   # the Jacobian's reference, as the kernels take it


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
def rk4_step(table, frames, tip, h, damping, tau, F, wrench, q, v, ws, J, k, a):
    """One RK4 step of q̈ = M⁻¹ (τ − D q̇ + Jᵀ F − C q̇ − g − τ_f) in place on (q, q̇).

    The status: 0, or NOT_POSITIVE_DEFINITE with (q, q̇) unchanged.
    """
    k[POINT_Q], k[POINT_V] = q, v
    for s in range(4):
        if wrench:
            frame_jacobian_state(table, frames, tip, ALIGNED, k[POINT_Q], ws, J)
        stage_torque(tau, damping, k[POINT_V], J, F, wrench, k[TORQUE])
        if not forward_dynamics_state(table, k[POINT_Q], k[POINT_V], k[TORQUE], NO_WRENCHES,
                                      ws, a):
            return NOT_POSITIVE_DEFINITE
        rk4_stage(s, h, q, v, a, k)
    return 0


@exact
def sensed_step(table, frames, tip, h, damping, command, friction, F, wrench, q, v, ws, J, k, a,
                tau, effort):
    """``effort`` = command − D q̇ at the start, then ``rk4_step`` with τ = command − friction.

    The status: rk4_step's, or NOT_FINITE (nothing stepped) where τ is not finite.
    """
    stage_torque(command, damping, v, J, F, False, effort)
    for i in range(tau.shape[0]):
        tau[i] = command[i] - friction[i]
        if not np.isfinite(tau[i]):
            return NOT_FINITE
    return rk4_step(table, frames, tip, h, damping, tau, F, wrench, q, v, ws, J, k, a)


class InternalEngine(Engine):
    """RK4 on q̈ = M⁻¹ (τ − D q̇ + J(q)ᵀ F − C q̇ − g − τ_f), J the tip's Jacobian.

    J (LOCAL_WORLD_ALIGNED) is evaluated at every stage: F stays at the tip origin, in base axes,
    over the step. The joints' armature (in M) and friction τ_f come with the forward dynamics
    of ``model``. The state is kept in model order, updated in place.
    """

    def __init__(self, model, joint_names, q0, dt, damping=None, urdf_xml=None, payload=None):
        super().__init__(model, joint_names, q0, dt, damping, urdf_xml, payload)
        self.data = rd.Data(self.model)
        self._damping = self._to_model(self.damping)
        self._q, self._v = self._to_model(self.q0), np.zeros(self.model.nv)
        nv = self.model.nv
        self._tau, self._F, self._J = np.zeros(nv), np.zeros(6), np.zeros((6, nv))
        self._k, self._a = np.zeros((5, nv)), np.zeros(nv)
        self._tip = -1 if self.model.tip is None else self.model.frame_index(self.model.tip)

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
        status = rk4_step(m.table, m.frames, self._tip, self.dt, self._damping, self._tau,
                          self._F, wrench, self._q, self._v, self.data.ws, self._J, self._k,
                          self._a)
        if status:
            raise argument_error(m, status)

    def sensed_step(self, command, friction, effort, wrench=None, wrench_frame='base'):
        """``step`` as a torque-sensing arm with its damping outside the sensor, in one call.

        Vectors in model order, float64: τ = command − friction is applied, and ``effort`` is
        set to the joint torque the sensors measure, command − D q̇ at the start of the step
        (also where this raises). A τ that is not finite raises ValueError, as in ``step``, and
        so does a diverged state, both with the state unchanged.
        """
        if self.model.mimic:
            raise ValueError('sensed_step takes a model without mimic joints: use step')
        F = self.tip_wrench(wrench, wrench_frame)
        if F is not None:
            self._F[:] = F
        m = self.model
        status = sensed_step(m.table, m.frames, self._tip, self.dt, self._damping, command,
                             friction, self._F, F is not None, self._q, self._v, self.data.ws,
                             self._J, self._k, self._a, self._tau, effort)
        if status == NOT_FINITE:
            raise ValueError(f'tau must be {m.nv} finite numbers, got {self._tau.tolist()}')
        if status:
            raise argument_error(m, status)
        self.effort = self._tau[self.order]
        self.steps += 1

    def _advance_mimic(self, wrench):
        """The same stages, each q̈ from the public functions (independent coordinates)."""
        k, F = self._k, self._F if wrench else None
        k[POINT_Q], k[POINT_V] = self._q, self._v
        for s in range(4):
            a = self._qdd(k[POINT_Q], k[POINT_V], self._tau, F)
            rk4_stage(s, self.dt, self._q, self._v, a, k)

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
