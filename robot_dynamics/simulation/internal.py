"""The internal engine: classical RK4 on robot_dynamics' forward dynamics."""
import numpy as np

import robot_dynamics as rd

from .base import Engine


class InternalEngine(Engine):
    """RK4 on q̈ = M⁻¹ (τ − D q̇ + J(q)ᵀ F − C q̇ − g − τ_f), J the tip's Jacobian.

    J (LOCAL_WORLD_ALIGNED) is evaluated at every stage: F stays at the tip origin, in base axes,
    over the step. The joints' armature (in M) and friction τ_f come with rd.forward_dynamics of
    ``model``.
    """

    def __init__(self, model, joint_names, q0, dt, damping=None, urdf_xml=None, payload=None):
        super().__init__(model, joint_names, q0, dt, damping, urdf_xml, payload)
        self.data = rd.Data(self.model)
        self._damping = self._to_model(self.damping)
        self._q, self._v = self._to_model(self.q0), np.zeros(self.model.nv)

    @property
    def q(self):
        """Joint positions."""
        return self._q[self.order]

    @property
    def v(self):
        """Joint velocities."""
        return self._v[self.order]

    def _qdd(self, q, v, tau, F):
        """Forward dynamics in model order."""
        tau = tau - self._damping * v
        if F is not None:
            J = rd.frame_jacobian(self.model, q, self.model.tip, rd.LOCAL_WORLD_ALIGNED,
                                  data=self.data)
            tau = tau + J.T @ F
        return rd.forward_dynamics(self.model, q, v, tau, data=self.data)

    def _advance(self, tau, F):
        """Classical RK4 on x = (q, q̇), ẋ = (q̇, q̈(q, q̇)): four forward-dynamics calls."""
        tau, h, q, v = self._to_model(tau), self.dt, self._q, self._v
        a1 = self._qdd(q, v, tau, F)
        v2 = v + h / 2 * a1
        a2 = self._qdd(q + h / 2 * v, v2, tau, F)
        v3 = v + h / 2 * a2
        a3 = self._qdd(q + h / 2 * v2, v3, tau, F)
        v4 = v + h * a3
        a4 = self._qdd(q + h * v3, v4, tau, F)
        self._q = q + h / 6 * (v + 2 * v2 + 2 * v3 + v4)
        self._v = v + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)

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
