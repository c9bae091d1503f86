"""Forward dynamics q̈ = M(q)^{-1} (τ + Σ J_i^T F_ext,i - C q̇ - g), via CRBA and Cholesky (L&P §8.5)."""
import numpy as np

from .._jit import jit
from ..arguments import body_wrenches, joint_vector, workspace
from .crba import crba_kernel
from .linalg import cholesky, cholesky_solve
from .rnea import rnea_kernel


@jit
def forward_dynamics_kernel(topology, body, q, v, tau, gravity, f_ext, ws, M, qdd):
    """qdd = M^{-1} (τ - rnea(q, q̇, 0, f_ext)); False if M is not positive definite."""
    qdd[:] = 0.0
    rnea_kernel(topology, body, q, v, qdd, gravity, f_ext, ws, qdd)  # a is read before τ is written
    for i in range(qdd.shape[0]):
        qdd[i] = tau[i] - qdd[i]
    crba_kernel(topology, body, q, ws, M)
    if not cholesky(M):
        return False
    cholesky_solve(M, qdd)
    return True


def forward_dynamics(model, q, v, tau, f_ext=None, data=None):
    """Joint accelerations q̈ produced by joint torques τ (and body wrenches f_ext) at (q, q̇)."""
    data = workspace(model, data)
    qdd = np.empty(model.nv)
    ok = forward_dynamics_kernel(model.topology, model.body, joint_vector(model, q, 'q'),
                                 joint_vector(model, v, 'v'), joint_vector(model, tau, 'tau'),
                                 model.gravity, body_wrenches(model, f_ext), data.ws, data.M, qdd)
    if not ok:
        raise ValueError('mass matrix is not positive definite at this configuration')
    return qdd
