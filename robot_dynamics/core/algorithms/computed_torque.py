"""Computed torque's commanded joint acceleration in one compiled pass (Lynch & Park §11.4.1).

q̈ = q̈_d + K_p e + K_d ė + z, e = q_d − q (wrapped into [−π, π) on continuous joints: the
short way round), ė = q̇_d − q̇, z the integral term; τ = rnea(q, q̇, q̈) (core/control.py). One
kernel, so that ComputedTorque and a controller's compiled cycle
(nodes/dynamics_controller/command_cycle.py) compute it with the same rounding.
"""
import numpy as np

from .._jit import jit

TWO_PI = 2.0 * np.pi


@jit
def commanded_acceleration(q, v, q_d, v_d, a_d, kp, kd, z, continuous, a):
    """a = q̈_d + K_p e + K_d ė + z for one state (every argument (nv,), a written)."""
    for i in range(q.size):
        e = q_d[i] - q[i]
        if continuous[i]:
            e = (e + np.pi) % TWO_PI - np.pi
        a[i] = a_d[i] + kp[i] * e + kd[i] * (v_d[i] - v[i]) + z[i]
